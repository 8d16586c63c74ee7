"""`predict` on a verified release only: a tampered, corrupt or absurd release folder (even one whose manifest
was edited along with it) and bad input are one stderr line and exit code 2, never a traceback, a huge
allocation or silently wrong codes; inputs are read strictly (UTF-8, cp1252 fallback) and scored in batches."""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import sys
import time

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from dprelease import release as release_mod
from dprelease.cli import main as cli
from dprelease.errors import ReleaseError
from dprelease.io import read_json, write_json
from dprelease.release import file_digests, verify_release
from dprelease.release_check import BOUNDS, safetensors_header

NARRATIVES = [
    "An employee fell from a ladder and fractured his left wrist.",
    "A worker's finger was caught in a press and the fingertip was amputated.",
    "Employee cut his hand on a box cutter and required stitches.",
    "While lifting a heavy box, an employee felt pain in her lower back.",
]


# helpers ----------------------------------------------------------------------------------------------------------
def _copy(run, tmp_path, name: str = "release"):
    """A private copy of a session run's release folder (never write into the session root)."""
    dst = tmp_path / name
    shutil.copytree(run.path(run.params.release), dst)
    return dst


def _rehash(folder) -> None:
    """An attacker who edits the manifest too: ``files`` made to match whatever the folder now holds."""
    manifest = read_json(folder / "release.json")
    manifest["files"] = file_digests(folder)
    write_json(folder / "release.json", manifest)


def _edit_json(folder, name: str, **changes) -> None:
    obj = read_json(folder / name)
    obj.update(changes)
    (folder / name).write_text(json.dumps(obj), encoding="utf-8")


@pytest.fixture
def narratives_csv(tmp_path):
    path = tmp_path / "narratives.csv"
    pd.DataFrame({"id": range(1, len(NARRATIVES) + 1), "Final Narrative": NARRATIVES}).to_csv(path, index=False)
    return path


def _predict(capsys, release, input_csv, output, *extra) -> tuple[int, str, str]:
    rc = cli(["predict", "--release", str(release), "--input", str(input_csv), "--output", str(output), *extra])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err.strip()


def _fails(capsys, release, input_csv, output, *names: str) -> str:
    rc, _, err = _predict(capsys, release, input_csv, output)
    assert rc == 2, err
    assert err.startswith("dprelease: error:") and "\n" not in err, err
    assert "Traceback" not in err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    assert not output.exists()
    assert not list(output.parent.glob(f".{output.name}.*"))  # no temporary sibling left behind
    return err


# the round trip -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_round_trip_head_codes_narratives(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    manifest = verify_release(folder)
    assert manifest == read_json(folder / "release.json") and "files" in manifest
    out = tmp_path / "coded.csv"
    rc, stdout, err = _predict(capsys, folder, narratives_csv, out)
    assert rc == 0, err
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
    folder = _copy(full_run, tmp_path)
    manifest = verify_release(folder)
    assert {"config.json", "tokenizer/vocab.txt", "model.safetensors"} <= set(manifest["files"])
    out = tmp_path / "coded.csv"
    rc, _, err = _predict(capsys, folder, narratives_csv, out)
    assert rc == 0, err
    assert len(pd.read_csv(out)) == len(NARRATIVES)


@pytest.mark.slow
def test_batches_give_the_same_codes(head_run, tmp_path, narratives_csv, capsys, monkeypatch):
    """Scoring 512 at a time (here 3) changes nothing but memory."""
    folder = _copy(head_run, tmp_path)
    whole, batched = tmp_path / "whole.csv", tmp_path / "batched.csv"
    assert _predict(capsys, folder, narratives_csv, whole)[0] == 0
    monkeypatch.setattr(release_mod, "PREDICT_BATCH", 3)
    calls = []
    real = release_mod._score_batches

    def spy(score, texts, *a):
        return real(lambda chunk: calls.append(len(chunk)) or score(chunk), texts, *a)

    monkeypatch.setattr(release_mod, "_score_batches", spy)
    assert _predict(capsys, folder, narratives_csv, batched)[0] == 0
    assert calls == [3, 1]
    a, b = pd.read_csv(whole, dtype=str), pd.read_csv(batched, dtype=str)
    assert a["code"].tolist() == b["code"].tolist()
    assert (a["probability"].astype(float) - b["probability"].astype(float)).abs().max() < 2e-4


