"""Closed forms of the curvature quantities (see ``curvature.py``) for the classifier head
x̃ → [W1, b1, GELU] → W2, b2 (x̃ = √dim·x; eval mode, so dropout is the identity).

With u = x̃W1ᵀ + b1, a = gelu(u), z = aW2ᵀ + b2, p = softmax(z) and weights w_i:
* GGN diagonal (= Fisher): W2[k,h]: Σ w p_k(1−p_k) a_h²; b2[k]: Σ w p_k(1−p_k);
  W1[h,j]: Σ w gelu′(u_h)² Var_{c∼p}(W2[c,h]) x̃_j²; b1[h]: Σ w gelu′(u_h)² Var_{c∼p}(W2[c,h]).
* Jacobian-vector product along d = (dW1, db1, dW2, db2): Jd = a dW2ᵀ + db2 + (gelu′(u) ⊙ (x̃dW1ᵀ + db1)) W2ᵀ,
  and d_aᵀGd_b = Σ_i w_i (Jd_a)ᵀ (diag p_i − p_i p_iᵀ) (Jd_b) for the rows of a basis (the K × K block).
* Per-example gradient of ℓ = w·CE: r = w(p − e_y); |∇W2|² = |r|²|a|², |∇b2|² = |r|², with
  g = gelu′(u) ⊙ (rW2): |∇W1|² = |g|²|x̃|², |∇b1|² = |g|².
A linear head (hidden = 0) is the same with a = x̃ and no first layer.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import trainable

CHUNK = 2048


def _gelu_prime(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(u / math.sqrt(2))) + u * torch.exp(-0.5 * u**2) / math.sqrt(2 * math.pi)


def _unpack(model: nn.Module, theta: torch.Tensor) -> list[torch.Tensor]:
    shapes = [p.shape for p in trainable(model)]
    return [c.reshape(s).double() for c, s in zip(theta.double().split([s.numel() for s in shapes]), shapes)]


def _forward(model: nn.Module, parts: list[torch.Tensor], x: torch.Tensor):
    """(x̃, u, a, p) with u = None for a linear head."""
    xt = x.double() * model.dim**0.5
    if model.hidden:
        w1, b1, w2, b2 = parts
        u = xt @ w1.T + b1
        a = torch.nn.functional.gelu(u)
    else:
        (w2, b2), u, a = parts, None, xt
    p = torch.softmax(a @ w2.T + b2, -1)
    return xt, u, a, p


def _chunks(features, weights):
    x = features["x"]
    n = x.shape[0]
    w = torch.ones(n, dtype=torch.float64) if weights is None else weights.double().cpu()
    for s in range(0, n, CHUNK):
        yield slice(s, s + CHUNK), x[s : s + CHUNK].cpu(), w[s : s + CHUNK]


@torch.no_grad()
def ggn_diagonal(model: nn.Module, theta: torch.Tensor, features, weights) -> torch.Tensor:
    parts = _unpack(model, theta)
    acc = [torch.zeros_like(p) for p in parts]
    w2 = parts[-2]
    for _, x, w in _chunks(features, weights):
        xt, u, a, p = _forward(model, parts, x)
        pq = w[:, None] * p * (1 - p)  # [n, C]
        acc[-2] += pq.T @ a**2
        acc[-1] += pq.sum(0)
        if model.hidden:
            var = p @ w2**2 - (p @ w2) ** 2  # Var_{c~p}(W2[c, h]), [n, H]
            v = w[:, None] * _gelu_prime(u) ** 2 * var
            acc[0] += v.T @ xt**2
            acc[1] += v.sum(0)
    return torch.cat([t.reshape(-1) for t in acc])


@torch.no_grad()
def ggn_subspace(model: nn.Module, theta: torch.Tensor, features, weights, basis: torch.Tensor) -> torch.Tensor:
    parts = _unpack(model, theta)
    dirs = [_unpack(model, d) for d in basis]
    w2 = parts[-2]
    out = torch.zeros(len(dirs), len(dirs), dtype=torch.float64)
    for _, x, w in _chunks(features, weights):
        xt, u, a, p = _forward(model, parts, x)
        gp = _gelu_prime(u) if model.hidden else None
        jds = []
        for d in dirs:
            jd = a @ d[-2].T + d[-1]
            if model.hidden:
                jd = jd + (gp * (xt @ d[0].T + d[1])) @ w2.T
            jds.append(jd)
        out += _ggn_block(torch.stack(jds), p, w)
    return out


def _ggn_block(jd: torch.Tensor, p: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Σ_i w_i (Jd_a)ᵀ (diag p_i − p_i p_iᵀ) (Jd_b) for tangents jd [K, n, C]."""
    pj = (p * jd).sum(-1)  # [K, n]
    return torch.einsum("n,anc,bnc->ab", w, jd * p, jd) - torch.einsum("n,an,bn->ab", w, pj, pj)


@torch.no_grad()
def gradient_noise(model: nn.Module, theta: torch.Tensor, features, labels: torch.Tensor, weights) -> tuple[float, float]:
    parts = _unpack(model, theta)
    w2 = parts[-2]
    mean = [torch.zeros_like(p) for p in parts]
    sq, n = 0.0, features["x"].shape[0]
    for sl, x, w in _chunks(features, weights):
        xt, u, a, p = _forward(model, parts, x)
        r = p.clone()
        r[torch.arange(len(r)), labels[sl].long()] -= 1
        r = w[:, None] * r
        r2 = (r**2).sum(-1)
        sq += float((r2 * (a**2).sum(-1)).sum() + r2.sum())
        mean[-2] += r.T @ a
        mean[-1] += r.sum(0)
        if model.hidden:
            g = _gelu_prime(u) * (r @ w2)
            g2 = (g**2).sum(-1)
            sq += float((g2 * (xt**2).sum(-1)).sum() + g2.sum())
            mean[0] += g.T @ xt
            mean[1] += g.sum(0)
    flat = torch.cat([m.reshape(-1) for m in mean]) / n
    return sq / n, float(flat @ flat)
