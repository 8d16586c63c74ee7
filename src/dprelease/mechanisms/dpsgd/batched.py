"""DP-SGD of a linear head for many independent runs at once, in closed form: the tight audit's trainer, checked
against Opacus weight for weight, with an optional gradient canary and the audit's planted bug.

See docs/audit.md, "Notes from the code", `mechanisms/dpsgd/batched.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from dprelease.mechanisms.dpsgd.accounting import noise_multiplier, spent_epsilon, steps_for

OPTIMIZERS = ("adamw", "sgd")
BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
CLIP_EPS = 1e-6  # Opacus: C / (‖g‖ + 1e-6)


@dataclass(frozen=True)
class Setting:
    """One DP-SGD configuration: what the accountant sees (q, T, σ) and what the trainer does."""

    sample_rate: float
    steps: int
    noise_multiplier: float
    max_grad_norm: float
    lr: float
    expected_batch_size: float
    planted_noise_divisor: float = 1.0
    optimizer: str = "adamw"  # adamw | sgd (with ``momentum``)
    momentum: float = 0.0

    def epsilon(self, delta: float, conversion: str = "mironov") -> float:
        """The accountant's ε for (σ, q, T) — the claim (for a planted bug too: σ, not σ/divisor)."""
        return spent_epsilon(self.noise_multiplier, self.sample_rate, self.steps, delta, conversion)


def setting_for(
    *,
    n: int,
    epochs: int,
    batch_size: int,
    lr: float,
    max_grad_norm: float,
    target_epsilon: float,
    delta: float,
    conversion: str = "mironov",
    records: int | None = None,
    planted_noise_divisor: float = 1.0,
    optimizer: str = "adamw",
    momentum: float = 0.0,
    sigma: float | None = None,
) -> Setting:
    """The DP-SGD stage's setting for n training records (q = B/n, T = ⌈E/q⌉, σ for the target ε), run on
    ``records`` records (default n) with the same q and T: the expected batch is q·records. ``sigma``: σ already
    calibrated for (target ε, δ, q, T) with ``conversion`` (a caller that tries many configurations per level)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)} (got {optimizer!r})")
    if not 0 < batch_size <= n:
        raise ValueError(f"batch size {batch_size} must lie in (0, {n}]")
    if planted_noise_divisor < 1:
        raise ValueError(f"planted_noise_divisor must be ≥ 1, got {planted_noise_divisor}")
    q = batch_size / n
    steps = steps_for(epochs, q)
    sigma = sigma if sigma is not None else noise_multiplier(target_epsilon, delta, q, steps, conversion)
    return Setting(
        sample_rate=q,
        steps=steps,
        noise_multiplier=sigma,
        max_grad_norm=max_grad_norm,
        lr=lr,
        expected_batch_size=q * (records or n),
        planted_noise_divisor=planted_noise_divisor,
        optimizer=optimizer,
        momentum=momentum,
    )


@dataclass(frozen=True)
class Canary:
    """A gradient canary at weight (row, col), included in run r when ``included[r]``."""

    row: int
    col: int
    norm: float
    included: torch.Tensor  # [R] bool
    generator: torch.Generator  # its Poisson coins


def adam_moments(g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int) -> tuple[torch.Tensor, float]:
    """torch.optim.AdamW's moment updates (in place) at ``step``: the step's denominator √(v/(1 − β₂ᵗ)) + eps and
    the first moment's bias correction 1 − β₁ᵗ (the update is −lr/(1 − β₁ᵗ) · m / denominator)."""
    m.lerp_(g, 1 - BETAS[0])
    v.mul_(BETAS[1]).addcmul_(g, g, value=1 - BETAS[1])
    return (v.sqrt() / math.sqrt(1 - BETAS[1] ** step)).add_(ADAM_EPS), 1 - BETAS[0] ** step


def _adamw(p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int, lr: float) -> None:
    """torch.optim.AdamW's update with weight decay 0 (the DP-SGD stage's optimizer), in place."""
    denom, bc1 = adam_moments(g, m, v, step)
    p.addcdiv_(m, denom, value=-lr / bc1)


