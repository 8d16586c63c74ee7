"""Curvature and gradient-noise quantities of the weighted loss Σ_i w_i CE_i(θ) at one θ, by plain autograd: the
reference that the head's closed forms and the full backend's ``torch.func`` forms are tested equal to.

See docs/algorithms.md, I.1."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from dprelease.core.backends.base import Backend, Features, batches, n_records, set_flat, take, trainable


def _flat_grad(out: torch.Tensor, params: list[nn.Parameter], retain: bool) -> torch.Tensor:
    grads = torch.autograd.grad(out, params, retain_graph=retain, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


def _weights(weights: torch.Tensor | None, n: int) -> torch.Tensor:
    return torch.ones(n) if weights is None else weights.float().cpu()


def ggn_diagonal_autograd(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    generator: torch.Generator | None = None,
    max_exact_classes: int = 16,
) -> torch.Tensor:
    set_flat(model, theta)
    model.eval()
    params, n = trainable(model), n_records(features)
    w = _weights(weights, n)
    out = torch.zeros(theta.numel(), dtype=torch.float64)
    for i in range(n):
        if w[i] == 0:
            continue
        logits = backend.forward(model, take(features, torch.tensor([i]), backend.device))[0].float()
        logp = F.log_softmax(logits, -1)
        p = logp.exp().detach().cpu()
        if len(p) <= max_exact_classes:
            picks = [(c, float(p[c])) for c in range(len(p))]
        else:
            picks = [(int(torch.multinomial(p, 1, generator=generator)), 1.0)]
        for j, (c, coef) in enumerate(picks):
            g = _flat_grad(logp[c], params, retain=j < len(picks) - 1).double().cpu()
            out += float(w[i]) * coef * g**2
    return out


def ggn_subspace_autograd(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    basis: torch.Tensor,
    batch_size: int = 256,
) -> torch.Tensor:
    """[K, K] block B G Bᵀ for the rows of ``basis``. J d comes from the double-backward trick:
    J d = ∂/∂u (dᵀ Jᵀ u)."""
    set_flat(model, theta)
    model.eval()
    params, n = trainable(model), n_records(features)
    w = _weights(weights, n).double()
    out = torch.zeros(basis.shape[0], basis.shape[0], dtype=torch.float64)
    with sdpa_kernel([SDPBackend.MATH]):  # fused attention kernels have no double backward
        for idx in batches(n, batch_size):
            out += _block(backend, model, params, take(features, idx, backend.device), w[idx], basis)
    return out


def _block(
    backend: Backend,
    model: nn.Module,
    params: list[nn.Parameter],
    batch: Features,
    w: torch.Tensor,
    basis: torch.Tensor,
) -> torch.Tensor:
    logits = backend.forward(model, batch).float()
    p = torch.softmax(logits, -1).detach().double().cpu()
    u = torch.zeros_like(logits, requires_grad=True)
    vjp = torch.autograd.grad(logits, params, u, create_graph=True, allow_unused=True)
    flat = torch.cat([(v if v is not None else torch.zeros_like(q)).reshape(-1) for v, q in zip(vjp, params)])
    jd = torch.stack(
        [torch.autograd.grad(flat @ d.to(flat), u, retain_graph=True)[0].detach().double().cpu() for d in basis]
    )  # [K, b, C]
    pj = (p * jd).sum(-1)
    return torch.einsum("n,anc,bnc->ab", w, jd * p, jd) - torch.einsum("n,an,bn->ab", w, pj, pj)


def ggn_operator_autograd(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    batch_size: int = 256,
):
    """v ↦ G v (rows of [r, d], float64 out): per batch Jv by the double-backward trick, then
    Jᵀ w (diag p − ppᵀ) Jv by one vector-Jacobian product."""
    set_flat(model, theta)
    model.eval()
    params, n = trainable(model), n_records(features)
    w = _weights(weights, n)

    def apply(vectors: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(vectors.shape, dtype=torch.float64)
        with sdpa_kernel([SDPBackend.MATH]):
            for idx in batches(n, batch_size):
                logits = backend.forward(model, take(features, idx, backend.device)).float()
                p = torch.softmax(logits, -1).detach()
                u = torch.zeros_like(logits, requires_grad=True)
                vjp = torch.autograd.grad(logits, params, u, create_graph=True, allow_unused=True)
                flat = torch.cat(
                    [(v if v is not None else torch.zeros_like(q)).reshape(-1) for v, q in zip(vjp, params)]
                )
                wb = w[idx].to(logits)[:, None]
                for k, d in enumerate(vectors):
                    jd = torch.autograd.grad(flat @ d.to(flat), u, retain_graph=True)[0].detach()
                    e = wb * (p * jd - p * (p * jd).sum(-1, keepdim=True))
                    out[k] += _flat_grad((logits * e).sum(), params, retain=True).double().cpu()
        return out

    return apply


def gradient_noise_autograd(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
) -> tuple[float, float]:
    """(mean_i |∇ℓ_i|², |mean_i ∇ℓ_i|²) for ℓ_i = w_i CE_i(θ), model in eval mode."""
    set_flat(model, theta)
    model.eval()
    params, n = trainable(model), n_records(features)
    w = _weights(weights, n)
    total = torch.zeros(theta.numel(), dtype=torch.float64)
    sq = 0.0
    for i in range(n):
        logits = backend.forward(model, take(features, torch.tensor([i]), backend.device)).float()
        loss = float(w[i]) * F.cross_entropy(logits, labels[i : i + 1].to(backend.device))
        g = _flat_grad(loss, params, retain=False).double().cpu()
        total += g
        sq += float(g @ g)
    mean = total / n
    return sq / n, float(mean @ mean)


def ggn_diagonal(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    fast = getattr(backend, "ggn_diagonal", None)
    if fast is not None:
        return fast(model, theta, features, weights)
    return ggn_diagonal_autograd(backend, model, theta, features, weights, generator)


def ggn_subspace(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    basis: torch.Tensor,
) -> torch.Tensor:
    fast = getattr(backend, "ggn_subspace", None)
    if fast is not None:
        return fast(model, theta, features, weights, basis)
    return ggn_subspace_autograd(backend, model, theta, features, weights, basis)


def ggn_operator(
    backend: Backend, model: nn.Module, theta: torch.Tensor, features: Features, weights: torch.Tensor | None
):
    fast = getattr(backend, "ggn_operator", None)
    if fast is not None:
        return fast(model, theta, features, weights)
    return ggn_operator_autograd(backend, model, theta, features, weights)


def ggn_preconditioner(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    weights: torch.Tensor | None,
    prior_precision: float,
):
    """An approximate (G + λI)⁻¹ operator for conjugate gradients, or None (then: Jacobi)."""
    fast = getattr(backend, "ggn_preconditioner", None)
    return None if fast is None else fast(model, theta, features, weights, prior_precision)


def gradient_noise(
    backend: Backend,
    model: nn.Module,
    theta: torch.Tensor,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
) -> tuple[float, float]:
    fast = getattr(backend, "gradient_noise", None)
    if fast is not None:
        return fast(model, theta, features, labels, weights)
    return gradient_noise_autograd(backend, model, theta, features, labels, weights)
