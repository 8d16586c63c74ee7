"""Private selection stage (docs/algorithms.md, D.10) on a head slice with a validation split: a reachable τ releases
``<release>-selected/`` at 2ε = 4Δ̂, an unreachable τ releases nothing, the test split and a missing
validation split are refused before any draw."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import make_root, run_stages, slice_raw

from dprelease.core.config import parse_params
from dprelease.core.io import read_json
from dprelease.core.release.folder import check_release_folder
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

VAL = 0.3


def _params(**overrides):
    return parse_params(slice_raw(data__validation_size=VAL, selection__enabled=True, **overrides))


@pytest.fixture(scope="module")
def val_run(tmp_path_factory):
    """Every active stage, in-process, on the head slice with ``data.validation_size: 0.3``."""
    params = _params()
    root = make_root(tmp_path_factory.mktemp("selection"))
    summaries = run_stages(params, root, [s.name for s in registry.group(params, "release")])
    return SimpleNamespace(params=params, root=root, summaries=summaries)


def _copy(val_run, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(val_run.root, root)
    return root


def _selected(params, root: Path) -> Path:
    return root / (params.release + "-selected")


# --- the validation split --------------------------------------------------------------------------------------------
def _rows(path: Path) -> list[tuple[str, str]]:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return sorted(zip(df["text"], df["label"]))


def test_stratify_carves_validation_out_of_the_test_half(val_run, tmp_path):
    data = val_run.root / val_run.params.artifacts / "data"
    assert (data / "validation.csv").is_file()
    assert (val_run.root / val_run.params.artifacts / "features" / "validation.safetensors").is_file()
    plain = parse_params(slice_raw(data__validation_size=0.0, ppm__reweight=False))
    root = make_root(tmp_path)
    run_stages(plain, root, ["stratify"])
    plain_data = root / plain.artifacts / "data"
    assert not (plain_data / "validation.csv").exists()
    assert _rows(data / "train.csv") == _rows(plain_data / "train.csv")
    assert sorted(_rows(data / "test.csv") + _rows(data / "validation.csv")) == _rows(plain_data / "test.csv")
    # record-local roles: the validation share is carved out of what would be test, report by report
    summary, former = read_json(val_run.root / "metrics/data.json"), read_json(root / "metrics/data.json")
    assert summary["validation_rows"] > 0 and summary["train_rows"] == former["train_rows"]
    assert summary["test_rows"] + summary["validation_rows"] == former["test_rows"]
    assert read_json(data / "sizes.json")["test_sizes"] != read_json(plain_data / "sizes.json")["test_sizes"]
    assert sum(read_json(data / "sizes.json")["test_sizes"]) == summary["test_rows"]


# --- selection ----------------------------------------------------------------------------------------------------
def test_reachable_tau_selects_at_a_budget_fixed_before_selection(val_run, tmp_path):
    from dprelease.mechanisms.swag_ppm.select import private_select

    root = _copy(val_run, tmp_path)
    # τ = 0: every candidate within Δ passes; one over Δ (P ≈ 1/(S+1)) is a failed try, and then the stop coin
    # (γ = 0.01) ends the search with probability 0.01: a spurious "not found" has probability ≈ 2e-5
    params = _params(selection__tau=0.0, selection__gamma=0.01)
    summary = private_select(params, root)
    assert summary["found"] is True and summary["tau"] == 0.0 and summary["metric"] == "macro_f1"
    private = read_json(root / params.artifacts / "selection" / "private.json")
    assert private["tries"] >= 1 and 0.0 <= max(private["scores"]) <= 1.0
    r = read_json(root / "metrics/reweight.json")["released_round"]
    sens = read_json(root / f"metrics/sensitivity_r{r}.json")["local_sensitivity"]
    g = summary["guarantee"]
    # Δ is the sensitivity pass's Δ̂, fixed before any candidate: the candidates' M* never raise it
    assert g["quantities"]["local_sensitivity"] == sens
    # each candidate's ε divides 2Δ by min(1, T_min) like the release (T_min over all d directions, certified)
    t = read_json(root / f"metrics/temperature_r{r}.json")["temperature"]
    cold = min(1.0, t["subspace_min"], t["all_parameters_min"])
    assert cold < 1e-3 and g["quantities"]["certified_directions"] == g["quantities"]["parameters"]
    assert g["quantities"]["epsilon_per_candidate"] == pytest.approx(2 * sens / cold)
    assert g["epsilon"] == pytest.approx(4 * sens / cold)  # Liu–Talwar: 2ε with ε = 2Δ / min(1, T_min)
    assert read_json(root / "metrics/selection.json") == summary

    folder = _selected(params, root)
    check_release_folder(folder)
    manifest = read_json(folder / "release.json")
    assert manifest["guarantee"] == g
    assert manifest["selection"] == {
        "tau": 0.0,
        "gamma": params.selection.gamma,
        "metric": "macro_f1",
        "composition": summary["composition"],
    }
    assert "ε + 2ε" in summary["composition"]
    assert "selection" in g["mechanism"]
    assert (folder / "model.safetensors").is_file() and (folder / "labels.json").is_file()
    # the ordinary release is untouched and cheaper
    plain = read_json(root / params.release / "release.json")
    assert plain["guarantee"]["epsilon"] < g["epsilon"]


def test_selection_is_reproducible(val_run, tmp_path):
    from dprelease.mechanisms.swag_ppm.select import private_select

    params = _params(selection__tau=0.0, selection__gamma=0.01)
    a = private_select(params, _copy(val_run, tmp_path / "a"))
    b = private_select(params, _copy(val_run, tmp_path / "b"))
    assert a == b


def test_unreachable_tau_releases_nothing(val_run, tmp_path):
    from dprelease.mechanisms.swag_ppm.select import private_select

    root = _copy(val_run, tmp_path)
    base = _params(selection__gamma=0.5)
    # τ ≤ 1 in params.yaml; 1.01 (above any F1) only by bypassing validation
    params = base.model_copy(update={"selection": base.selection.model_copy(update={"tau": 1.01})})
    summary = private_select(params, root)
    private = read_json(root / params.artifacts / "selection" / "private.json")
    assert summary["found"] is False and private["tries"] >= 1
    assert max(private["scores"]) < 1.01 and summary["gamma"] == 0.5
    # the published ε is fixed before selection: the same whatever the number of tries
    r = read_json(root / "metrics/reweight.json")["released_round"]
    sens = read_json(root / f"metrics/sensitivity_r{r}.json")["local_sensitivity"]
    t = read_json(root / f"metrics/temperature_r{r}.json")["temperature"]
    cold = min(1.0, t["subspace_min"], t["all_parameters_min"])  # divided like the release's ε
    assert summary["guarantee"]["epsilon"] == pytest.approx(4 * sens / cold)
    assert not (_selected(params, root) / "release.json").exists()  # only a "nothing released" marker
    assert read_json(root / "metrics/selection.json") == summary


def test_test_split_is_refused_before_any_draw(val_run, tmp_path, monkeypatch):
    import dprelease.mechanisms.swag_ppm.select as ps

    touched = []

    def forbid(name):
        def _f(*a, **k):
            touched.append(name)
            raise AssertionError(f"{name} called")

        return _f

    for name in ("select", "backend_for", "features", "f1_summary", "iter_samples", "write_release"):
        monkeypatch.setattr(ps, name, forbid(name))
    root = _copy(val_run, tmp_path)
    params = _params(selection__split="test", selection__tau=0.0)
    shutil.rmtree(_selected(params, root), ignore_errors=True)  # the fixture's run selected with the defaults
    (root / "metrics/selection.json").unlink(missing_ok=True)
    with pytest.raises(ValueError, match="test split"):
        ps.private_select(params, root)
    assert touched == []
    assert not _selected(params, root).exists()
    assert not (root / "metrics/selection.json").exists()


def test_without_validation_split_the_stage_only_leaves_a_marker(tmp_path):
    """``dvc repro`` runs ``select`` whatever the params: enabled with no validation split, it must
    succeed, release nothing, and say why."""
    from dprelease.mechanisms.swag_ppm.select import private_select

    params = parse_params(slice_raw(data__validation_size=0.0, selection__enabled=True))
    root = make_root(tmp_path)
    run_stages(params, root, ["stratify", "featurize"])
    assert not (root / params.artifacts / "features" / "validation.safetensors").exists()
    summary = private_select(params, root)
    assert "validation_size" in summary["skipped"]
    assert sorted(p.name for p in _selected(params, root).iterdir()) == ["skipped.json"]
    assert read_json(root / "metrics/selection.json") == summary
    default = parse_params(slice_raw())  # selection.enabled false by default: not run, a marker for DVC
    assert not registry.get(default, "select").active(default)
    assert "selection.enabled" in private_select(default, root)["skipped"]


def test_validation_without_features_names_validation_size(val_run, tmp_path):
    from dprelease.mechanisms.swag_ppm.select import private_select

    root = _copy(val_run, tmp_path)
    (root / val_run.params.artifacts / "features" / "validation.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="validation_size"):
        private_select(val_run.params, root)


def test_tries_and_rejected_scores_are_never_published(val_run, tmp_path):
    """docs/guarantees.md, Q: the number of tries and the rejected candidates' scores are not covered by 2ε."""
    from dprelease.mechanisms.swag_ppm.select import private_select

    root = _copy(val_run, tmp_path)
    params = _params(selection__tau=0.0)
    summary = private_select(params, root)
    public = [root / "metrics/selection.json", *(_selected(params, root)).rglob("*")]
    for path in public:
        if path.is_file() and path.suffix == ".json":
            text = path.read_text(encoding="utf-8")
            assert '"tries"' not in text and '"scores"' not in text and "best_score" not in text, path
    assert "tries" not in summary and "best_score" not in summary  # the stage's summary (printed, Prefect result)
