"""backends.head_curvature: the head's closed-form curvature quantities equal the autograd reference
(backends/curvature.py), and the GGN of a linear softmax head is its exact Hessian (logistic regression: the
Laplace reference)."""

from __future__ import annotations

import pytest
import torch

from dprelease.core.backends import curvature, head_curvature
from dprelease.core.backends.base import get_flat
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams


def _problem(hidden: int, n: int = 30, dim: int = 6, classes: int = 4, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    backend = HeadBackend(classes, torch.device("cpu"), seed, HeadParams(hidden=hidden, dropout=0.1))
    feats = {"x": torch.nn.functional.normalize(torch.randn(n, dim, generator=gen), dim=-1)}
    y = torch.randint(0, classes, (n,), generator=gen)
    w = torch.rand(n, generator=gen)
    model = backend.new_model(feats)
    theta = get_flat(model) + 0.3 * torch.randn(get_flat(model).numel(), generator=gen)
    return backend, model, feats, y, w, theta


@pytest.mark.parametrize("hidden", [5, 0])
def test_closed_forms_match_autograd(hidden):
    backend, model, feats, y, w, theta = _problem(hidden)
    diag = curvature.ggn_diagonal_autograd(backend, model, theta, feats, w)
    torch.testing.assert_close(head_curvature.ggn_diagonal(model, theta, feats, w), diag, rtol=1e-5, atol=1e-5)
    basis = torch.randn(3, theta.numel(), generator=torch.Generator().manual_seed(1))
    block = curvature.ggn_subspace_autograd(backend, model, theta, feats, w, basis)
    torch.testing.assert_close(head_curvature.ggn_subspace(model, theta, feats, w, basis), block, rtol=1e-5, atol=1e-4)
    assert torch.allclose(block, block.T, atol=1e-4)  # a GGN block is symmetric
    ref = curvature.gradient_noise_autograd(backend, model, theta, feats, y, w)
    got = head_curvature.gradient_noise(model, theta, feats, y, w)
    assert got == pytest.approx(ref, rel=1e-5)


def test_linear_head_ggn_is_the_exact_hessian():
    """Softmax regression: the Hessian of Σ w_i CE_i is J^T(diag p − pp^T)J exactly (no second-order term)."""
    backend, model, feats, y, w, theta = _problem(0, classes=3)
    theta = theta.double()
    model = model.double()

    parts_shapes = [p.shape for p in model.parameters()]

    def total(t):
        wmat, b = t[: parts_shapes[0].numel()].reshape(parts_shapes[0]), t[parts_shapes[0].numel() :]
        logits = (feats["x"].double() * model.dim**0.5) @ wmat.T + b
        ce = torch.nn.functional.cross_entropy(logits, y, reduction="none")
        return (w.double() * ce).sum()

    hess = torch.autograd.functional.hessian(total, theta)
    eye = torch.eye(theta.numel(), dtype=torch.float64)
    torch.testing.assert_close(head_curvature.ggn_subspace(model, theta, feats, w, eye), hess, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(
        head_curvature.ggn_diagonal(model, theta, feats, w), torch.diagonal(hess), rtol=1e-8, atol=1e-8
    )


@pytest.mark.parametrize("hidden", [5, 0])
def test_ggn_operator_matches_autograd_and_the_dense_block(hidden):
    """G v by the closed form (float64) equals the autograd reference and the rows of the dense block B G Bᵀ."""
    backend, model, feats, y, w, theta = _problem(hidden)
    vecs = torch.randn(3, theta.numel(), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = head_curvature.ggn_operator(model, theta, feats, w, dtype=torch.float64)(vecs)
    ref = curvature.ggn_operator_autograd(backend, model, theta, feats, w)(vecs)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    eye = torch.eye(theta.numel(), dtype=torch.float64)
    dense = head_curvature.ggn_subspace(model, theta, feats, w, eye)
    torch.testing.assert_close(got, vecs @ dense, rtol=1e-8, atol=1e-8)


def test_kfac_preconditioner_is_symmetric_positive_definite():
    backend, model, feats, y, w, theta = _problem(5)
    eye = torch.eye(theta.numel(), dtype=torch.float64)
    p = head_curvature.kfac_preconditioner(model, theta, feats, w, 1.0)(eye)
    torch.testing.assert_close(p, p.T, rtol=1e-10, atol=1e-12)
    assert torch.linalg.eigvalsh(p).min() > 0
