"""The full backend's fast paths (backends/full.py, full_curvature.py) against their references, on the tiny
transformer on CPU: per-record CE and probabilities in large length-sorted batches (oracle: the base class's
one-batch-at-a-time loop), the GGN diagonal, subspace block and operator and the gradient noise by torch.func
on the device (oracle: curvature.py's autograd loops); bf16 autocast only on CUDA, losses always summed in
float32 or float64; one host copy per call, none per record."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from core.backends.test_per_record_ce import NARRATIVES
from dprelease.core.backends import base as base_mod
from dprelease.core.backends import curvature, full_curvature
from dprelease.core.backends import full as full_mod
from dprelease.core.backends.base import Backend, eval_autocast, get_flat, length_sorted_batches
from dprelease.core.backends.full import FullBackend
from dprelease.core.config import FullParams

CPU = torch.device("cpu")
N_CLASSES = 5


@pytest.fixture(scope="module")
def problem():
    gen = torch.Generator().manual_seed(33)
    backend = FullBackend(n_classes=N_CLASSES, device=CPU, seed=3, params=FullParams(tiny=True), max_length=32)
    feats = backend.featurize(NARRATIVES)
    model = backend.new_model(feats)
    theta0 = get_flat(model)
    theta = theta0 + 0.02 * torch.randn(theta0.numel(), generator=gen)
    y = torch.randint(0, N_CLASSES, (len(NARRATIVES),), generator=gen)
    w = torch.rand(len(NARRATIVES), generator=gen) + 0.1
    w[2] = 0.0  # a zero weight is skipped by both paths
    thetas = theta + 0.02 * torch.randn(5, theta0.numel(), generator=gen)
    return backend, model, feats, y, w, theta, thetas


def _count_cpu_copies(monkeypatch) -> list[int]:
    calls = [0]
    original = torch.Tensor.cpu

    def counted(self, *a, **k):
        calls[0] += 1
        return original(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "cpu", counted)
    return calls


# evaluation passes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 1, 3, 64])
def test_per_record_ce_matches_the_reference_loop(problem, batch_size):
    backend, model, feats, y, _, _, thetas = problem
    fast = backend.per_record_ce(model, thetas, feats, y, batch_size=batch_size)
    ref = Backend.per_record_ce(backend, model, thetas, feats, y)
    assert fast.dtype == torch.float32 and fast.device.type == "cpu" and fast.shape == ref.shape
    np.testing.assert_allclose(fast.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_predict_proba_matches_the_reference_loop(problem):
    backend, model, feats, *_ = problem
    for size in (None, 2):
        fast = backend.predict_proba(model, feats, batch_size=size)
        ref = Backend.predict_proba(backend, model, feats)
        assert fast.dtype == torch.float32 and fast.shape == (len(NARRATIVES), N_CLASSES)
        np.testing.assert_allclose(fast.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_length_sorted_batches_cover_every_record_once_shortest_first(problem):
    _, _, feats, *_ = problem
    plan = length_sorted_batches(feats, 4, CPU)
    order = torch.cat([idx for idx, _ in plan])
    assert sorted(order.tolist()) == list(range(len(NARRATIVES)))
    lengths = feats["attention_mask"].sum(1)[order]
    assert bool((lengths[1:] >= lengths[:-1]).all())
    for idx, batch in plan:
        assert torch.equal(batch["input_ids"], feats["input_ids"][idx])


def test_one_host_copy_per_call_whatever_the_draws_and_records(problem, monkeypatch):
    backend, model, feats, y, _, _, thetas = problem
    calls = _count_cpu_copies(monkeypatch)
    backend.per_record_ce(model, thetas, feats, y, batch_size=2)  # 5 draws × 6 batches
    assert calls[0] == 1
    calls[0] = 0
    backend.predict_proba(model, feats, batch_size=2)
    assert calls[0] == 1


def test_eval_batch_size_knob(monkeypatch):
    params = FullParams(tiny=True)
    assert FullBackend(3, CPU, 0, params).eval_batch_size == full_mod.EVAL_BATCH_DEFAULT
    assert FullBackend(3, torch.device("cuda"), 0, params).eval_batch_size == full_mod.EVAL_BATCH["cuda"]
    assert FullBackend(3, CPU, 0, params, eval_batch_size=7).eval_batch_size == 7
    monkeypatch.setenv(full_mod.EVAL_BATCH_ENV, "96")
    assert FullBackend(3, CPU, 0, params).eval_batch_size == 96
    assert FullBackend(3, CPU, 0, params, eval_batch_size=7).eval_batch_size == 7  # the keyword wins


# autocast ----------------------------------------------------------------------------------------------
def test_autocast_is_only_taken_on_cuda(monkeypatch):
    monkeypatch.setattr(base_mod, "bf16_supported", lambda device: True)  # as on an H100, whatever this host has
    assert isinstance(eval_autocast(CPU), contextlib.nullcontext)
    assert isinstance(eval_autocast(torch.device("mps")), contextlib.nullcontext)
    assert isinstance(eval_autocast(torch.device("cuda"), enabled=False), contextlib.nullcontext)
    with pytest.warns(UserWarning) if not torch.cuda.is_available() else contextlib.nullcontext():
        ctx = eval_autocast(torch.device("cuda"))
    assert isinstance(ctx, torch.autocast) and ctx.device == "cuda" and ctx.fast_dtype == torch.bfloat16
    monkeypatch.setattr(base_mod, "bf16_supported", lambda device: False)  # e.g. a V100: float32
    assert isinstance(eval_autocast(torch.device("cuda")), contextlib.nullcontext)
    # the backend: on for CUDA unless switched off, and a no-op on CPU whatever the switch says
    params = FullParams(tiny=True)
    assert FullBackend(3, CPU, 0, params).amp and isinstance(
        FullBackend(3, CPU, 0, params).autocast(), contextlib.nullcontext
    )
    monkeypatch.setenv(full_mod.AMP_ENV, "0")
    assert not FullBackend(3, torch.device("cuda"), 0, params).amp


def test_losses_are_float32_even_from_bf16_logits(problem, monkeypatch):
    """What the CUDA path computes, run on CPU: the forward under a real bf16 autocast (CPU's), the logits
    upcast before the cross-entropy and softmax; results float32, close to the float32 ones (bf16 rounding
    only), and not equal to them (the autocast did run)."""
    backend, model, feats, y, _, _, thetas = problem
    exact_ce = backend.per_record_ce(model, thetas, feats, y)
    exact_p = backend.predict_proba(model, feats)
    monkeypatch.setattr(FullBackend, "autocast", lambda self: torch.autocast("cpu", dtype=torch.bfloat16))
    seen = []
    forward = FullBackend.forward

    def spy(model, batch):
        out = forward(model, batch)
        seen.append(out.dtype)
        return out

    monkeypatch.setattr(FullBackend, "forward", staticmethod(spy))
    ce = backend.per_record_ce(model, thetas, feats, y)
    p = backend.predict_proba(model, feats)
    assert set(seen) == {torch.bfloat16}
    assert ce.dtype == torch.float32 and p.dtype == torch.float32
    assert not torch.equal(ce, exact_ce)
    np.testing.assert_allclose(ce.numpy(), exact_ce.numpy(), rtol=0.05, atol=0.05)
    np.testing.assert_allclose(p.sum(1).numpy(), 1.0, atol=1e-5)  # softmax in float32: rows sum to 1
    np.testing.assert_allclose(p.numpy(), exact_p.numpy(), atol=0.02)


# curvature ---------------------------------------------------------------------------------------------
def test_curvature_dispatches_to_the_device_forms(problem, monkeypatch):
    backend, model, feats, y, w, theta, _ = problem
    for name in ("ggn_diagonal_autograd", "ggn_subspace_autograd", "ggn_operator_autograd", "gradient_noise_autograd"):
        monkeypatch.setattr(curvature, name, lambda *a, **k: pytest.fail("autograd reference used"))
    basis = torch.eye(2, theta.numel(), dtype=torch.float64)
    curvature.ggn_diagonal(backend, model, theta, feats, w)
    curvature.ggn_subspace(backend, model, theta, feats, w, basis)
    curvature.ggn_operator(backend, model, theta, feats, w)(basis)
    curvature.gradient_noise(backend, model, theta, feats, y, w)
    assert curvature.ggn_preconditioner(backend, model, theta, feats, w, 1.0) is None  # Jacobi


@pytest.mark.parametrize("weighted", [True, False])
def test_ggn_diagonal_exact_over_classes_matches_autograd(problem, weighted):
    backend, model, feats, _, w, theta, _ = problem
    w = w if weighted else None
    ref = curvature.ggn_diagonal_autograd(backend, model, theta, feats, w)
    fast = full_curvature.ggn_diagonal(model, theta, feats, w)
    assert fast.dtype == torch.float64 and fast.device.type == "cpu" and fast.shape == ref.shape
    assert ref.abs().max() > 1e-3
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-7)


def test_ggn_diagonal_sampled_label_matches_autograd_for_the_same_generator(problem):
    """More classes than ``max_exact_classes``: one label per record from p_i, drawn as the reference draws
    it, so the same generator gives the same estimate."""
    backend, model, feats, _, w, theta, _ = problem
    ref = curvature.ggn_diagonal_autograd(
        backend, model, theta, feats, w, torch.Generator().manual_seed(4), max_exact_classes=2
    )
    fast = full_curvature.ggn_diagonal(
        model, theta, feats, w, generator=torch.Generator().manual_seed(4), max_exact_classes=2
    )
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-7)
    exact = full_curvature.ggn_diagonal(model, theta, feats, w)
    assert not torch.allclose(fast, exact)  # a draw, not the exact sum


def test_ggn_diagonal_makes_no_per_record_host_copy(problem, monkeypatch):
    """A fixed number of small copies (the weights in, p for drawn labels, the result out), where the reference
    copies every record's gradient for every class."""
    backend, model, feats, _, w, theta, _ = problem
    calls = _count_cpu_copies(monkeypatch)
    full_curvature.ggn_diagonal(model, theta, feats, w)  # 10 weighted records × 5 classes
    assert calls[0] <= 2
    calls[0] = 0
    full_curvature.ggn_diagonal(model, theta, feats, w, max_exact_classes=2)
    assert calls[0] <= 3
    calls[0] = 0
    curvature.ggn_diagonal_autograd(backend, model, theta, feats, w)
    assert calls[0] >= 10 * N_CLASSES


def test_ggn_subspace_matches_autograd(problem):
    backend, model, feats, _, w, theta, _ = problem
    gen = torch.Generator().manual_seed(8)
    basis = torch.linalg.qr(torch.randn(theta.numel(), 3, dtype=torch.float64, generator=gen))[0].T.contiguous()
    ref = curvature.ggn_subspace_autograd(backend, model, theta, feats, w, basis)
    fast = full_curvature.ggn_subspace(model, theta, feats, w, basis, batch_size=4)
    assert fast.dtype == torch.float64 and fast.shape == (3, 3)
    torch.testing.assert_close(fast, ref, rtol=1e-4, atol=1e-10)
    torch.testing.assert_close(fast, fast.T)


def test_ggn_operator_matches_autograd(problem):
    backend, model, feats, _, w, theta, _ = problem
    vectors = torch.randn(3, theta.numel(), dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    ref = curvature.ggn_operator_autograd(backend, model, theta, feats, w)(vectors)
    fast = full_curvature.ggn_operator(model, theta, feats, w, batch_size=4)(vectors)
    assert fast.dtype == torch.float64 and fast.device.type == "cpu" and fast.shape == vectors.shape
    torch.testing.assert_close(fast, ref, rtol=1e-4, atol=1e-5 * float(ref.abs().max()))
    # vᵀ G v ≥ 0 and G is symmetric: uᵀ G v = vᵀ G u
    assert (torch.einsum("rd,rd->r", vectors, fast) > 0).all()
    torch.testing.assert_close(vectors[0] @ fast[1], vectors[1] @ fast[0], rtol=1e-4, atol=1e-6)


def test_ggn_operator_agrees_with_the_subspace_block(problem):
    backend, model, feats, _, w, theta, _ = problem
    gen = torch.Generator().manual_seed(10)
    basis = torch.linalg.qr(torch.randn(theta.numel(), 2, dtype=torch.float64, generator=gen))[0].T.contiguous()
    block = full_curvature.ggn_subspace(model, theta, feats, w, basis)
    applied = basis @ full_curvature.ggn_operator(model, theta, feats, w)(basis).T
    torch.testing.assert_close(applied, block, rtol=1e-4, atol=1e-9)


def test_gradient_noise_matches_autograd(problem):
    backend, model, feats, y, w, theta, _ = problem
    ref = curvature.gradient_noise_autograd(backend, model, theta, feats, y, w)
    fast = full_curvature.gradient_noise(model, theta, feats, y, w)
    np.testing.assert_allclose(fast, ref, rtol=1e-5)
    assert fast[0] >= fast[1] > 0  # mean |g|² ≥ |mean g|²