# tampering caught by the manifest's hashes -----------------------------------------------------------------------
def _truncate(folder):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def _random_bytes(folder):
    size = (folder / "model.safetensors").stat().st_size
    (folder / "model.safetensors").write_bytes(random.Random(0).randbytes(size))


def _wrong_shape(folder):
    state = load_file(str(folder / "model.safetensors"))
    name = max(state, key=lambda k: state[k].dim())  # a weight matrix
    rows, cols = state[name].shape
    state[name] = torch.zeros(rows, cols + 1)
    save_file(state, str(folder / "model.safetensors"))


def _extra_tensor(folder):
    state = load_file(str(folder / "model.safetensors"))
    state["backdoor.weight"] = torch.zeros(3)
    save_file(state, str(folder / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("tamper", [_truncate, _random_bytes, _wrong_shape],
                         ids=["truncated", "random-bytes", "wrong-shape"])
def test_changed_weights_fail_the_hash(head_run, tmp_path, narratives_csv, capsys, tamper):
    folder = _copy(head_run, tmp_path)
    tamper(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.safetensors",
           "sha256 does not match release.json (tampered or corrupt)")


# ... and by the other checks on their own (manifest edited to match) -----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("tamper, named", [
    (_truncate, "truncated"),
    (_random_bytes, "not a safetensors file"),
    (_wrong_shape, "the architecture in model.json implies"),
    (_extra_tensor, "unexpected backdoor.weight"),
], ids=["truncated", "random-bytes", "wrong-shape", "extra-tensor"])
def test_corrupt_weights_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, tamper, named):
    folder = _copy(head_run, tmp_path)
    tamper(folder)
    _rehash(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.safetensors", named)


@pytest.mark.slow
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, value):
    folder = _copy(head_run, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    name = sorted(state)[0]
    state[name].view(-1)[0] = value
    save_file(state, str(folder / "model.safetensors"))
    _rehash(folder)
    verify_release(folder)  # only loading the weights can tell
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.safetensors", "non-finite weights", name)


@pytest.mark.slow
def test_absurd_hidden_fails_fast_without_allocating(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    _edit_json(folder, "model.json", hidden=2_000_000_000)
    _rehash(folder)
    start = time.perf_counter()
    err = _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.json", "hidden=2000000000", "bounds")
    assert time.perf_counter() - start < 2, err
    # the loader refuses it on its own too (a caller that skipped verify_release)
    from dprelease.backends.head import load_release_head

    start = time.perf_counter()
    with pytest.raises(ReleaseError, match="hidden"):
        load_release_head(folder, read_json(folder / "model.json"), torch.device("cpu"))
    assert time.perf_counter() - start < 2


@pytest.mark.slow
@pytest.mark.parametrize("changes, named", [
    ({"hidden": 8}, "the architecture in model.json implies"),  # within bounds, but not what the weights are
    ({"dim": 0}, "dim=0"),
    ({"n_classes": 10**9}, "n_classes"),
    ({"max_length": 100_000}, "max_length"),
    ({"hidden": "16"}, "hidden must be an integer"),
    ({"backend": "evil"}, "unknown backend 'evil'"),
    ({"backend": ["head"]}, "unknown backend"),
], ids=["hidden-8", "dim-0", "n-classes-huge", "max-length", "hidden-str", "backend", "backend-list"])
def test_edited_model_json_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, changes, named):
    folder = _copy(head_run, tmp_path)
    _edit_json(folder, "model.json", **changes)
    _rehash(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", named)


@pytest.mark.slow
def test_n_classes_differs_from_labels(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    labels = read_json(folder / "labels.json")
    _edit_json(folder, "labels.json", codes=labels["codes"][:-1], titles=labels["titles"][:-1])
    _rehash(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json",
           f"{len(labels['codes']) - 1} codes", f"n_classes={len(labels['codes'])}")


@pytest.mark.slow
def test_titles_differ_from_codes(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    _edit_json(folder, "labels.json", titles=read_json(folder / "labels.json")["titles"][:-1])
    _rehash(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "titles")


# the folder's file list ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_extra_file_outside_the_allow_list(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "notes.txt", "must not be released")


@pytest.mark.slow
def test_extra_allow_listed_file_not_in_manifest(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "config.json", "not listed")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["labels.json", "model.safetensors", "model.json"])
def test_missing_file(head_run, tmp_path, narratives_csv, capsys, name):
    folder = _copy(head_run, tmp_path)
    (folder / name).unlink()
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", name, "missing")


@pytest.mark.slow
def test_symlinked_file(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    real = tmp_path / "elsewhere.json"
    (folder / "labels.json").rename(real)
    (folder / "labels.json").symlink_to(real)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "symbolic link")


@pytest.mark.slow
@pytest.mark.parametrize("manifest, named", [
    (None, "no release.json"),
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe garbage", "not valid JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b"[" * 100_000, "not valid JSON"),
    (b'{"guarantee": {}}', "'files'"),
    (b'{"files": {"model.json": "abc"}}', "not listed"),
    (b'{"files": {"../secret": "00"}}', "may not hold"),
], ids=["missing", "invalid", "binary", "list", "deep", "no-files", "short-list", "escape"])
def test_bad_manifest(head_run, tmp_path, narratives_csv, capsys, manifest, named):
    folder = _copy(head_run, tmp_path)
    if manifest is None:
        (folder / "release.json").unlink()
    else:
        (folder / "release.json").write_bytes(manifest)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", named)


@pytest.mark.slow
def test_bad_digest_format(head_run, tmp_path, narratives_csv, capsys):
    folder = _copy(head_run, tmp_path)
    manifest = read_json(folder / "release.json")
    manifest["files"]["labels.json"] = "not-a-digest"
    write_json(folder / "release.json", manifest)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "not a sha256")


def test_release_folder_missing_or_a_file(tmp_path, narratives_csv, capsys):
    _fails(capsys, tmp_path / "nowhere", narratives_csv, tmp_path / "out.csv", "nowhere", "not found")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    _fails(capsys, tmp_path / "file", narratives_csv, tmp_path / "out.csv", "file", "not a directory")


# the full backend's own checks --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("changes, named", [
    ({"num_hidden_layers": 1000}, "num_hidden_layers=1000"),
    ({"vocab_size": 10**9}, "vocab_size"),
    ({"intermediate_size": 128}, "the architecture in config.json implies"),  # in bounds; not what the weights are
    ({"model_type": "gpt2"}, "model_type"),
    ({"id2label": {"0": "a", "1": "b"}}, "n_classes"),
], ids=["layers", "vocab", "intermediate", "model-type", "labels"])
def test_full_config_checked_before_loading(full_run, tmp_path, narratives_csv, capsys, changes, named):
    folder = _copy(full_run, tmp_path)
    _edit_json(folder, "config.json", **changes)
    _rehash(folder)
    start = time.perf_counter()
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "config.json", named)
    assert time.perf_counter() - start < 30


