"""The classifier release folder verified without loading it: everything :mod:`dprelease.core.release.check`
checks (manifest hashes, allow-list, the JSON files), the architecture's bounded dimensions and tensor shapes,
and ``labels.json``. ``dprelease verify`` and ``publish`` run it; `predict` (:mod:`dprelease.core.release.folder`)
before any weight is read.

A head release (the CPU default) is checked without torch (:mod:`dprelease.core.architecture`); only another
backend's shapes import the backends (the full backend's need transformers)."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.architecture import head_shapes
from dprelease.core.errors import ReleaseError
from dprelease.core.release.check import CLASSIFIER, check_labels, verify_release_folder
from dprelease.core.untrusted import read_json_object

HEAD = "head"  # the backend whose release is checked without torch (dprelease.core.backends.head's name)


def verify_release(folder: str | Path) -> dict:
    """Everything that can be checked without loading the weights; returns the parsed manifest."""
    return verify_classifier(Path(folder))[0]


def verify_classifier(folder: Path) -> tuple[dict, dict, dict]:
    """(manifest, model.json, labels.json) of a classifier release folder, every check passed."""
    manifest, arch = verify_release_folder(folder, kind=CLASSIFIER, architecture=release_shapes)
    labels = read_json_object(folder / "labels.json")
    check_labels(folder, arch["n_classes"], labels)
    return manifest, arch, labels


def release_shapes(folder: Path, arch: dict) -> tuple[dict, str]:
    """The tensor shapes the release's backend implies (its dimensions bounded first), and their source."""
    if arch.get("backend") == HEAD:
        return head_shapes(folder, arch), "model.json"
    from dprelease.core.backends import backend_class

    try:
        backend_cls = backend_class(str(arch.get("backend")))
    except ReleaseError as e:
        raise ReleaseError(f"{folder / 'model.json'}: {e}") from None
    expected = backend_cls.release_shapes(folder, arch)
    return expected, "model.json" if backend_cls.name == HEAD else "config.json"
