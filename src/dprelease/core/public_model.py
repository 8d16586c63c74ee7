"""The public model: softmax regression on the public period's embeddings (reads no private report, ε = 0 with
respect to them), the floor every DP release is drawn against and the start DP-SGD refines from.

Logit adjustment (Menon et al. 2021): trained on logits + log π_train (the public training reports' class prior),
it predicts with logits + log π_target, the mix the private roles draw (each code's public count times its
inclusion rate): a prior shift from the uncapped public period to the capped test protocol, from public counts.
The head's parametrisation is the linear head's: logits = (x·√d) Wᵀ + b. Pure torch, full-batch L-BFGS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F


def log_prior(counts: torch.Tensor) -> torch.Tensor:
    """log of a class prior from counts [K] (a class with no count gets half a report)."""
    c = counts.double().clamp(min=0.5)
    return (c / c.sum()).log().float()


def target_prior(public_counts: Mapping[str, int], rates: Mapping[str, float], codes: Sequence[str]) -> torch.Tensor:
    """log π_target over ``codes``: public count × inclusion rate, the expected class mix of the private roles."""
    return log_prior(torch.tensor([public_counts.get(c, 0) * rates[c] for c in codes], dtype=torch.float64))


def fit(
    x: torch.Tensor, y: torch.Tensor, n_classes: int, *, l2: float, steps: int = 100
) -> tuple[torch.Tensor, torch.Tensor]:
    """Balanced softmax regression (weights [K, d], biases [K]) on (x, y): cross-entropy of logits + log π_train
    plus l2/2·‖W‖², full batch, L-BFGS from zero (convex: no randomness)."""
    xs = x.float() * x.shape[1] ** 0.5
    shift = log_prior(torch.bincount(y, minlength=n_classes))
    w = torch.zeros(n_classes, x.shape[1], requires_grad=True)
    b = torch.zeros(n_classes, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(xs @ w.T + b + shift, y) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def predict(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return ((x.float() * x.shape[1] ** 0.5) @ w.T + b).argmax(1)


def choose_l2(
    train: tuple[torch.Tensor, torch.Tensor],
    validation: tuple[torch.Tensor, torch.Tensor],
    n_classes: int,
    *,
    grid: Sequence[float],
    prior: torch.Tensor,
    score,
) -> tuple[float, list[float]]:
    """The L2 strength of ``grid`` with the best ``score(y, pred)`` on public validation (ties: the first), and
    every score (public: zero ε)."""
    found = []
    for l2 in grid:
        w, b = fit(*train, n_classes, l2=l2)
        found.append(float(score(validation[1].numpy(), predict(w, b + prior, validation[0]).numpy())))
    best = max(range(len(grid)), key=lambda i: (found[i], -i))
    return float(grid[best]), found