def _sgd(p: torch.Tensor, g: torch.Tensor, buf: torch.Tensor, step: int, lr: float, momentum: float) -> None:
    """torch.optim.SGD's update (weight decay 0, dampening 0, no Nesterov), in place: the buffer starts at g."""
    if momentum:
        if step == 1:
            buf.copy_(g)
        else:
            buf.mul_(momentum).add_(g)
        g = buf
    p.add_(g, alpha=-lr)


def train_batched(
    weight: torch.Tensor,
    bias: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    setting: Setting,
    *,
    sample_generator: torch.Generator,
    noise_generator: torch.Generator,
    canary: Canary | None = None,
    batches: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """R runs of DP-SGD from ``weight`` [R, K, d] and ``bias`` [R, K] on records ``x`` [m, d] (raw
    embeddings; the head scales them by √d) with labels ``y`` [m]. Returns the final weights, biases and,
    with a canary, its privatised gradient sum per run and step [R, T] in units of C (else None).
    ``batches`` [T, R, m] (bool) replays given Poisson batches instead of drawing them (the comparison
    with Opacus, whose loader also spends draws of its generator on DataLoader seeds). One run without a
    canary computes the gradients of the sampled rows only (the others' clipped gradients are zero): the
    same update, about 1/q times cheaper."""
    if weight.dim() != 3 or bias.shape != weight.shape[:2] or x.shape[1] != weight.shape[2] or len(y) != len(x):
        raise ValueError(
            f"shapes: weight {tuple(weight.shape)}, bias {tuple(bias.shape)}, x {tuple(x.shape)}, y {tuple(y.shape)}"
        )
    s = setting
    w, b = weight.detach().clone().float(), bias.detach().clone().float()
    runs, classes, dim = w.shape
    xs = x.float() * dim**0.5
    feat_sq = (xs * xs).sum(1) + 1.0  # ‖(x√d, 1)‖² per record
    onehot = torch.nn.functional.one_hot(y.long(), classes).float()
    mw, vw, mb, vb = (torch.zeros_like(t) for t in (w, w, b, b))
    std = s.noise_multiplier / s.planted_noise_divisor * s.max_grad_norm
    trace = torch.empty(runs, s.steps) if canary is not None else None
    if canary is not None:
        if canary.included.shape != (runs,):
            raise ValueError(f"canary inclusion must have one entry per run ({runs})")
        clipped = canary.norm * min(1.0, s.max_grad_norm / (canary.norm + CLIP_EPS))
    for t in range(s.steps):
        mask = (
            torch.rand(runs, len(x), generator=sample_generator) < s.sample_rate if batches is None else batches[t]
        )  # [R, m]: Opacus's UniformWithReplacementSampler, one coin per record
        rows = mask[0].nonzero().squeeze(1) if runs == 1 and canary is None else slice(None)
        xr = xs[rows]
        g = torch.softmax(torch.einsum("md,rkd->rmk", xr, w) + b[:, None, :], dim=-1) - onehot[rows]  # dCE/dlogits
        norms = (g * g).sum(-1).mul_(feat_sq[rows]).sqrt_()
        factor = (s.max_grad_norm / (norms + CLIP_EPS)).clamp(max=1.0) * mask[:, rows]
        gc = g * factor[..., None]
        gw = torch.einsum("rmk,md->rkd", gc, xr)
        gb = gc.sum(1)
        if canary is not None:
            coin = (torch.rand(runs, generator=canary.generator) < s.sample_rate) & canary.included
            gw[:, canary.row, canary.col] += coin.float() * clipped
        gw += torch.normal(mean=0, std=std, size=gw.shape, generator=noise_generator) if std else 0.0
        gb += torch.normal(mean=0, std=std, size=gb.shape, generator=noise_generator) if std else 0.0
        if trace is not None:
            trace[:, t] = gw[:, canary.row, canary.col] / s.max_grad_norm
        gw /= s.expected_batch_size
        gb /= s.expected_batch_size
        if s.optimizer == "sgd":
            _sgd(w, gw, mw, t + 1, s.lr, s.momentum)
            _sgd(b, gb, mb, t + 1, s.lr, s.momentum)
        else:
            _adamw(w, gw, mw, vw, t + 1, s.lr)
            _adamw(b, gb, mb, vb, t + 1, s.lr)
    return w, b, trace
