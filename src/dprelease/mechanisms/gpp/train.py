"""Centralized GPP training (docs/algorithms.md, G.2, Algorithm 1) and the three baselines of S003 §VI-A: arrays in, a
fitted :class:`Sanitizer` out, every method with ``release(x, generator)``.

See docs/gpp.md, "Notes from the code", `mechanisms/gpp/train.py`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dprelease.core.errors import OneLineError
from dprelease.mechanisms.gpp.model import Encoder, encoder_loss, head, kl_term, reparameterise
from dprelease.mechanisms.gpp.params import GPPParams

METHODS = ("raw", "noprivacy", "random_projection", "noisy", "gpp")


class GPPInputError(OneLineError):
    """Bad arrays or options given to the GPP trainer or audit."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One fit's settings. No defaults here: the one source of them is ``params.yaml``'s ``gpp:`` section
    (:class:`dprelease.mechanisms.gpp.params.GPPParams`); build one with :meth:`from_params`."""

    d_z: int
    beta: float
    lam: float
    k: int
    epochs: int
    batch_size: int
    lr: float
    encoder_hidden: tuple[int, ...]
    head_hidden: tuple[int, ...]

    @classmethod
    def from_params(cls, gpp: GPPParams, *, d_z: int, **overrides) -> "TrainConfig":
        """The settings of ``gpp`` (``params.gpp``) for a latent of width ``d_z``; ``overrides`` replace
        fields (a sweep's reduced epochs, a test's tiny network)."""
        values = {
            "d_z": d_z,
            "beta": gpp.beta,
            "lam": gpp.lam,
            "k": gpp.k,
            "epochs": gpp.epochs,
            "batch_size": gpp.batch_size,
            "lr": gpp.lr,
            "encoder_hidden": tuple(gpp.encoder_hidden),
            "head_hidden": tuple(gpp.head_hidden),
        }
        unknown = sorted(set(overrides) - set(values))
        if unknown:
            raise TypeError(f"TrainConfig has no field(s) {', '.join(unknown)}")
        return cls(**(values | overrides))


@dataclass
class History:
    """Per-epoch aggregate losses (batch means averaged over the epoch): public, no per-record values."""

    encoder: list[float] = field(default_factory=list)
    utility: list[float] = field(default_factory=list)
    adversary: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)


class Projection(nn.Module):
    """Random Projection baseline: ``z = x R / √d_z`` with a fixed Gaussian ``R`` (deterministic release)."""

    def __init__(self, d_in: int, d_z: int, generator: torch.Generator):
        super().__init__()
        self.register_buffer("matrix", torch.randn(d_in, d_z, generator=generator) / d_z**0.5)

    def release(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return x @ self.matrix


class Raw(nn.Module):
    """The input released as is (reference row, not a sanitizer)."""

    def release(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return x


class NoisyEncoder(nn.Module):
    """Noisy Encoder baseline: ``z = tanh(μ(x)) + σ_n ε`` (the bound keeps σ_n meaningful)."""

    def __init__(self, encoder: Encoder, noise: float):
        super().__init__()
        self.encoder = encoder
        self.noise = float(noise)

    def release(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        mu, _ = self.encoder(x)
        z = torch.tanh(mu)
        return z + self.noise * torch.randn(z.shape, generator=generator, dtype=z.dtype)


def check_arrays(x: np.ndarray, *labels: np.ndarray) -> None:
    if x.ndim != 2 or x.shape[0] == 0:
        raise GPPInputError(f"x must be a non-empty 2-D array (got shape {x.shape})")
    if not np.isfinite(x).all():
        raise GPPInputError("x holds NaN or infinite values")
    for y in labels:
        if y.shape != (x.shape[0],):
            raise GPPInputError(f"label array of shape {y.shape} does not match x's {x.shape[0]} rows")
        if y.size and y.min() < 0:
            raise GPPInputError("labels must be class indices ≥ 0")


def _tensors(x: np.ndarray, *labels: np.ndarray) -> tuple[torch.Tensor, ...]:
    return (
        torch.tensor(np.asarray(x, dtype=np.float32)),
        *(torch.tensor(np.asarray(y, dtype=np.int64)) for y in labels),
    )


def _sample(n: int, b: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, n, (min(b, n),), generator=gen)


def train_gpp(
    x: np.ndarray, u: np.ndarray, s: np.ndarray, *, n_u: int, n_s: int, config: TrainConfig, seed: int
) -> tuple[Encoder, History]:
    """Algorithm 1: per encoder step, ``k`` steps on the utility head and the adversary head (each on
    a fresh batch, encoder frozen), then one step on θ with :func:`encoder_loss` (heads frozen).
    One epoch = ⌈n / b⌉ encoder steps over a fresh permutation."""
    check_arrays(x, u, s)
    if config.k < 0:
        raise GPPInputError(f"k must be ≥ 0 (got {config.k})")
    torch.manual_seed(seed)  # initialisation only; draws and batches use `gen`
    gen = torch.Generator().manual_seed(seed)
    xt, ut, st = _tensors(x, u, s)
    enc = Encoder(x.shape[1], config.d_z, config.encoder_hidden)
    q_u, q_s = head(config.d_z, n_u, config.head_hidden), head(config.d_z, n_s, config.head_hidden)
    opt_e = torch.optim.Adam(enc.parameters(), lr=config.lr)
    opt_h = torch.optim.Adam([*q_u.parameters(), *q_s.parameters()], lr=config.lr)
    hist, n, b = History(), xt.shape[0], config.batch_size
    for _ in range(config.epochs):
        sums = np.zeros(4)
        steps = 0
        for idx in torch.randperm(n, generator=gen).split(b):
            for _ in range(config.k):  # heads: CE on u and on s, encoder frozen
                j = _sample(n, b, gen)
                with torch.no_grad():
                    mu, logvar = enc(xt[j])
                    z = reparameterise(mu, logvar, gen)
                opt_h.zero_grad()
                lu, ls = F.cross_entropy(q_u(z), ut[j]), F.cross_entropy(q_s(z), st[j])
                (lu + ls).backward()
                opt_h.step()
                sums[1:3] += (lu.item() / config.k, ls.item() / config.k)
            mu, logvar = enc(xt[idx])
            z = reparameterise(mu, logvar, gen)
            opt_e.zero_grad()
            loss = encoder_loss(z, mu, logvar, ut[idx], st[idx], q_u, q_s, beta=config.beta, lam=config.lam)
            loss.backward()
            opt_e.step()
            sums[0] += loss.item()
            sums[3] += kl_term(mu.detach(), logvar.detach()).item()
            steps += 1
        for name, v in zip(("encoder", "utility", "adversary", "kl"), sums / max(steps, 1)):
            getattr(hist, name).append(round(float(v), 6))
    return enc.eval(), hist


def _train_utility_only(
    x: np.ndarray, u: np.ndarray, *, n_u: int, config: TrainConfig, seed: int, noise: float | None
) -> tuple[Encoder, History]:
    """Deterministic encoder + utility head on CE(u) only; with ``noise``, on ``tanh(μ) + noise·ε``."""
    check_arrays(x, u)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    xt, ut = _tensors(x, u)
    enc = Encoder(x.shape[1], config.d_z, config.encoder_hidden, deterministic=True)
    q_u = head(config.d_z, n_u, config.head_hidden)
    opt = torch.optim.Adam([*enc.parameters(), *q_u.parameters()], lr=config.lr)
    hist, n = History(), xt.shape[0]
    for _ in range(config.epochs):
        total, steps = 0.0, 0
        for idx in torch.randperm(n, generator=gen).split(config.batch_size):
            mu, _ = enc(xt[idx])
            z = mu if noise is None else torch.tanh(mu) + noise * torch.randn(mu.shape, generator=gen)
            loss = F.cross_entropy(q_u(z), ut[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
        hist.utility.append(round(total / max(steps, 1), 6))
    return enc.eval(), hist


def train_method(
    method: str,
    x: np.ndarray,
    u: np.ndarray,
    s: np.ndarray,
    *,
    n_u: int,
    n_s: int,
    config: TrainConfig,
    seed: int,
    noise: float = 1.0,
) -> tuple[nn.Module, History]:
    """Fit one of :data:`METHODS`; the result has ``release(x, generator)``."""
    if method == "gpp":
        return train_gpp(x, u, s, n_u=n_u, n_s=n_s, config=config, seed=seed)
    if method == "noprivacy":
        return _train_utility_only(x, u, n_u=n_u, config=config, seed=seed, noise=None)
    if method == "noisy":
        if noise <= 0:
            raise GPPInputError(f"the noisy encoder's noise scale must be > 0 (got {noise})")
        enc, hist = _train_utility_only(x, u, n_u=n_u, config=config, seed=seed, noise=noise)
        return NoisyEncoder(enc, noise).eval(), hist
    if method == "raw":
        check_arrays(x)
        return Raw(), History()
    if method == "random_projection":
        check_arrays(x)
        return Projection(x.shape[1], config.d_z, torch.Generator().manual_seed(seed)), History()
    raise GPPInputError(f"unknown GPP method {method!r} (one of {', '.join(METHODS)})")


@torch.no_grad()
def release(model: nn.Module, x: np.ndarray, *, seed: int, batch_size: int = 4096) -> np.ndarray:
    """One sanitized draw per row of ``x`` (float32), from a generator seeded with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    xt = torch.tensor(np.asarray(x, dtype=np.float32))
    parts = [model.release(xt[i : i + batch_size], gen) for i in range(0, xt.shape[0], batch_size)]
    return torch.cat(parts).numpy().astype(np.float32) if parts else np.zeros((0, 0), np.float32)
