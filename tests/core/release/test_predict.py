"""`predict` on a release: the round trip (head and full backends), its input and output handling
(strict UTF-8 with a cp1252 fallback, one-line errors, no partial output) and batched scoring with a
progress bar only where it helps. Tampered releases: tests/core/release/test_verify_release.py."""

from __future__ import annotations

import contextlib
import io
import sys

import pandas as pd
import pytest
import torch
from release_helpers import NARRATIVES, copy_release, fails, run_key, run_predict, write_narratives

from dprelease.cli import main as cli
from dprelease.core.errors import ReleaseError
from dprelease.core.io import read_json
from dprelease.core.release import folder as release_mod
from dprelease.core.release.folder import verify_release


@pytest.fixture
def narratives_csv(tmp_path):
    return write_narratives(tmp_path)


# the round trip -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_round_trip_head_codes_narratives(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    manifest = verify_release(folder)
    assert manifest == read_json(folder / "release.json") and "files" in manifest
    out = tmp_path / "coded.csv"
    rc, stdout, err = run_predict(capsys, folder, narratives_csv, out, "--key", str(run_key(head_run)))
    assert rc == 0 and err == "", err
    assert f"coded {len(NARRATIVES)} narratives" in stdout
    coded = pd.read_csv(out, dtype=str, keep_default_na=False)
    labels = read_json(folder / "labels.json")
    assert list(coded.columns) == ["id", "Final Narrative", "code", "title", "probability"]
    assert list(coded["Final Narrative"]) == NARRATIVES
    assert set(coded["code"]) <= set(labels["codes"])
    probs = coded["probability"].astype(float)
    assert ((probs >= 1 / len(labels["codes"]) - 1e-4) & (probs <= 1)).all()