@pytest.mark.slow
def test_full_loader_bounds_config_on_its_own(full_run, tmp_path):
    """A caller that skipped verify_release still gets a one-line error, not a 1000-layer model."""
    from dprelease.backends.full import load_release_full

    folder = _copy(full_run, tmp_path)
    _edit_json(folder, "config.json", num_hidden_layers=1000)
    start = time.perf_counter()
    with pytest.raises(ReleaseError, match="num_hidden_layers=1000"):
        load_release_full(folder, torch.device("cpu"))
    assert time.perf_counter() - start < 10


@pytest.mark.slow
def test_full_nan_weights(full_run, tmp_path, narratives_csv, capsys):
    folder = _copy(full_run, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    name = sorted(state)[-1]
    state[name].view(-1)[-1] = float("nan")
    save_file(state, str(folder / "model.safetensors"))
    _rehash(folder)
    _fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "non-finite weights")


# output and input ---------------------------------------------------------------------------------------------------
def test_output_is_a_directory(tmp_path, narratives_csv, capsys):
    out = tmp_path / "outdir"
    out.mkdir()
    rc, _, err = _predict(capsys, tmp_path / "nowhere", narratives_csv, out)
    assert rc == 2 and err.startswith("dprelease: error:") and "\n" not in err
    assert "outdir" in err and "directory" in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("device", ["gpu0", "mps"] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_unusable_device(tmp_path, narratives_csv, capsys, device):
    rc, _, err = _predict(capsys, tmp_path / "nowhere", narratives_csv, tmp_path / "out.csv", "--device", device)
    assert rc == 2 and err.startswith("dprelease: error:") and "\n" not in err and repr(device) in err


@pytest.mark.slow
def test_output_that_cannot_be_written(head_run, tmp_path, narratives_csv, capsys, monkeypatch):
    @contextlib.contextmanager
    def refused(path):
        raise PermissionError(13, "Permission denied", str(path))
        yield  # pragma: no cover

    monkeypatch.setattr(release_mod, "atomic_path", refused)
    _fails(capsys, head_run.path(head_run.params.release), narratives_csv, tmp_path / "out.csv", "out.csv",
           "cannot write the output (Permission denied)")


@pytest.mark.slow
@pytest.mark.parametrize("flag", [[], ["--encoding", "cp1252"]], ids=["auto", "explicit"])
def test_cp1252_input_is_read(head_run, tmp_path, capsys, flag):
    text = "Employee\u2019s colleague \u2014 caf\u00e9 worker \u2014 fell from a ladder"
    path = tmp_path / "win.csv"
    path.write_bytes(f'id,Final Narrative\n1,"{text}"\n2,cut his hand\n'.encode("cp1252"))
    out = tmp_path / "coded.csv"
    rc = cli(["predict", "--release", str(head_run.path(head_run.params.release)), "--input", str(path),
              "--output", str(out), *flag])
    assert rc == 0, capsys.readouterr().err
    coded = pd.read_csv(out, dtype=str, keep_default_na=False, encoding="utf-8")
    assert coded["Final Narrative"].tolist() == [text, "cut his hand"]


@pytest.mark.slow
def test_stray_invalid_byte_in_utf8_input(head_run, tmp_path, capsys):
    raw = "id,Final Narrative\n1,caf\u00e9 worker fell\n2,bad ".encode("utf-8") + b"\xff" + b" byte\n"
    path = tmp_path / "mixed.csv"
    path.write_bytes(raw)
    offset = raw.index(b"\xff")
    err = _fails(capsys, head_run.path(head_run.params.release), path, tmp_path / "out.csv", "mixed.csv",
                 f"offset {offset}", "line 3")
    assert "UTF-8" in err


@pytest.mark.slow
def test_utf8_option_refuses_cp1252(head_run, tmp_path, capsys):
    path = tmp_path / "win.csv"
    path.write_bytes("Final Narrative\nfell \u2014 hard\n".encode("cp1252"))
    rc, _, err = _predict(capsys, head_run.path(head_run.params.release), path, tmp_path / "out.csv",
                          "--encoding", "utf-8")
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


# the header reader alone (no release needed) -----------------------------------------------------------------------
@pytest.fixture
def weights_file(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.ones(3, 4), "b": torch.zeros(5)}, str(path))
    return path


