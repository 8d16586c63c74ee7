"""SWAG: first/second moments and a low-rank deviation FIFO over flattened parameters (docs/algorithms.md, A).

Moments are accumulated in float64 with Welford's update (docs/algorithms.md, A.1, numerical note): the variance of
parameters that barely move under constant-lr SGD would otherwise cancel catastrophically.
Sampling follows docs/algorithms.md, A.2 with ``scale = 1/2`` unless a temperature calibration (``temperature.py``)
stored another sampling scale with the moments:

    θ̃ = θ̄ + sqrt(scale) · (Σdiag^{1/2} z1 + D̂ z2 / sqrt(K' − 1)),   z1 ~ N(0, I_d), z2 ~ N(0, I_K')

whose covariance is scale · (Σdiag + D̂D̂ᵀ/(K' − 1)), K' = number of deviation columns stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from dprelease.core.io import atomic_path

VAR_CLAMP = 1e-30


@dataclass(frozen=True)
class SwagMoments:
    """Fitted SWAG posterior. Private artifact: never log or release it."""

    mean: torch.Tensor  # float64 [d]
    var: torch.Tensor  # float64 [d], Σdiag (clamped at VAR_CLAMP)
    deviations: torch.Tensor  # float32 [K', d], rows D_t = θ_t − θ̄_t (oldest first)
    n_models: int
    scale: float = 0.5  # sampling scale (docs/algorithms.md, A.2); a calibrated SWAG stores its own

    @property
    def dim(self) -> int:
        return self.mean.numel()

    @property
    def rank(self) -> int:
        return self.deviations.shape[0]

    def covariance(self, scale: float | None = None) -> torch.Tensor:
        """Dense d×d covariance of the sampler (small d only: tests and diagnostics)."""
        scale = self.scale if scale is None else scale
        cov = torch.diag(self.var)
        if self.rank > 1:
            dev = self.deviations.double()
            cov = cov + dev.T @ dev / (self.rank - 1)
        return scale * cov

    def save(self, path: str | Path) -> None:
        # the scale is a tensor, not metadata: safetensors writes a metadata map in no fixed order, and a
        # second key there would make identical moments differ byte for byte (and re-key later stages)
        tensors = {
            "mean": self.mean,
            "var": self.var,
            "deviations": self.deviations.contiguous(),
            "scale": torch.tensor(float(self.scale), dtype=torch.float64),
        }
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata={"n_models": str(self.n_models)})

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> "SwagMoments":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata()
        t = load_file(str(path), device=str(device))
        scale = float(t["scale"]) if "scale" in t else 0.5
        return cls(
            mean=t["mean"], var=t["var"], deviations=t["deviations"], n_models=int(meta["n_models"]), scale=scale
        )


class SwagCollector:
    """Accumulates snapshots θ_1..θ_T (docs/algorithms.md, A.1 steps 1–5)."""

    def __init__(self, dim: int, rank: int = 20, device: str | torch.device = "cpu") -> None:
        if rank < 1:
            raise ValueError("SWAG rank must be >= 1")
        self.rank = rank
        self.n_models = 0
        self._mean = torch.zeros(dim, dtype=torch.float64, device=device)
        self._m2 = torch.zeros(dim, dtype=torch.float64, device=device)
        self._devs: list[torch.Tensor] = []

    def collect(self, theta: torch.Tensor) -> None:
        theta = theta.detach().reshape(-1).to(self._mean.device, torch.float64)
        if theta.numel() != self._mean.numel():
            raise ValueError(f"snapshot has {theta.numel()} parameters, expected {self._mean.numel()}")
        self.n_models += 1
        delta = theta - self._mean
        self._mean += delta / self.n_models
        self._m2 += delta * (theta - self._mean)
        self._devs.append((theta - self._mean).float())  # D_t uses the mean *after* adding θ_t
        if len(self._devs) > self.rank:
            self._devs.pop(0)

    def moments(self) -> SwagMoments:
        if self.n_models == 0:
            raise ValueError("no SWAG snapshots collected")
        var = (self._m2 / self.n_models).clamp_min(VAR_CLAMP)
        return SwagMoments(
            mean=self._mean.clone(),
            var=var,
            deviations=torch.stack(self._devs),
            n_models=self.n_models,
        )


def normals(moments: SwagMoments, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The standard normals of ``n`` draws, z1 [n, d] then (rank > 1) z2 [n, K'], exactly as :func:`sample`
    takes them from ``generator``."""
    device = moments.mean.device
    z1 = torch.randn(n, moments.dim, generator=generator, device=device, dtype=torch.float32)
    z2 = (
        torch.randn(n, moments.rank, generator=generator, device=device, dtype=torch.float32)
        if moments.rank > 1
        else None
    )
    return z1, z2


def transform(
    moments: SwagMoments, z1: torch.Tensor, z2: torch.Tensor | None, scale: float | None = None
) -> torch.Tensor:
    """θ̃ = θ̄ + sqrt(scale) · (Σdiag^{1/2} z1 + D̂ z2 / sqrt(K' − 1)) for the normals of :func:`normals`."""
    scale = moments.scale if scale is None else scale
    out = z1 * moments.var.sqrt().float()
    if z2 is not None:
        out += (z2 @ moments.deviations.float()) / (moments.rank - 1) ** 0.5
    return moments.mean.float() + scale**0.5 * out


def sample(moments: SwagMoments, n: int, generator: torch.Generator, scale: float | None = None) -> torch.Tensor:
    """``n`` independent draws as an [n, d] float32 tensor on the moments' device (at the moments' own
    sampling scale unless ``scale`` is given)."""
    return transform(moments, *normals(moments, n, generator), scale)


def iter_samples(moments: SwagMoments, n: int, batch: int, generator: torch.Generator, scale: float | None = None):
    """Yield draws in chunks of at most ``batch`` rows (memory stays O(batch · d))."""
    done = 0
    while done < n:
        m = min(batch, n - done)
        yield sample(moments, m, generator, scale)
        done += m


def chunk_states(moments: SwagMoments, n: int, batch: int, generator: torch.Generator):
    """The chunks of ``iter_samples(moments, n, batch, generator)`` as (first draw, count, generator state
    before the chunk), lazily. Setting a generator to that state and calling ``sample(moments, count, …)``
    gives that chunk's draws exactly; only the normals are replayed here (no transform), so every state
    costs O(batch · d) random numbers, not a re-run of the chunks before it."""
    done = 0
    while done < n:
        m = min(batch, n - done)
        yield done, m, bytes(generator.get_state().numpy())
        normals(moments, m, generator)
        done += m
