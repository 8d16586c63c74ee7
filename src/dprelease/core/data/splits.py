"""The prepared splits as the stages read them: the label map and the backend features per split."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dprelease.contracts.layout import Layout
from dprelease.core.backends import make_backend
from dprelease.core.backends.base import Backend, Features, load_features
from dprelease.core.io import read_json

if TYPE_CHECKING:  # the typed config (pydantic) is not needed to load a release
    from dprelease.core.config import Params

# proxy_* and public_rest: public reports (the proxy and the rest of the public period)
SPLITS = ("train", "test", "validation", "proxy_train", "proxy_validation", "public_rest")
PUBLIC_SPLITS = ("proxy_train", "proxy_validation", "public_rest")


def label_info(lay: Layout) -> dict:
    """OIICS codes and titles (``labels.json``: public, the same for every extract) with the per-split class sizes
    (``sizes.json``: private counts, for internal tables only)."""
    labels = read_json(lay.data / "labels.json")
    sizes = lay.data / "sizes.json"
    return labels | (read_json(sizes) if sizes.is_file() else {})


def backend_for(params: Params, lay: Layout) -> Backend:
    return make_backend(params, len(label_info(lay)["codes"]))


def linear_backend_for(params: Params, lay: Layout) -> Backend:
    """The head backend with a linear head (hidden 0, no dropout): what a released linear head is written with."""
    head = params.model.head.model_copy(update={"hidden": 0, "dropout": 0.0})
    return backend_for(params.model_copy(update={"model": params.model.model_copy(update={"head": head})}), lay)


def features(lay: Layout, split: str = "train") -> tuple[Features, torch.Tensor]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} ({', '.join(SPLITS)})")
    return load_features(lay.features / f"{split}.safetensors")


def head_embeddings(lay: Layout, split: str, *, who: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One split's cached encoder embeddings and labels (long): the head backend's features; a one-line error
    naming ``who`` needs them under another backend."""
    feats, y = features(lay, split)
    if set(feats) != {"x"}:
        raise ValueError(f"{who} needs the head backend's embeddings (model.backend: head)")
    return feats["x"], y.long()


def n_train(lay: Layout) -> int:
    """The private training count (internal: never a mechanism's normaliser, δ or a released figure)."""
    return sum(label_info(lay)["train_sizes"])


def n_public(lay: Layout) -> int:
    """The PUBLIC expected training size n̂ (from the public period's counts and the declared rates and shares):
    what δ's default and DP-SGD's normaliser use instead of the private count."""
    return int(read_json(lay.data / "public.json")["expected_train_size"])
