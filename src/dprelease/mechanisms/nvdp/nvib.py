"""The NVIB layer and the denoising-attention block without residual (docs/algorithms.md, F.1, F.3). Pure torch.

Token vectors ``x`` (batch × n × P, with a boolean mask) become a nonparametric variational posterior: a
mean and log-variance per vector (latent width d) and one pseudo-count per vector from the quadratic
projection ``exp(W1 x + W2 x⊙x + b)``. The prior component (μ = 0, σ = 1, α = 1) is prepended as row 0.
Clipping (switchable) runs after the prepend and before sampling, at train and eval time. A draw is
``z = μ + σ ⊙ ε`` and Dirichlet weights ``π`` from normalised Gamma draws; everything downstream (the
block, the pooled representation, the classifier) reads only ``(z, π, mask)``, so it is post-processing
of the one released draw.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import torch
from torch import nn

ALPHA_ZERO = 1e-4  # pseudo-counts below this are treated as zero in the RD / BDP computation (code behaviour)
SIGMA_INIT = (
    0.1  # initial posterior σ as a fraction of the prior's: the reference scripts' stdev_tau (docs/algorithms.md, F.1)
)
GAMMA_FLOOR = 1e-6  # stability clamp of α before Gamma sampling (a zero count cannot be sampled)
_GLOBAL_RNG = threading.Lock()  # the forked global RNG is process-wide: one seeded Gamma draw at a time


@dataclass(frozen=True)
class Clip:
    """The three clipping rules (S000 eqs. 4, 6, 7); ``None`` turns a rule off."""

    mu: float | None = None  # C_μ: per-vector L2 norm bound of μ − μ_prior (μ_prior = 0)
    sigma_order: float | None = None  # λ of the σ floor sqrt((λ−1)/λ)·σ_prior; None: no floor
    alpha_min: float | None = None
    alpha_max: float | None = None

    @property
    def sigma_floor(self) -> float | None:
        return None if self.sigma_order is None else math.sqrt((self.sigma_order - 1.0) / self.sigma_order)

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.mu, self.sigma_order, self.alpha_min, self.alpha_max))


NO_CLIP = Clip()


def clip_posterior(mu: torch.Tensor, logvar: torch.Tensor, alpha: torch.Tensor, clip: Clip):
    """F.3 on (B, m, d) means / log-variances and (B, m) pseudo-counts, prior row included."""
    if clip.mu is not None:
        norm = mu.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        mu = mu * torch.clamp(clip.mu / norm, max=1.0)
    if clip.sigma_floor is not None:
        logvar = logvar.clamp_min(2.0 * math.log(clip.sigma_floor))
    if clip.alpha_min is not None or clip.alpha_max is not None:
        alpha = alpha.clamp(min=clip.alpha_min, max=clip.alpha_max)
    return mu, logvar, alpha


@dataclass
class Posterior:
    """One batch of NVIB posteriors, prior row 0 included. ``mask``: (B, m) valid components."""

    mu: torch.Tensor
    logvar: torch.Tensor
    alpha: torch.Tensor
    mask: torch.Tensor
    raw: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # (μ, log σ², α) before clipping

    @property
    def sigma(self) -> torch.Tensor:
        return torch.exp(0.5 * self.logvar)


class NVIBLayer(nn.Module):
    """Projections to (μ, log σ², α), prior prepended, clipping, sampling, KL terms."""

    def __init__(
        self,
        dim_in: int,
        dim: int,
        *,
        logvar_init: float = 2 * math.log(SIGMA_INIT),
        alpha_init: float = 0.0,
        clip: Clip = NO_CLIP,
    ):
        super().__init__()
        self.mu = nn.Linear(dim_in, dim)
        self.logvar = nn.Linear(dim_in, dim)
        self.alpha = nn.Linear(2 * dim_in, 1)  # W1 x + W2 x⊙x + b, one pseudo-count per vector
        nn.init.zeros_(self.logvar.weight)
        nn.init.constant_(self.logvar.bias, logvar_init)
        nn.init.normal_(self.alpha.weight, std=1e-3)
        nn.init.constant_(self.alpha.bias, alpha_init)
        self.clip = clip
        self.stochastic = True

    def posterior(self, x: torch.Tensor, mask: torch.Tensor) -> Posterior:
        b, _, _ = x.shape
        mu, logvar = self.mu(x), self.logvar(x)
        log_alpha = self.alpha(torch.cat([x, x * x], dim=-1)).squeeze(-1).clamp(max=20.0)
        alpha = torch.exp(log_alpha) * mask
        d = mu.shape[-1]
        mu = torch.cat([mu.new_zeros(b, 1, d), mu * mask.unsqueeze(-1)], dim=1)
        logvar = torch.cat([logvar.new_zeros(b, 1, d), logvar * mask.unsqueeze(-1)], dim=1)
        alpha = torch.cat([alpha.new_ones(b, 1), alpha], dim=1)
        full = torch.cat([mask.new_ones(b, 1), mask], dim=1)
        raw = (mu, logvar, alpha * full)
        mu, logvar, alpha = clip_posterior(mu, logvar, alpha, self.clip)
        return Posterior(mu, logvar, alpha * full, full, raw)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, gen: torch.Generator):
        post = self.posterior(x, mask)
        if not self.stochastic:  # the non-private classifier: posterior means and mean weights, no draw
            return post, post.mu, post.alpha / post.alpha.sum(-1, keepdim=True)
        z, pi = sample(post, gen)
        return post, z, pi


def sample(post: Posterior, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian reparameterisation and Dirichlet weights from normalised Gamma draws (train and eval).

    Gamma draws use torch's sampler (with its implicit-reparameterisation gradient) under a forked RNG
    seeded from ``gen`` and held under a lock (stages may run in parallel threads), so every draw still comes
    from the explicit generator."""
    eps = torch.randn(post.mu.shape, generator=gen, device=post.mu.device, dtype=post.mu.dtype)
    z = post.mu + post.sigma * eps
    seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device).item())
    devices = [post.alpha.device] if post.alpha.device.type == "cuda" else []
    with _GLOBAL_RNG, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        g = torch._standard_gamma(post.alpha.clamp_min(GAMMA_FLOOR))
    g = g.clamp_min(1e-30) * post.mask
    pi = g / g.sum(-1, keepdim=True)
    return z, pi