@pytest.mark.slow
def test_full_release_verifies_and_codes(full_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(full_run, tmp_path)
    manifest = verify_release(folder)
    assert {"config.json", "tokenizer/vocab.txt", "model.safetensors"} <= set(manifest["files"])
    out = tmp_path / "coded.csv"
    rc, _, err = run_predict(capsys, folder, narratives_csv, out, "--key", str(run_key(full_run)))
    assert rc == 0, err
    assert len(pd.read_csv(out)) == len(NARRATIVES)


@pytest.mark.slow
def test_batches_give_the_same_codes(head_run, tmp_path, narratives_csv, capsys, monkeypatch):
    """Scoring 512 at a time (here 3) changes nothing but memory."""
    folder = copy_release(head_run, tmp_path)
    whole, batched = tmp_path / "whole.csv", tmp_path / "batched.csv"
    key = ("--key", str(run_key(head_run)))
    assert run_predict(capsys, folder, narratives_csv, whole, *key)[0] == 0
    monkeypatch.setattr(release_mod, "PREDICT_BATCH", 3)
    calls = []
    real = release_mod._score_batches

    def spy(score, texts, *a):
        return real(lambda chunk: calls.append(len(chunk)) or score(chunk), texts, *a)

    monkeypatch.setattr(release_mod, "_score_batches", spy)
    assert run_predict(capsys, folder, narratives_csv, batched, *key)[0] == 0
    assert calls == [3, 1]
    a, b = pd.read_csv(whole, dtype=str), pd.read_csv(batched, dtype=str)
    assert a["code"].tolist() == b["code"].tolist()
    assert (a["probability"].astype(float) - b["probability"].astype(float)).abs().max() < 2e-4


# output and input ---------------------------------------------------------------------------------------------------
def test_output_is_a_directory(tmp_path, narratives_csv, capsys):
    out = tmp_path / "outdir"
    out.mkdir()
    rc, _, err = run_predict(capsys, tmp_path / "nowhere", narratives_csv, out)
    assert rc == 2 and err.startswith("dprelease: error:") and "\n" not in err
    assert "outdir" in err and "directory" in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("device", ["gpu0", "mps"] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_unusable_device(tmp_path, narratives_csv, capsys, device):
    rc, _, err = run_predict(capsys, tmp_path / "nowhere", narratives_csv, tmp_path / "out.csv", "--device", device)
    assert rc == 2 and err.startswith("dprelease: error:") and "\n" not in err and repr(device) in err


@pytest.mark.slow
def test_output_that_cannot_be_written(head_run, tmp_path, narratives_csv, capsys, monkeypatch):
    @contextlib.contextmanager
    def refused(path):
        raise PermissionError(13, "Permission denied", str(path))
        yield  # pragma: no cover

    monkeypatch.setattr(release_mod, "atomic_path", refused)
    fails(
        capsys,
        head_run.path(head_run.params.release),
        narratives_csv,
        tmp_path / "out.csv",
        "out.csv",
        "cannot write the output (Permission denied)",
        key=run_key(head_run),
    )


@pytest.mark.slow
@pytest.mark.parametrize("flag", [[], ["--encoding", "cp1252"]], ids=["auto", "explicit"])
def test_cp1252_input_is_read(head_run, tmp_path, capsys, flag):
    text = "Employee\u2019s colleague \u2014 caf\u00e9 worker \u2014 fell from a ladder"
    path = tmp_path / "win.csv"
    path.write_bytes(f'id,Final Narrative\n1,"{text}"\n2,cut his hand\n'.encode("cp1252"))
    out = tmp_path / "coded.csv"
    rc = cli(
        [
            "predict",
            "--release",
            str(head_run.path(head_run.params.release)),
            "--input",
            str(path),
            "--output",
            str(out),
            "--key",
            str(run_key(head_run)),
            *flag,
        ]
    )
    assert rc == 0, capsys.readouterr().err
    coded = pd.read_csv(out, dtype=str, keep_default_na=False, encoding="utf-8")
    assert coded["Final Narrative"].tolist() == [text, "cut his hand"]


@pytest.mark.slow
def test_stray_invalid_byte_in_utf8_input(head_run, tmp_path, capsys):
    raw = "id,Final Narrative\n1,caf\u00e9 worker fell\n2,bad ".encode("utf-8") + b"\xff" + b" byte\n"
    path = tmp_path / "mixed.csv"
    path.write_bytes(raw)
    offset = raw.index(b"\xff")
    err = fails(
        capsys,
        head_run.path(head_run.params.release),
        path,
        tmp_path / "out.csv",
        "mixed.csv",
        f"offset {offset}",
        "line 3",
        key=run_key(head_run),
    )
    assert "UTF-8" in err


@pytest.mark.slow
def test_utf8_option_refuses_cp1252(head_run, tmp_path, capsys):
    path = tmp_path / "win.csv"
    path.write_bytes("Final Narrative\nfell \u2014 hard\n".encode("cp1252"))
    rc, _, err = run_predict(
        capsys,
        head_run.path(head_run.params.release),
        path,
        tmp_path / "out.csv",
        "--encoding",
        "utf-8",
        "--key",
        str(run_key(head_run)),
    )
    assert rc == 2 and "\n" not in err and "not utf-8" in err and "offset" in err


# batches and the progress bar (a stand-in scorer; no release needed) -------------------------------------------------
def _fake_scorer(n_classes: int, calls: list[int], value: float | None = None):
    def score(texts: list[str]) -> torch.Tensor:
        calls.append(len(texts))
        probs = torch.full((len(texts), n_classes), 0.5 / (n_classes - 1))
        probs[torch.arange(len(texts)), torch.tensor([len(t) % n_classes for t in texts])] = 0.5
        if value is not None:
            probs[-1, 0] = value
        return probs

    return score


def test_scoring_is_batched_and_keeps_only_the_arg_max(tmp_path):
    calls: list[int] = []
    texts = ["x" * (i % 7 + 1) for i in range(5000)]
    prob, idx = release_mod._score_batches(_fake_scorer(7, calls), texts, 7, tmp_path)
    assert max(calls) == release_mod.PREDICT_BATCH == 512 and sum(calls) == 5000
    assert idx.tolist() == [len(t) % 7 for t in texts]
    assert prob.shape == (5000,) and torch.allclose(prob, torch.full((5000,), 0.5))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_scores_are_an_error(tmp_path, value):
    with pytest.raises(ReleaseError, match="non-finite scores"):
        release_mod._score_batches(_fake_scorer(3, [], value), ["a", "b"], 3, tmp_path)


def test_scores_of_the_wrong_shape_are_an_error(tmp_path):
    with pytest.raises(ReleaseError, match="shape"):
        release_mod._score_batches(_fake_scorer(3, []), ["a", "b"], 4, tmp_path)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("rows, shown", [(100, False), (release_mod.PROGRESS_MIN_ROWS, True)])
def test_progress_bar_only_for_large_inputs_on_a_terminal(tmp_path, monkeypatch, rows, shown):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    release_mod._score_batches(_fake_scorer(3, []), ["a"] * rows, 3, tmp_path)
    assert ("predict" in terminal.getvalue()) is shown
    plain = io.StringIO()  # not a terminal: no bar, whatever the size
    monkeypatch.setattr(sys, "stderr", plain)
    release_mod._score_batches(_fake_scorer(3, []), ["a"] * rows, 3, tmp_path)
    assert plain.getvalue() == ""
