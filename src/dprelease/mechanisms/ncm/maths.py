"""DP nearest class mean, pure maths (docs/frontier.md, "DP nearest class mean").

Release: the K×d matrix of per-class sums S_k = Σ_{i: y_i = k} x_i of the training records' embeddings, each
clipped to ‖x_i‖ ≤ 1 (the encoder's are unit-norm; clipping makes the bound hold whatever the input), plus
Gaussian noise N(0, σ² I). Adding or removing one record changes one row by x_i: L2 sensitivity 1. σ is the
smallest for which the Gaussian mechanism is (ε, δ)-DP — the analytic Gaussian mechanism (Balle & Wang 2018,
Theorem 8), exact for one Gaussian release: δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).
Prediction: the class whose noisy sum has the largest cosine with x (post-processing). No hyper-parameter,
so no search: the floor a tuned mechanism must beat.
"""

from __future__ import annotations

import torch

from dprelease.core.privacy.gaussian import gaussian_delta, gaussian_sigma  # noqa: F401 (this module's API)


def class_sums(x: torch.Tensor, y: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Per-class sums of the rows of ``x`` clipped to norm ≤ 1: [K, d] (float64)."""
    x = x.double()
    x = x / x.norm(dim=1, keepdim=True).clamp(min=1.0)
    return torch.zeros(n_classes, x.shape[1], dtype=torch.float64).index_add_(0, y.long(), x)


def release(
    x: torch.Tensor, y: torch.Tensor, n_classes: int, *, sigma: float, generator: torch.Generator
) -> torch.Tensor:
    """The noisy class sums (what is released)."""
    sums = class_sums(x, y, n_classes)
    return sums + sigma * torch.randn(sums.shape, dtype=torch.float64, generator=generator)


def predict(noisy_sums: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Nearest class mean by cosine: argmax_k ⟨x, S̃_k / ‖S̃_k‖⟩."""
    centres = noisy_sums / noisy_sums.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return (x.double() @ centres.T).argmax(1)
