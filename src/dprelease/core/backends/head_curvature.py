"""Closed forms of the curvature quantities (``curvature.py``) for the classifier head, and the K-FAC preconditioner
conjugate gradients use: exact, and fast enough to run on every record.

See docs/algorithms.md, I.3."""

from __future__ import annotations

import math

import torch
from torch import nn

from dprelease.core.backends.base import trainable

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


def ggn_operator(model: nn.Module, theta: torch.Tensor, features, weights, dtype: torch.dtype = torch.float32):
    """v ↦ G v for the rows of [r, d] tensors (float64 out). The forward pass at θ is computed once (float64)
    and kept in ``dtype``, which the large products run in; accumulation is float64."""
    parts = _unpack(model, theta)
    shapes = [p.shape for p in parts]
    w2 = parts[-2].to(dtype)
    cache = []
    with torch.no_grad():
        for _, x, w in _chunks(features, weights):
            xt, u, a, p = _forward(model, parts, x)
            gp = _gelu_prime(u).to(dtype) if model.hidden else None
            cache.append((xt.to(dtype), gp, a.to(dtype), p.to(dtype), w.to(dtype)))

    @torch.no_grad()
    def apply(vectors: torch.Tensor) -> torch.Tensor:
        r = vectors.shape[0]
        dirs = [c.reshape(r, *s).to(dtype) for c, s in zip(vectors.split([s.numel() for s in shapes], dim=1), shapes)]
        acc = [torch.zeros(r, *s, dtype=torch.float64) for s in shapes]
        for xt, gp, a, p, w in cache:
            jd = torch.einsum("nh,rch->rnc", a, dirs[-2]) + dirs[-1][:, None, :]  # J d, [r, n, C]
            if model.hidden:
                pre = (xt @ dirs[0].reshape(-1, xt.shape[1]).T).reshape(len(xt), r, -1).transpose(0, 1)
                jd = jd + (gp * (pre + dirs[1][:, None])) @ w2.T
            e = w[:, None] * (p * jd - p * (p * jd).sum(-1, keepdim=True))  # (diag p − ppᵀ) J d, weighted
            acc[-2] += torch.einsum("rnc,nh->rch", e, a).double()
            acc[-1] += e.sum(1).double()
            if model.hidden:
                du = gp * (e @ w2)  # [r, n, H]
                acc[0] += (du.transpose(1, 2).reshape(-1, len(xt)) @ xt).reshape(acc[0].shape).double()
                acc[1] += du.sum(1).double()
        return torch.cat([t.reshape(r, -1) for t in acc], dim=1)

    return apply


@torch.no_grad()
def kfac_preconditioner(
    model: nn.Module, theta: torch.Tensor, features, weights, prior_precision: float, samples: int = 4, seed: int = 0
):
    """v ↦ P v ≈ (G + λI)⁻¹ v for the rows of [m, d] tensors (float64 in and out); module docstring."""
    parts = _unpack(model, theta)
    shapes = [p.shape for p in parts]
    w2 = parts[-2]
    gen = torch.Generator().manual_seed(seed)
    n = features["x"].shape[0]
    a_in = torch.zeros(shapes[0][1] + 1, shapes[0][1] + 1, dtype=torch.float64) if model.hidden else None
    a_out = torch.zeros(shapes[-2][1] + 1, shapes[-2][1] + 1, dtype=torch.float64)
    b_in = torch.zeros(shapes[0][0], shapes[0][0], dtype=torch.float64) if model.hidden else None
    b_out = torch.zeros(shapes[-1][0], shapes[-1][0], dtype=torch.float64)
    for _, x, w in _chunks(features, weights):
        xt, u, a, p = _forward(model, parts, x)
        ones = torch.ones(len(x), 1, dtype=torch.float64)
        ah = torch.cat([a, ones], 1)
        a_out += ah.T @ ah / n
        for _ in range(samples):
            c = torch.multinomial(p.float(), 1, generator=gen)[:, 0]
            e = -p.clone()
            e[torch.arange(len(c)), c] += 1  # ∇_z log p_c
            sw = e * (w / samples).sqrt()[:, None]
            b_out += sw.T @ sw
            if model.hidden:
                s_in = _gelu_prime(u) * (sw @ w2)
                b_in += s_in.T @ s_in
        if model.hidden:
            xh = torch.cat([xt, ones], 1)
            a_in += xh.T @ xh / n
    layers = ([(b_in, a_in)] if model.hidden else []) + [(b_out, a_out)]
    eig = [(torch.linalg.eigh(b), torch.linalg.eigh(a)) for b, a in layers]
    sizes = [s.numel() for s in shapes]

    def apply(vectors: torch.Tensor) -> torch.Tensor:
        v = vectors.double().split(sizes, dim=1)
        out = []
        for k, ((sb, qb), (sa, qa)) in enumerate(eig):
            wm, bv = v[2 * k].reshape(len(vectors), *shapes[2 * k]), v[2 * k + 1]
            m = torch.cat([wm, bv[:, :, None]], 2)  # [m, out, in + 1]
            rot = qb.T @ m @ qa / (sb[:, None] * sa[None, :] + prior_precision)
            back = qb @ rot @ qa.T
            out += [back[:, :, :-1].reshape(len(vectors), -1), back[:, :, -1]]
        return torch.cat(out, dim=1)

    return apply


def _ggn_block(jd: torch.Tensor, p: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Σ_i w_i (Jd_a)ᵀ (diag p_i − p_i p_iᵀ) (Jd_b) for tangents jd [K, n, C]."""
    pj = (p * jd).sum(-1)  # [K, n]
    return torch.einsum("n,anc,bnc->ab", w, jd * p, jd) - torch.einsum("n,an,bn->ab", w, pj, pj)


@torch.no_grad()
def gradient_noise(
    model: nn.Module, theta: torch.Tensor, features, labels: torch.Tensor, weights
) -> tuple[float, float]:
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
