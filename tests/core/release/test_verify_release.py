"""A release is verified before `predict` loads it: a tampered, corrupt or absurd folder (even one whose
manifest was edited along with it) is one stderr line and exit code 2, never a traceback, a huge
allocation or silently wrong codes."""

from __future__ import annotations

import random

import pytest
import torch
from release_helpers import copy_release, edit_json, fails, rehash, write_narratives
from safetensors.torch import load_file, save_file

from dprelease.core.errors import ReleaseError
from dprelease.core.io import read_json, write_json
from dprelease.core.release.folder import verify_release


@pytest.fixture
def narratives_csv(tmp_path):
    return write_narratives(tmp_path)


def _never(what: str):
    """A stand-in for a constructor or loader the check must refuse before: calling it fails the test."""

    def called(*args, **kwargs):  # pragma: no cover - only reached on failure
        raise AssertionError(f"{what} although the release was refused")

    return called


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
@pytest.mark.parametrize(
    "tamper", [_truncate, _random_bytes, _wrong_shape], ids=["truncated", "random-bytes", "wrong-shape"]
)
def test_changed_weights_fail_the_hash(head_run, tmp_path, narratives_csv, capsys, tamper):
    folder = copy_release(head_run, tmp_path)
    tamper(folder)
    fails(
        capsys,
        folder,
        narratives_csv,
        tmp_path / "out.csv",
        "model.safetensors",
        "sha256 does not match release.json (tampered or corrupt)",
    )


# ... and by the other checks on their own (manifest edited to match) -----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "tamper, named",
    [
        (_truncate, "truncated"),
        (_random_bytes, "not a safetensors file"),
        (_wrong_shape, "the architecture in model.json implies"),
        (_extra_tensor, "unexpected backdoor.weight"),
    ],
    ids=["truncated", "random-bytes", "wrong-shape", "extra-tensor"],
)
def test_corrupt_weights_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, tamper, named):
    folder = copy_release(head_run, tmp_path)
    tamper(folder)
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.safetensors", named)


