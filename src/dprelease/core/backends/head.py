"""`head` backend: frozen public MiniLM encoder, θ = a small classifier head on its embeddings.

The encoder is public and never trained, so its sentence embeddings are computed once per dataset and
cached; every PPM pass then only touches the head. Because the head is tiny, S posterior draws are
evaluated together as batched matrix products instead of one at a time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from dprelease.core.architecture import check_head_arch, head_shapes
from dprelease.core.backends import head_curvature, minilm
from dprelease.core.backends.base import Backend, Features, save_state, trainable
from dprelease.core.backends.encoder import encoder_reference, mean_pool
from dprelease.core.errors import ReleaseError
from dprelease.core.threads import torch_threads
from dprelease.core.untrusted import fit_state, load_weights

if TYPE_CHECKING:  # the typed config (pydantic) is not needed to load a release
    from dprelease.core.config import HeadParams

ENCODERS = ("public_tuned", "pretrained")  # features.encoder
EMBED_BATCH = 64  # narratives encoded at once (features.batch_size sets the pipeline's)
SMALL_INPUT = 64  # fewer narratives are encoded on one thread: a few hundred tokens gain nothing from a second core,
# and a thread team on a busy machine costs seconds (docs/benchmarks.md); concurrent `serve` requests share cores


class SeededDropout(nn.Module):
    """Dropout whose masks come from an explicit generator (reproducible even when several training
    runs share the process, e.g. concurrent comparison arms)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)
        return x * keep / (1 - self.p)


