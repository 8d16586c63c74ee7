"""How often each clipping rule binds (docs/algorithms.md, F.3), measured on the pre-clip posterior of every evaluated
input: the fraction of token vectors whose ‖μ‖ exceeds C_μ, of pseudo-counts above C_α,max (and below
C_α,min), and of σ entries below the floor sqrt((λ−1)/λ). Counted over the inputs' own vectors (the prepended
prior row excluded, padding excluded). Measured against the task's clip values for either variant: for the
clipped model it is how often the clip acted, for the unconstrained one how often it would have. Aggregates only."""

from __future__ import annotations

import torch

from dprelease.mechanisms.nvdp.nvib import Clip, Posterior


class ClipStats:
    def __init__(self, clip: Clip):
        self.clip = clip
        self.vectors = 0
        self.mu_above = self.alpha_above = self.alpha_below = self.sigma_below = 0
        self.mu_norm_sum = self.alpha_sum = 0.0
        self.alpha_max = 0.0

    def add(self, post: Posterior) -> None:
        mu, logvar, alpha = post.raw if post.raw is not None else (post.mu, post.logvar, post.alpha)
        keep = post.mask[:, 1:].bool()
        norm = mu[:, 1:].norm(dim=-1)[keep]
        a = alpha[:, 1:][keep]
        sigma = torch.exp(0.5 * logvar[:, 1:])[keep]
        c = self.clip
        self.vectors += int(keep.sum())
        self.mu_norm_sum += float(norm.sum())
        self.alpha_sum += float(a.sum())
        self.alpha_max = max(self.alpha_max, float(a.max())) if a.numel() else self.alpha_max
        if c.mu is not None:
            self.mu_above += int((norm > c.mu).sum())
        if c.alpha_max is not None:
            self.alpha_above += int((a > c.alpha_max).sum())
        if c.alpha_min is not None:
            self.alpha_below += int((a < c.alpha_min).sum())
        if c.sigma_floor is not None:
            self.sigma_below += int((sigma < c.sigma_floor).sum())
        self.dims = int(sigma.shape[-1]) if sigma.dim() == 2 else 1

    def summary(self) -> dict:
        n = max(self.vectors, 1)
        c = self.clip
        frac = lambda k, on: k / n if on else None  # noqa: E731
        return {
            "clip_mu_binds": frac(self.mu_above, c.mu is not None),
            "clip_alpha_max_binds": frac(self.alpha_above, c.alpha_max is not None),
            "clip_alpha_min_binds": frac(self.alpha_below, c.alpha_min is not None),
            "clip_sigma_binds": (
                self.sigma_below / (n * getattr(self, "dims", 1)) if c.sigma_floor is not None else None
            ),
            "pre_clip_mu_norm_mean": self.mu_norm_sum / n,
            "pre_clip_alpha_mean": self.alpha_sum / n,
            "pre_clip_alpha_max": self.alpha_max,
        }
