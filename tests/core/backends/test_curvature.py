"""backends.curvature: the dispatch to a backend's closed forms, and the autograd reference on its own (the GGN
diagonal is the diagonal of the dense GGN block; a GGN block is symmetric positive semi-definite)."""

from __future__ import annotations

import pytest
import torch

from core.backends.test_head_curvature import _problem
from dprelease.core.backends import curvature


def test_dispatch_uses_the_backends_closed_form(monkeypatch):
    backend, model, feats, y, w, theta = _problem(5)
    monkeypatch.setattr(curvature, "ggn_diagonal_autograd", lambda *a, **k: pytest.fail("autograd path used"))
    curvature.ggn_diagonal(backend, model, theta, feats, w)


def test_autograd_diagonal_is_the_diagonal_of_the_dense_block():
    backend, model, feats, y, w, theta = _problem(5, n=12, dim=4, classes=3)
    eye = torch.eye(theta.numel())
    block = curvature.ggn_subspace_autograd(backend, model, theta, feats, w, eye)
    diag = curvature.ggn_diagonal_autograd(backend, model, theta, feats, w)
    torch.testing.assert_close(torch.diagonal(block), diag, rtol=1e-4, atol=1e-5)
    assert torch.linalg.eigvalsh(0.5 * (block + block.T)).min() > -1e-4
