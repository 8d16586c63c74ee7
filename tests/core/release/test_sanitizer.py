"""dprelease.core.release.sanitizer + `dprelease sanitize`: folder checks, what the parquet holds, fresh noise by default."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.pipeline import registry
from dprelease.cli import main
from dprelease.core.errors import ReleaseError
from dprelease.core.io import write_json
from dprelease.core.release.check import MANIFEST, file_digests
from dprelease.core.release.sanitizer import read_metadata, sanitize_file, verify_sanitizer


def _release(folder, kind="sanitizer", mechanism="toy"):
    folder.mkdir()
    write_json(folder / "model.json", {"d": 3})
    (folder / "README.md").write_text("card\n", encoding="utf-8")
    write_json(folder / MANIFEST, {"kind": kind, "mechanism": mechanism, "files": file_digests(folder)})
    return folder


def _toy(release_dir, texts, *, seed):
    """A stand-in mechanism: a length feature plus seeded Gaussian noise (3 columns)."""
    rng = np.random.default_rng(seed)
    z = np.array([[len(t), 0.0, 1.0] for t in texts]) + rng.normal(size=(len(texts), 3))
    return pd.DataFrame({"z": list(z.astype(np.float32))}), {"epsilon": 1.5, "delta": 1e-5, "guarantee": "toy"}


def _input(tmp_path):
    path = tmp_path / "in.csv"
    pd.DataFrame({"Final Narrative": ["fell from ladder", "cut hand"], "Employer": ["ACME", "Widgets"]}).to_csv(
        path, index=False)
    return path


def test_parquet_holds_rows_draws_and_public_metadata_only(tmp_path):
    rel, out = _release(tmp_path / "rel"), tmp_path / "out.parquet"
    n, meta = sanitize_file(rel, _input(tmp_path), out, lookup=lambda m: _toy, signature_check=False, seed=1)
    table = pd.read_parquet(out)
    assert n == 2 and list(table.columns) == ["row", "z"]  # the employer column is not privatized: not copied
    assert table["row"].tolist() == [1, 2] and len(table["z"][0]) == 3
    stored = read_metadata(out)
    assert stored == meta and stored["mechanism"] == "toy" and stored["epsilon"] == 1.5 and "seed" not in stored


def test_default_noise_is_fresh_and_a_given_seed_repeats(tmp_path):
    rel, src = _release(tmp_path / "rel"), _input(tmp_path)
    draws = []
    for name, seed in (("a", None), ("b", None), ("c", 5), ("d", 5)):
        sanitize_file(rel, src, tmp_path / f"{name}.parquet", lookup=lambda m: _toy, signature_check=False,
                      seed=seed)
        draws.append(np.stack(pd.read_parquet(tmp_path / f"{name}.parquet")["z"]))
    assert not np.allclose(draws[0], draws[1])
    np.testing.assert_array_equal(draws[2], draws[3])


def test_a_classifier_release_is_refused(tmp_path):
    rel = _release(tmp_path / "rel", kind=None)
    with pytest.raises(ReleaseError, match="not a sanitizer release"):
        verify_sanitizer(rel)


def test_a_tampered_file_is_refused_and_nothing_is_written(tmp_path):
    rel, out = _release(tmp_path / "rel"), tmp_path / "out.parquet"
    (rel / "model.json").write_text('{"d": 4}', encoding="utf-8")
    with pytest.raises(ReleaseError, match="sha256 does not match"):
        sanitize_file(rel, _input(tmp_path), out, lookup=lambda m: _toy, signature_check=False)
    assert not out.exists()


def test_a_failing_mechanism_leaves_no_partial_output(tmp_path):
    rel, out = _release(tmp_path / "rel"), tmp_path / "out.parquet"

    def short(release_dir, texts, *, seed):
        return _toy(release_dir, texts[:1], seed=seed)

    with pytest.raises(ReleaseError, match="returned 1 rows for 2"):
        sanitize_file(rel, _input(tmp_path), out, lookup=lambda m: short, signature_check=False)
    assert list(tmp_path.glob("*.parquet")) == [] and list(tmp_path.glob(".out.parquet.*")) == []


def test_unknown_mechanism_and_bad_output_name_are_one_line_cli_errors(tmp_path, capsys):
    rel, src = _release(tmp_path / "rel", mechanism="no-such-mechanism"), _input(tmp_path)
    with pytest.raises(ReleaseError, match="no sanitizer for mechanism 'no-such-mechanism'"):
        registry.sanitizer("no-such-mechanism")
    for out, why in (("out.parquet", "no sanitizer for mechanism"), ("out.csv", "written as parquet")):
        assert main(["sanitize", "--release", str(rel), "--input", str(src), "--output", str(tmp_path / out),
                     "--no-signature-check"]) == 2  # an unsigned toy release: only the opt-out gets this far
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and err[0].startswith("dprelease: warning: --no-signature-check"), err
        assert err[1].startswith("dprelease: error: ") and why in err[1], err