def test_header_of_a_good_file(weights_file):
    assert safetensors_header(weights_file) == {"a": ("F32", (3, 4)), "b": ("F32", (5,))}


@pytest.mark.parametrize("cut", [0, 4, 8, 30, -1], ids=["empty", "4-bytes", "8-bytes", "in-header", "last-byte"])
def test_header_of_a_truncated_file(weights_file, cut):
    data = weights_file.read_bytes()
    weights_file.write_bytes(data[:cut] if cut >= 0 else data[:-1])
    with pytest.raises(ReleaseError) as info:
        safetensors_header(weights_file)
    assert "w.safetensors" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("seed", range(5))
def test_header_of_random_bytes(weights_file, seed):
    weights_file.write_bytes(random.Random(seed).randbytes(weights_file.stat().st_size))
    with pytest.raises(ReleaseError, match="w.safetensors"):
        safetensors_header(weights_file)


def test_header_with_a_lying_length(weights_file):
    """A header whose JSON promises more data than the file holds."""
    header = {"a": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}
    blob = json.dumps(header).encode()
    weights_file.write_bytes(len(blob).to_bytes(8, "little") + blob + b"\x00" * 16)
    with pytest.raises(ReleaseError, match="truncated"):
        safetensors_header(weights_file)


def test_bounds_are_documented_in_one_place():
    assert BOUNDS["head"]["hidden"] == (0, 16384) and BOUNDS["head"]["dim"] == (1, 4096)
    assert BOUNDS["head"]["n_classes"] == (2, 100_000) and BOUNDS["head"]["max_length"] == (8, 512)
    assert BOUNDS["config.json"]["num_hidden_layers"][1] == 48 and BOUNDS["config.json"]["vocab_size"][1] == 250_000
