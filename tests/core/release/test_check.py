"""One verification for every kind of release folder (dprelease.core.release.check)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

from dprelease.core.errors import ReleaseError

# one verification for every kind of release folder -------------------------------------------------------------------
# Each kind is built small here (no pipeline run); each mechanism's own loader must refuse what the shared
# verify_release_folder refuses, with the same one-line message.
NVDP_ARCH = {
    "dim_in": 384,
    "dim": 16,
    "heads": 2,
    "n_classes": 3,
    "max_length": 32,
    "variant": "clipped",
    "pair": False,
    "clip": {"mu": 1.0, "sigma_order": None, "alpha_min": None, "alpha_max": None},
}


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    from dprelease.core.release.signing import ensure_key

    return ensure_key(tmp_path_factory.mktemp("agency") / "keys")[0]


def _classifier(folder, signer):
    from conftest import tiny_head_backend

    from dprelease.core.privacy.guarantee import ppm
    from dprelease.core.release.folder import publish, write_release

    backend = tiny_head_backend(classes=3, hidden=0)
    staging = folder.parent / "staging"
    write_release(
        staging,
        backend,
        backend.build_model(384),
        ["1", "2", "3"],
        ["a", "b", "c"],
        {"guarantee": ppm(1.5, 0.75).as_dict()},
        ["core/release/folder.py"],
    )
    publish(staging, folder, "# card\n", signer=signer)


def _nvdp(folder, signer):
    from dprelease.mechanisms.nvdp.experiment import module_from
    from dprelease.mechanisms.nvdp.sanitizer import write_sanitizer

    write_sanitizer(
        folder, module_from(NVDP_ARCH).state_dict(), NVDP_ARCH, {"epsilon": None}, "# card\n", signer=signer
    )


def _gpp(folder, signer):
    from dprelease.core.backends.encoder import encoder_reference
    from dprelease.core.io import write_json
    from dprelease.core.release.check import file_digests
    from dprelease.core.release.signing import sign_folder
    from dprelease.mechanisms.gpp.model import Encoder

    folder.mkdir()
    save_file(Encoder(384, 4, (8,)).state_dict(), str(folder / "model.safetensors"))
    write_json(folder / "model.json", {"mechanism": "gpp", "d_in": 384, "d_z": 4, "hidden": [8]})
    (folder / "README.md").write_text("# card\n", encoding="utf-8")
    write_json(
        folder / "release.json",
        {"kind": "sanitizer", "mechanism": "gpp", "input": encoder_reference(), "files": file_digests(folder)},
    )
    sign_folder(folder, signer)


def _load_classifier(folder):
    from dprelease.core.release.folder import load_release_model

    return load_release_model(folder)


def _load_nvdp(folder):
    from dprelease.mechanisms.nvdp.sanitizer import load_sanitizer

    return load_sanitizer(folder)


def _load_gpp(folder):
    from dprelease.mechanisms.gpp.sanitizer import load_sanitizer

    return load_sanitizer(folder)


KINDS = {
    "classifier": (_classifier, _load_classifier, {"kind": "classifier"}),
    "nvdp": (_nvdp, _load_nvdp, {"kind": "sanitizer", "mechanism": "nvdp"}),
    "gpp": (_gpp, _load_gpp, {"kind": "sanitizer", "mechanism": "gpp"}),
}


@pytest.fixture(params=sorted(KINDS))
def release(request, tmp_path, signer):
    """(folder, the kind's own loader, the shared check's arguments) of a freshly written release."""
    build, load, kind = KINDS[request.param]
    build(tmp_path / "release", signer)
    return tmp_path / "release", load, kind


def _same_refusal(folder, load, kind, *needles):
    from dprelease.core.release.check import verify_release_folder

    with pytest.raises(ReleaseError) as shared:
        verify_release_folder(folder, **kind)
    with pytest.raises(ReleaseError) as own:
        load(folder)
    message = str(shared.value)
    assert str(own.value) == message and "\n" not in message, (str(own.value), message)
    assert all(n in message for n in needles), message


def test_a_written_release_of_each_kind_loads(release):
    folder, load, kind = release
    from dprelease.core.release.check import verify_release_folder

    manifest, _ = verify_release_folder(folder, **kind)
    assert manifest.get("kind", "classifier") == kind["kind"]
    load(folder)  # the kind's own loader accepts what the shared check accepts


def test_a_tampered_file_is_refused_by_the_shared_check(release, tmp_path):
    """Every file the manifest lists, one bit changed in turn (on a fresh copy each time)."""
    folder, load, kind = release
    listed = sorted(json.loads((folder / "release.json").read_text())["files"])
    assert {"model.safetensors", "model.json", "README.md"} <= set(listed)
    for name in listed:
        copy = tmp_path / f"copy-{name.replace('/', '-')}"
        shutil.copytree(folder, copy)
        data = bytearray((copy / name).read_bytes())
        data[-2] ^= 0x01  # one bit inside the data (JSON: a digit, letter or quote; safetensors: a weight)
        (copy / name).write_bytes(bytes(data))
        _same_refusal(copy, load, kind, str(copy / name), "sha256 does not match")


def test_a_link_a_stray_file_or_a_foreign_kind_is_refused(release, tmp_path):
    folder, load, kind = release
    (folder / "notes.txt").write_text("x", encoding="utf-8")
    _same_refusal(folder, load, kind, "notes.txt", "must not be released")
    (folder / "notes.txt").unlink()
    manifest = folder / "release.json"
    moved = tmp_path / "elsewhere.json"
    manifest.rename(moved)
    manifest.symlink_to(moved)
    _same_refusal(folder, load, kind, "symbolic link")
    manifest.unlink()
    foreign = json.loads(moved.read_text()) | (
        {"kind": "sanitizer", "mechanism": "other"} if kind["kind"] == "classifier" else {"mechanism": "other"}
    )
    manifest.write_text(json.dumps(foreign), encoding="utf-8")
    _same_refusal(folder, load, kind, "not a")


def test_weights_of_another_shape_are_refused_even_with_a_rehashed_manifest(release):
    """An attacker who rewrites the manifest's sha256 list: the header's shapes must still fit model.json."""
    from dprelease.core.io import write_json
    from dprelease.core.release.check import file_digests, verify_release_folder

    folder, load, kind = release
    weights = folder / "model.safetensors"
    from safetensors.torch import load_file

    state = load_file(str(weights))
    name = sorted(state)[0]
    state[name] = torch.zeros(*(s + 1 for s in state[name].shape))
    save_file(state, str(weights))
    manifest = json.loads((folder / "release.json").read_text())
    write_json(folder / "release.json", manifest | {"files": file_digests(folder)})
    verify_release_folder(folder, **kind)  # the files are whole: only the architecture can tell
    with pytest.raises(ReleaseError) as info:
        load(folder)  # the kind's loader passes its architecture to verify_release_folder
    assert "model.safetensors" in str(info.value) and "shape" in str(info.value) and "\n" not in str(info.value)
