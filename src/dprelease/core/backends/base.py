"""What every model backend provides, and the parts they share.

A backend turns texts into a *feature dict* (tensors whose first dimension is the record), builds the
base model θ₀, and evaluates per-record cross-entropy for a stack of parameter draws. θ is always the
flat vector of the model's ``requires_grad`` parameters in ``model.parameters()`` order.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from dprelease.core.io import atomic_path

Features = dict[str, torch.Tensor]


def pick_device(requested: str = "auto") -> torch.device:
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("model.device is 'cuda' but no CUDA device is available")
    return torch.device(requested)


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def get_flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in trainable(model)])


def set_flat(model: nn.Module, theta: torch.Tensor) -> None:
    params = trainable(model)
    total = sum(p.numel() for p in params)
    if theta.numel() != total:
        raise ValueError(f"θ has {theta.numel()} entries, model has {total} trainable parameters")
    torch.nn.utils.vector_to_parameters(theta.to(params[0].device, params[0].dtype), params)


def n_records(features: Features) -> int:
    return next(iter(features.values())).shape[0]


def batches(n: int, size: int, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    for start in range(0, n, size):
        yield order[start : start + size]


def take(features: Features, idx: torch.Tensor, device: torch.device) -> Features:
    return {k: v[idx].to(device, non_blocking=True) for k, v in features.items()}


def length_sorted_batches(features: Features, size: int, device: torch.device) -> list[tuple[torch.Tensor, Features]]:
    """Evaluation batches of at most ``size`` records, shortest first when the features carry an
    ``attention_mask`` (a batch then pads to its own longest record: far less padding than input order), each
    moved to ``device`` once: [(record indices on ``device``, batch)]. Covers every record once; callers
    scatter results back by the indices, so the output order is the input's."""
    n = n_records(features)
    if "attention_mask" in features:
        order = torch.argsort(features["attention_mask"].sum(1), stable=True)
    else:
        order = torch.arange(n)
    return [(idx.to(device), take(features, idx, device)) for idx in order.split(max(1, size))]


def bf16_supported(device: torch.device) -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def eval_autocast(device: torch.device, enabled: bool = True):
    """The context of an evaluation forward pass: bf16 autocast on CUDA (where the GPU has bf16), a no-op
    anywhere else (CPU stays float32, so CPU results are exact). Callers upcast the logits to float32 before any
    softmax / cross-entropy, and sum in float32 or float64: autocast never reaches an accumulation."""
    if enabled and device.type == "cuda" and bf16_supported(device):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def save_features(path: str | Path, features: Features, labels: torch.Tensor) -> None:
    tensors = {f"x.{k}": v.contiguous() for k, v in features.items()} | {"y": labels.contiguous()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))


def load_features(path: str | Path) -> tuple[Features, torch.Tensor]:
    t = load_file(str(path))
    return {k[2:]: v for k, v in t.items() if k.startswith("x.")}, t["y"]


class Backend(ABC):
    """Model family + featurisation. Subclasses: HeadBackend (frozen encoder), FullBackend."""

    name: str

    def __init__(self, n_classes: int, device: torch.device, seed: int) -> None:
        self.n_classes = n_classes
        self.device = device
        self.seed = seed

    @abstractmethod
    def featurize(self, texts: list[str], progress: bool = False) -> Features: ...

    @abstractmethod
    def build_model(self, feature_dim: int | None = None, *, seed: int | None = None) -> nn.Module:
        """The base model θ₀, its random part (the head's initialisation) drawn from ``seed`` (default: the
        backend's public seed)."""

    def new_model(self, features: Features, *, init_seed: int | None = None) -> nn.Module:
        """θ₀ sized for these features (the head needs the embedding width); a mechanism's fit passes its
        secret ``init_seed`` (privacy/secret.py), public uses (the audit's reference models) leave it out."""
        return self.build_model(features["x"].shape[1] if "x" in features else None, seed=init_seed)

    def prior_center(self, model: nn.Module) -> list[torch.Tensor] | None:
        """θ₀ of the objective's prior N(θ₀, I/λ), one tensor per trainable parameter of ``model`` (training.py);
        None: centred at 0. Must not depend on the data (nor on the secret key)."""
        return None

    @staticmethod
    def forward(model: nn.Module, batch: Features) -> torch.Tensor:
        return model(**batch)

    @torch.no_grad()
    def per_record_ce(
        self, model: nn.Module, thetas: torch.Tensor, features: Features, labels: torch.Tensor, batch_size: int = 256
    ) -> torch.Tensor:
        """[S, n] cross-entropy of every record under each of the S parameter draws (float32, CPU).

        Generic path: one draw at a time through the records. Backends that can evaluate many draws in
        one pass (the head) override this.
        """
        model.eval()
        n = n_records(features)
        out = torch.empty(thetas.shape[0], n)
        for s, theta in enumerate(thetas):
            set_flat(model, theta)
            for idx in batches(n, batch_size):
                logits = self.forward(model, take(features, idx, self.device)).float()
                out[s, idx] = F.cross_entropy(logits, labels[idx].to(self.device), reduction="none").cpu()
        return out

    @torch.no_grad()
    def predict_proba(self, model: nn.Module, features: Features, batch_size: int = 256) -> torch.Tensor:
        model.eval()
        n = n_records(features)
        parts = [
            torch.softmax(self.forward(model, take(features, idx, self.device)).float(), -1).cpu()
            for idx in batches(n, batch_size)
        ]
        return torch.cat(parts) if parts else torch.empty(0, self.n_classes)  # 0 records: [0, C]

    # release -------------------------------------------------------------------------------
    @abstractmethod
    def write_release_model(self, model: nn.Module, folder: Path) -> dict:
        """Write what `predict` needs besides the label map; return the manifest's model entry."""

    @staticmethod
    @abstractmethod
    def release_shapes(folder: Path, arch: dict) -> dict[str, tuple[tuple[int, ...], bool]]:
        """Bounded architecture check of ``model.json`` (and ``config.json``) → the state-dict shapes it
        implies (built on the meta device: nothing allocated). One-line ReleaseError on a bad folder."""

    @staticmethod
    @abstractmethod
    def load_release_model(folder: Path, arch: dict, device: torch.device) -> nn.Module:
        """The released model in eval mode, usable with this backend's forward / predict_proba."""

    @staticmethod
    @abstractmethod
    def release_scorer(folder: Path, arch: dict, device: torch.device) -> Callable[[list[str]], torch.Tensor]:
        """From a release folder: a function from narratives to class probabilities [n, C] (CPU)."""


def save_state(path: Path, model: nn.Module) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp))
