"""dprelease.contracts.layout: every path derives from params.artifacts / params.release / the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params


def test_defaults_relative_to_current_folder():
    lay = Layout.from_params(parse_params({}))
    assert lay == Layout(
        artifacts=Path("artifacts"),
        release=Path("release"),
        metrics=Path("metrics"),
        plots=Path("plots"),
        reports=Path("reports"),
    )
    assert lay.data == Path("artifacts/data")
    assert lay.features == Path("artifacts/features")
    assert lay.draw == Path("artifacts/draw")
    assert lay.evaluation == Path("reports/release")


@pytest.mark.parametrize("root_type", [str, Path])
def test_paths_follow_params_and_root(tmp_path, root_type):
    params = parse_params({"artifacts": "work/arts", "release": "out/rel"})
    lay = Layout.from_params(params, root_type(tmp_path))
    assert lay.artifacts == tmp_path / "work" / "arts"
    assert lay.release == tmp_path / "out" / "rel"
    assert lay.metrics == tmp_path / "metrics"
    assert lay.plots == tmp_path / "plots"
    assert lay.reports == tmp_path / "reports"
    assert lay.data == tmp_path / "work/arts/data"
    assert lay.features == tmp_path / "work/arts/features"
    assert lay.draw == tmp_path / "work/arts/draw"
    assert lay.evaluation == tmp_path / "reports" / "release"


@pytest.mark.parametrize("r", [1, 2, 3])
def test_round_folders(tmp_path, r):
    lay = Layout.from_params(parse_params({"artifacts": "arts"}), tmp_path)
    rnd = tmp_path / "arts" / f"round{r}"
    assert lay.round(r) == rnd
    assert lay.finetune(r) == rnd / "finetune"
    assert lay.swag(r) == rnd / "swag"
    assert lay.weights(r) == rnd / "weights"
    assert lay.sensitivity(r) == rnd / "sensitivity"


def test_layout_is_frozen_and_writes_nothing(tmp_path):
    lay = Layout.from_params(parse_params({}), tmp_path)
    with pytest.raises(AttributeError):
        lay.artifacts = Path("elsewhere")  # type: ignore[misc]
    _ = (lay.data, lay.features, lay.round(1), lay.swag(2), lay.evaluation, lay.draw)
    assert list(tmp_path.iterdir()) == []  # computing paths creates no folder
