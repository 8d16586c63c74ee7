"""dprelease.core.release.sanitizer + `dprelease sanitize`: folder checks, what the parquet holds, fresh noise by default,
the mechanism called in batches (seeds per batch, a progress bar for a large input on a terminal)."""

from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pytest

from dprelease.cli import main
from dprelease.core.errors import ReleaseError
from dprelease.core.io import write_json
from dprelease.core.release import sanitizer as sanitizer_mod
from dprelease.core.release.check import MANIFEST, file_digests
from dprelease.core.release.sanitizer import batch_seed, read_metadata, sanitize_file, verify_sanitizer
from dprelease.pipeline import registry


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
        path, index=False
    )
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
        sanitize_file(rel, src, tmp_path / f"{name}.parquet", lookup=lambda m: _toy, signature_check=False, seed=seed)
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
        assert (
            main(
                [
                    "sanitize",
                    "--release",
                    str(rel),
                    "--input",
                    str(src),
                    "--output",
                    str(tmp_path / out),
                    "--no-signature-check",
                ]
            )
            == 2
        )  # an unsigned toy release: only the opt-out gets this far
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and err[0].startswith("dprelease: warning: --no-signature-check"), err
        assert err[1].startswith("dprelease: error: ") and why in err[1], err


# batches and the progress bar -----------------------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_batch_seeds_first_is_the_seed_then_distinct():
    seeds = [batch_seed(5, i) for i in range(50)]
    assert seeds[0] == 5 and len(set(seeds)) == 50 and all(0 <= s < 2**63 for s in seeds)
    assert [batch_seed(5, i) for i in range(50)] == seeds and batch_seed(6, 1) != seeds[1]


def test_draws_come_in_batches_in_order_and_a_given_seed_repeats(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitizer_mod, "SANITIZE_BATCH", 3)
    calls = []

    def toy(release_dir, texts, *, seed):
        calls.append((len(texts), seed))
        return _toy(release_dir, texts, seed=seed)

    texts = [f"narrative {'x' * i}" for i in range(8)]
    draws, meta = sanitizer_mod._draw_batches(toy, tmp_path, texts, 7, release=tmp_path, mechanism="toy")
    assert [n for n, _ in calls] == [3, 3, 2] and calls[0][1] == 7 and len({s for _, s in calls}) == 3
    z = np.stack(draws["z"])
    assert z.shape == (8, 3) and meta["epsilon"] == 1.5
    np.testing.assert_allclose(z[:, 0], [len(t) for t in texts], atol=6)  # rows stay in input order
    again, _ = sanitizer_mod._draw_batches(toy, tmp_path, texts, 7, release=tmp_path, mechanism="toy")
    np.testing.assert_array_equal(np.stack(again["z"]), z)


def test_a_guarantee_that_changes_between_batches_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitizer_mod, "SANITIZE_BATCH", 1)

    def fickle(release_dir, texts, *, seed):
        frame, meta = _toy(release_dir, texts, seed=seed)
        return frame, meta | {"epsilon": float(seed % 7)}

    with pytest.raises(ReleaseError, match="changed its guarantee between batches"):
        sanitizer_mod._draw_batches(fickle, tmp_path, ["a", "b"], 3, release=tmp_path, mechanism="toy")


@pytest.mark.parametrize("rows, shown", [(10, False), (40, True)])
def test_progress_bar_only_for_large_inputs_on_a_terminal(tmp_path, monkeypatch, rows, shown):
    from dprelease.core.release import folder

    monkeypatch.setattr(folder, "PROGRESS_MIN_ROWS", 40)
    monkeypatch.setattr(sanitizer_mod, "SANITIZE_BATCH", 16)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    sanitizer_mod._draw_batches(_toy, tmp_path, ["a"] * rows, 1, release=tmp_path, mechanism="toy")
    assert ("sanitize" in terminal.getvalue()) is shown
    plain = io.StringIO()  # not a terminal: no bar, whatever the size
    monkeypatch.setattr(sys, "stderr", plain)
    sanitizer_mod._draw_batches(_toy, tmp_path, ["a"] * rows, 1, release=tmp_path, mechanism="toy")
    assert plain.getvalue() == ""