class Head(nn.Module):
    """Embedding → (dropout → linear → GELU) → dropout → linear. ``hidden = 0`` gives a linear head.

    Initialisation (PyTorch's Linear default) and dropout masks use explicit generators, never the
    global RNG."""

    def __init__(self, dim: int, n_classes: int, hidden: int, dropout: float, seed: int = 0) -> None:
        super().__init__()
        self.dim, self.hidden = dim, hidden
        layers: list[nn.Module] = []
        if hidden:
            layers += [SeededDropout(dropout), nn.Linear(dim, hidden), nn.GELU()]
        layers += [SeededDropout(dropout), nn.Linear(hidden or dim, n_classes)]
        self.net = nn.Sequential(*layers)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for layer in self.net:
                if isinstance(layer, nn.Linear):
                    nn.init.kaiming_uniform_(layer.weight, a=5**0.5, generator=gen)
                    bound = 1 / layer.in_features**0.5
                    layer.bias.uniform_(-bound, bound, generator=gen)

    def seed_dropout(self, seed: int) -> None:
        device = next(self.parameters()).device
        for layer in self.net:
            if isinstance(layer, SeededDropout):
                layer.generator = torch.Generator(device=device).manual_seed(seed)
                seed += 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The encoder's embeddings are unit-norm; rescale to unit variance per coordinate (public constant).
        return self.net(x * self.dim**0.5)

    def forward_many(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Eval-mode logits of S parameter draws at once: ``params`` in ``trainable()`` order, each with a
        leading draw dimension; [n, dim] inputs → [S, n, C] logits (batched GEMMs, no Python loop over draws)."""
        h = (x * self.dim**0.5).expand(params[0].shape[0], *x.shape)
        weights = iter(params)
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                w, b = next(weights), next(weights)
                h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            elif isinstance(layer, nn.GELU):
                h = F.gelu(h)
        return h


class HeadBackend(Backend):
    name = "head"

    def __init__(
        self,
        n_classes: int,
        device: torch.device,
        seed: int,
        params: HeadParams,
        max_length: int = 128,
        batch_size: int = 64,
        encoder: str = "pretrained",
    ) -> None:
        super().__init__(n_classes, device, seed)
        self.params = params
        self.encoder = encoder
        self.max_length = max_length
        self.batch_size = batch_size

    @torch.no_grad()
    def featurize(self, texts: list[str], progress: bool = False) -> Features:
        return {
            "x": embed(
                texts,
                self.device,
                max_length=self.max_length,
                batch_size=self.batch_size,
                progress=progress,
                encoder=self.encoder,
            )
        }

    def build_model(self, feature_dim: int | None = None, *, seed: int | None = None) -> nn.Module:
        return Head(
            feature_dim or 384,
            self.n_classes,
            self.params.hidden,
            self.params.dropout,
            self.seed if seed is None else seed,
        ).to(self.device)

    @torch.no_grad()
    def per_record_ce(self, model, thetas, features, labels, batch_size: int = 4096) -> torch.Tensor:
        """All draws in one vectorised pass: [S, d] parameters × [n, 384] embeddings → [S, n] losses."""
        model.eval()
        shapes = [p.shape for p in trainable(model)]
        thetas = thetas.to(self.device)
        params = [
            chunk.reshape(thetas.shape[0], *shape)
            for chunk, shape in zip(thetas.split([s.numel() for s in shapes], dim=1), shapes)
        ]
        x, y = features["x"], labels
        out = torch.empty(thetas.shape[0], x.shape[0])
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size].to(self.device)
            yb = y[start : start + batch_size].to(self.device)
            logp = torch.log_softmax(model.forward_many(params, xb).float(), dim=-1)  # [S, b, C]
            out[:, start : start + batch_size] = (
                -logp.gather(-1, yb.expand(len(params[0]), -1).unsqueeze(-1)).squeeze(-1).cpu()
            )
        return out

    # closed-form curvature (backends/curvature.py dispatches here; equal to its autograd reference)
    def ggn_diagonal(self, model, theta, features, weights) -> torch.Tensor:
        return head_curvature.ggn_diagonal(model, theta, features, weights)

    def ggn_subspace(self, model, theta, features, weights, basis) -> torch.Tensor:
        return head_curvature.ggn_subspace(model, theta, features, weights, basis)

    def ggn_operator(self, model, theta, features, weights):
        return head_curvature.ggn_operator(model, theta, features, weights)

    def ggn_preconditioner(self, model, theta, features, weights, prior_precision):
        return head_curvature.kfac_preconditioner(model, theta, features, weights, prior_precision)

    def gradient_noise(self, model, theta, features, labels, weights) -> tuple[float, float]:
        return head_curvature.gradient_noise(model, theta, features, labels, weights)

    @staticmethod
    def release_scorer(folder: Path, arch: dict, device: torch.device):
        return head_scorer(folder, arch, device)

    @staticmethod
    def release_shapes(folder: Path, arch: dict) -> dict:
        return head_shapes(Path(folder), arch)

    @staticmethod
    def load_release_model(folder: Path, arch: dict, device: torch.device) -> nn.Module:
        return load_release_head(Path(folder), arch, device)

    def write_release_model(self, model: nn.Module, folder: Path) -> dict:
        save_state(folder / "model.safetensors", model)
        arch = {
            "backend": "head",
            "dim": model.dim,
            "hidden": model.hidden,
            "n_classes": self.n_classes,
            "max_length": self.max_length,
            "encoder": encoder_reference(self.encoder),
        }
        (folder / "model.json").write_text(json.dumps(arch, indent=2) + "\n", encoding="utf-8")
        return arch


def embed(
    texts: list[str],
    device: torch.device,
    *,
    max_length: int = 128,
    batch_size: int = EMBED_BATCH,
    progress: bool = False,
    quantized: bool = False,
    encoder: str = "pretrained",
) -> torch.Tensor:
    """L2-normalised mean-pooled MiniLM sentence embeddings, [n, 384] float32 on CPU, in input order.

    Tokenized at once, then encoded in batches of narratives of similar token counts, each padded only to its
    own longest (:mod:`dprelease.core.backends.minilm`; the encoder is loaded once per process); fewer than
    :data:`SMALL_INPUT` narratives on one thread. ``encoder``: ``pretrained`` (the wheel's) or ``public_tuned``
    (its top layers fine-tuned on the public period: :mod:`dprelease.core.backends.public_encoder`)."""
    if encoder not in ENCODERS:
        raise ValueError(f"encoder {encoder!r}: one of {', '.join(ENCODERS)}")
    enc = minilm.load(torch.device(device), quantized=quantized, tuned=encoder == "public_tuned")
    return encode(enc, texts, device, max_length=max_length, batch_size=batch_size, progress=progress)


def encode(
    enc: torch.nn.Module,
    texts: list[str],
    device: torch.device,
    *,
    max_length: int = 128,
    batch_size: int = EMBED_BATCH,
    progress: bool = False,
) -> torch.Tensor:
    """:func:`embed` with a given MiniLM (``enc``, in eval mode): what the public encoder's recipe scores a
    candidate's layers with."""
    ids = minilm.token_ids(texts, max_length)
    out = torch.empty(len(texts), enc.word.embedding_dim)
    with torch.inference_mode(), torch_threads(1 if len(texts) < SMALL_INPUT else 0):
        for idx in tqdm(
            minilm.batches([len(i) for i in ids], batch_size), desc="embed", disable=not progress, unit="batch"
        ):
            batch, mask = minilm.padded([ids[i] for i in idx])
            hidden = enc(batch.to(device), mask.to(device))
            out[idx] = F.normalize(mean_pool(hidden, mask.to(device)), dim=-1).float().cpu()
    return out


def linear_head(weight: torch.Tensor, bias: torch.Tensor) -> Head:
    """A linear head (hidden 0, no dropout) holding ``weight`` [K, d] and ``bias`` [K], in eval mode: its logits
    are (x·√d) Wᵀ + b (the head scales x by √d). How a mechanism that computes its weights releases them."""
    k, d = weight.shape
    model = Head(d, k, 0, 0.0)
    with torch.no_grad():
        model.net[-1].weight.copy_(weight.float())
        model.net[-1].bias.copy_(bias.float())
    return model.eval()


def load_release_head(folder: Path, arch: dict, device: torch.device) -> Head:
    """The released head. Its dimensions are bounded before it is built and the weights must be finite
    (one-line :class:`ReleaseError` otherwise); `predict` has verified the folder before this."""
    dims = check_head_arch(Path(folder), arch)
    model = Head(dims["dim"], dims["n_classes"], dims["hidden"], 0.0)
    fit_state(model, load_weights(Path(folder) / "model.safetensors"), Path(folder) / "model.safetensors")
    return model.to(device).eval()


def head_scorer(folder: Path, arch: dict, device: torch.device):
    recorded = arch.get("encoder") or {}
    encoder = "public_tuned" if "public_tuning" in recorded else "pretrained"
    ref = encoder_reference(encoder)
    if ref["weights_sha256"] != recorded.get("weights_sha256"):
        raise ReleaseError(f"installed encoder {ref['package']} {ref['version']} differs from the release's")
    if encoder == "public_tuned" and ref["public_tuning"]["weights_sha256"] != (recorded["public_tuning"] or {}).get(
        "weights_sha256"
    ):
        raise ReleaseError(
            "the installed public encoder's fine-tuned layers differ from the release's (dprelease "
            "version): install the version that made the release"
        )
    model = load_release_head(folder, arch, device)

    def score(texts: list[str]) -> torch.Tensor:
        x = embed(texts, device, max_length=arch["max_length"], encoder=encoder)
        with torch.no_grad():
            return torch.softmax(model(x.to(device)), -1).cpu()

    return score