def kl_gaussian(post: Posterior) -> torch.Tensor:
    """Σ_i (α_i/α_0)·KL(N(μ_i, σ_i²) ‖ N(0, 1)) over non-prior components, summed over dims; per input."""
    kl = 0.5 * (post.mu**2 + post.logvar.exp() - 1.0 - post.logvar).sum(-1)
    weight = post.alpha / post.alpha.sum(-1, keepdim=True)
    return (kl * weight * post.mask)[:, 1:].sum(-1)


def kl_dirichlet(post: Posterior, prior_alpha: float = 1.0) -> torch.Tensor:
    """KL(Dir(α) ‖ Dir(prior_alpha·1)) over the valid components (exact closed form); per input."""
    m = post.mask.to(post.alpha.dtype)
    a = post.alpha.clamp_min(ALPHA_ZERO) * m + (1 - m)  # padding rows: α = β = 1, zero contribution below
    b = torch.full_like(a, prior_alpha) * m + (1 - m)
    a0, b0 = (a * m).sum(-1), (b * m).sum(-1)
    terms = (-torch.lgamma(a) + torch.lgamma(b) + (a - b) * (torch.digamma(a) - torch.digamma(a0).unsqueeze(-1))) * m
    return torch.lgamma(a0) - torch.lgamma(b0) + terms.sum(-1)


class DenoisingBlock(nn.Module):
    """Multi-head denoising attention over the draw, then a feed-forward layer; no residual from the
    encoder states (the block sees only ``(z, π, mask)``). Logits: (q·k − ½‖k‖²)/√d_h + log π_i, i.e. a
    Gaussian-kernel attention whose prior over components is the sampled Dirichlet weights."""

    def __init__(self, dim: int, heads: int = 4, ffn: int = 2):
        super().__init__()
        if dim % heads:
            raise ValueError(f"latent dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn * dim), nn.GELU(), nn.Linear(ffn * dim, dim))

    def forward(self, z: torch.Tensor, pi: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, m, d = z.shape
        h, dh = self.heads, d // self.heads
        split = lambda t: t.view(b, m, h, dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(z)), split(self.k(z)), split(self.v(z))
        logits = (q @ k.transpose(-1, -2) - 0.5 * (k * k).sum(-1).unsqueeze(-2)) / math.sqrt(dh)
        logits = logits + torch.log(pi.clamp_min(1e-30)).view(b, 1, 1, m)
        logits = logits.masked_fill(~mask.bool().view(b, 1, 1, m), float("-inf"))
        att = torch.softmax(logits, dim=-1) @ v
        hid = self.norm1(self.o(att.transpose(1, 2).reshape(b, m, d)))
        return self.norm2(hid + self.ffn(hid))


def pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the input's own components (the prior row 0 excluded)."""
    m = mask[:, 1:].unsqueeze(-1).to(hidden.dtype)
    return (hidden[:, 1:] * m).sum(1) / m.sum(1).clamp_min(1.0)


def segments(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A segment mask (0 padding, 1 first segment, 2 second segment) as (valid, second-segment) 0/1 masks."""
    return (mask > 0).to(torch.float32), (mask > 1.5).to(torch.float32)


def pool_pair(hidden: torch.Tensor, valid: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Sentence-pair pooling: each segment's components pooled on its own (u, v), then [u, v, |u−v|, u⊙v]
    (the classic pair features). ``valid``/``second``: (B, n) masks without the prior row."""
    pad = valid.new_zeros(valid.shape[0], 1)
    u = pool(hidden, torch.cat([pad, valid - second], 1))
    v = pool(hidden, torch.cat([pad, second], 1))
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


class NVDPModule(nn.Module):
    """NVIB layer + denoising block + pooled representation + linear classifier, on token states.

    ``mask`` is a segment mask: 0 padding, 1 a token of the (first) text, 2 a token of the second text of a
    pair. With ``pair`` the two segments are pooled separately (:func:`pool_pair`); the NVIB posterior, the
    draw and the block see every token of both texts alike (the segment boundary is public, like the length)."""

    def __init__(
        self,
        dim_in: int,
        dim: int,
        n_classes: int,
        *,
        heads: int = 4,
        clip: Clip = NO_CLIP,
        stochastic: bool = True,
        pair: bool = False,
        sigma_init: float = SIGMA_INIT,
    ):
        super().__init__()
        self.nvib = NVIBLayer(dim_in, dim, clip=clip, logvar_init=2 * math.log(sigma_init))
        self.nvib.stochastic = stochastic
        self.block = DenoisingBlock(dim, heads)
        self.pair = pair
        self.head = nn.Linear(4 * dim if pair else dim, n_classes)

    def represent(self, x: torch.Tensor, mask: torch.Tensor, gen: torch.Generator):
        """(posterior, pooled representation of one draw)."""
        valid, second = segments(mask)
        post, z, pi = self.nvib(x, valid, gen)
        hidden = self.block(z, pi, post.mask)
        return post, pool_pair(hidden, valid, second) if self.pair else pool(hidden, post.mask)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, gen: torch.Generator):
        post, rep = self.represent(x, mask, gen)
        return self.head(rep), post