@pytest.mark.slow
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, value):
    folder = copy_release(head_run, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    name = sorted(state)[0]
    state[name].view(-1)[0] = value
    save_file(state, str(folder / "model.safetensors"))
    rehash(folder)
    verify_release(folder)  # only loading the weights can tell
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.safetensors", "non-finite weights", name)


@pytest.mark.slow
def test_absurd_hidden_fails_fast_without_allocating(head_run, tmp_path, narratives_csv, capsys, monkeypatch):
    from dprelease.core.backends import head

    monkeypatch.setattr(head, "Head", _never("the head was built"))  # refused from model.json alone
    monkeypatch.setattr(head, "load_weights", _never("the weights were read"))
    folder = copy_release(head_run, tmp_path)
    edit_json(folder, "model.json", hidden=2_000_000_000)
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "model.json", "hidden=2000000000", "bounds")
    # the loader refuses it on its own too (a caller that skipped verify_release)
    with pytest.raises(ReleaseError, match="hidden"):
        head.load_release_head(folder, read_json(folder / "model.json"), torch.device("cpu"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes, named",
    [
        ({"hidden": 8}, "the architecture in model.json implies"),  # within bounds, but not what the weights are
        ({"dim": 0}, "dim=0"),
        ({"n_classes": 10**9}, "n_classes"),
        ({"max_length": 100_000}, "max_length"),
        ({"hidden": "16"}, "hidden must be an integer"),
        ({"backend": "evil"}, "unknown backend 'evil'"),
        ({"backend": ["head"]}, "unknown backend"),
    ],
    ids=["hidden-8", "dim-0", "n-classes-huge", "max-length", "hidden-str", "backend", "backend-list"],
)
def test_edited_model_json_with_matching_manifest(head_run, tmp_path, narratives_csv, capsys, changes, named):
    folder = copy_release(head_run, tmp_path)
    edit_json(folder, "model.json", **changes)
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", named)


@pytest.mark.slow
def test_n_classes_differs_from_labels(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    labels = read_json(folder / "labels.json")
    edit_json(folder, "labels.json", codes=labels["codes"][:-1], titles=labels["titles"][:-1])
    rehash(folder)
    fails(
        capsys,
        folder,
        narratives_csv,
        tmp_path / "out.csv",
        "labels.json",
        f"{len(labels['codes']) - 1} codes",
        f"n_classes={len(labels['codes'])}",
    )


@pytest.mark.slow
def test_titles_differ_from_codes(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    edit_json(folder, "labels.json", titles=read_json(folder / "labels.json")["titles"][:-1])
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "titles")


# the folder's file list ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_extra_file_outside_the_allow_list(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "notes.txt", "must not be released")


@pytest.mark.slow
def test_extra_allow_listed_file_not_in_manifest(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "config.json", "not listed")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["labels.json", "model.safetensors", "model.json"])
def test_missing_file(head_run, tmp_path, narratives_csv, capsys, name):
    folder = copy_release(head_run, tmp_path)
    (folder / name).unlink()
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", name, "missing")


@pytest.mark.slow
def test_symlinked_file(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    real = tmp_path / "elsewhere.json"
    (folder / "labels.json").rename(real)
    (folder / "labels.json").symlink_to(real)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "symbolic link")


@pytest.mark.slow
@pytest.mark.parametrize(
    "manifest, named",
    [
        (None, "no release.json"),
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe garbage", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"[" * 100_000, "not valid JSON"),
        (b'{"guarantee": {}}', "'files'"),
        (b'{"files": {"model.json": "abc"}}', "not listed"),
        (b'{"files": {"../secret": "00"}}', "may not hold"),
    ],
    ids=["missing", "invalid", "binary", "list", "deep", "no-files", "short-list", "escape"],
)
def test_bad_manifest(head_run, tmp_path, narratives_csv, capsys, manifest, named):
    folder = copy_release(head_run, tmp_path)
    if manifest is None:
        (folder / "release.json").unlink()
    else:
        (folder / "release.json").write_bytes(manifest)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", named)


@pytest.mark.slow
def test_bad_digest_format(head_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(head_run, tmp_path)
    manifest = read_json(folder / "release.json")
    manifest["files"]["labels.json"] = "not-a-digest"
    write_json(folder / "release.json", manifest)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "labels.json", "not a sha256")


def test_release_folder_missing_or_a_file(tmp_path, narratives_csv, capsys):
    fails(capsys, tmp_path / "nowhere", narratives_csv, tmp_path / "out.csv", "nowhere", "not found")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    fails(capsys, tmp_path / "file", narratives_csv, tmp_path / "out.csv", "file", "not a directory")


# the full backend's own checks --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "changes, named",
    [
        ({"num_hidden_layers": 1000}, "num_hidden_layers=1000"),
        ({"vocab_size": 10**9}, "vocab_size"),
        ({"intermediate_size": 128}, "the architecture in config.json implies"),  # in bounds; not what the weights are
        ({"model_type": "gpt2"}, "model_type"),
        ({"id2label": {"0": "a", "1": "b"}}, "n_classes"),
    ],
    ids=["layers", "vocab", "intermediate", "model-type", "labels"],
)
def test_full_config_checked_before_loading(full_run, tmp_path, narratives_csv, capsys, changes, named, monkeypatch):
    from dprelease.core.backends import full

    monkeypatch.setattr(full, "load_weights", _never("the weights were read"))
    folder = copy_release(full_run, tmp_path)
    edit_json(folder, "config.json", **changes)
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "config.json", named)


@pytest.mark.slow
def test_full_loader_bounds_config_on_its_own(full_run, tmp_path, monkeypatch):
    """A caller that skipped verify_release still gets a one-line error, not a 1000-layer model."""
    import transformers

    from dprelease.core.backends.full import load_release_full

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", _never("config.json was parsed"))
    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_config", _never("a model was built"))
    folder = copy_release(full_run, tmp_path)
    edit_json(folder, "config.json", num_hidden_layers=1000)
    with pytest.raises(ReleaseError, match="num_hidden_layers=1000"):  # refused by its bounds, nothing built
        load_release_full(folder, torch.device("cpu"))


@pytest.mark.slow
def test_full_nan_weights(full_run, tmp_path, narratives_csv, capsys):
    folder = copy_release(full_run, tmp_path)
    state = load_file(str(folder / "model.safetensors"))
    name = sorted(state)[-1]
    state[name].view(-1)[-1] = float("nan")
    save_file(state, str(folder / "model.safetensors"))
    rehash(folder)
    fails(capsys, folder, narratives_csv, tmp_path / "out.csv", "non-finite weights")
