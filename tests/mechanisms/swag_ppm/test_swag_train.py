"""dprelease.mechanisms.swag_ppm.swag_train: constant-lr SGD with one SWAG snapshot per epoch."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_head_backend, tiny_problem

from dprelease.core.backends.base import get_flat
from dprelease.core.backends.head import HeadBackend
from dprelease.core.training import History
from dprelease.mechanisms.swag_ppm.params import SwagParams
from dprelease.mechanisms.swag_ppm.swag import SwagMoments
from dprelease.mechanisms.swag_ppm.swag_train import swag

N, DIM, C = 40, 384, 3
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _problem(seed: int = 0):
    return tiny_problem(N, C, seed)


def _backend() -> HeadBackend:
    return tiny_head_backend(C)


def _run(params: SwagParams, seed: int = 0, weights=None):
    feats, y = _problem()
    backend = _backend()
    model = backend.new_model(feats)
    snapshots: list[torch.Tensor] = []
    epochs_seen: list[int] = []

    def on_snapshot(e: int) -> None:
        epochs_seen.append(e)
        snapshots.append(get_flat(model).clone())

    moments, history = swag(backend, model, feats, y, weights, params, seed=seed, on_snapshot=on_snapshot)
    return model, moments, history, snapshots, epochs_seen


@pytest.mark.parametrize("epochs,rank,expected_rank", [(4, 2, 2), (3, 5, 3), (3, 3, 3)])
def test_moments_shape_and_counts(epochs, rank, expected_rank):
    model, moments, history, snaps, seen = _run(SwagParams(epochs=epochs, rank=rank, lr=0.05, batch_size=8))
    assert isinstance(moments, SwagMoments) and isinstance(history, History)
    assert moments.n_models == epochs
    assert moments.rank == min(rank, epochs) == expected_rank  # the FIFO keeps at most `rank` deviations
    d = sum(p.numel() for p in model.parameters())
    assert moments.dim == d and moments.var.shape == (d,) and moments.deviations.shape == (expected_rank, d)
    assert moments.mean.dtype == torch.float64
    assert len(history.losses) == epochs
    assert all(v > 0 for v in history.losses)
    assert seen == list(range(epochs))  # callback once per epoch, after the snapshot
    assert len(snaps) == epochs


def test_mean_and_variance_are_those_of_the_snapshots():
    model, moments, _, snaps, _ = _run(SwagParams(epochs=4, rank=2, lr=0.05, batch_size=8))
    stack = torch.stack(snaps).double()
    torch.testing.assert_close(moments.mean, stack.mean(0), rtol=0, atol=1e-12)
    torch.testing.assert_close(moments.var, stack.var(0, unbiased=False).clamp_min(1e-30), rtol=1e-6, atol=1e-14)
    # the last snapshot is the model's final state; the deviations are the last `rank` snapshots
    # minus the running mean after each of them
    assert torch.equal(snaps[-1], get_flat(model))
    torch.testing.assert_close(moments.deviations[-1].double(), stack[-1] - stack.mean(0), rtol=0, atol=1e-6)
    torch.testing.assert_close(moments.deviations[0].double(), stack[2] - stack[:3].mean(0), rtol=0, atol=1e-6)
    assert not torch.allclose(snaps[0], snaps[-1])  # SGD actually moved between snapshots


def test_loss_goes_down_and_run_is_deterministic():
    params = SwagParams(epochs=3, rank=2, lr=0.05, batch_size=8)
    _, m1, h1, _, _ = _run(params, seed=4)
    _, m2, h2, _, _ = _run(params, seed=4)
    _, m3, _, _, _ = _run(params, seed=5)
    assert h1.losses[-1] < h1.losses[0]
    assert h1.losses == h2.losses
    assert torch.equal(m1.mean, m2.mean) and torch.equal(m1.deviations, m2.deviations)
    assert not torch.equal(m1.mean, m3.mean)


def test_zero_weights_freeze_the_model():
    """Zero weighted loss → zero gradient; plain SGD (no weight decay) does not move: every snapshot is θ₀,
    the variance is clamped at its floor and the deviations are zero."""
    feats, _ = _problem()
    theta0 = get_flat(_backend().new_model(feats))
    _, moments, history, snaps, _ = _run(
        SwagParams(epochs=3, rank=2, lr=0.05, momentum=0.5, batch_size=8), weights=torch.zeros(N)
    )
    assert history.losses == [0.0, 0.0, 0.0]
    assert all(torch.equal(s, theta0) for s in snaps)
    torch.testing.assert_close(moments.mean, theta0.double())
    assert torch.all(moments.var == 1e-30)
    assert torch.count_nonzero(moments.deviations) == 0
