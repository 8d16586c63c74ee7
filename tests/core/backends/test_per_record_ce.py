"""Per-record cross-entropy for a stack of parameter draws: the numbers ε = 2·max is taken over.

Both backends are checked against (a) the generic one-draw-at-a-time base-class path and (b) an
independent float64 numpy reference (set_flat → eval-mode logits → log-sum-exp cross-entropy).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.core.backends.base import Backend, get_flat, set_flat
from dprelease.core.backends.full import FullBackend
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import FullParams, HeadParams

CPU = torch.device("cpu")
N_CLASSES = 5
S = 7

NARRATIVES = [
    "An employee was climbing a ladder to change a light bulb when the ladder slipped and he fell, fracturing his left wrist.",
    "A worker was cutting cardboard with a box cutter and lacerated his right index finger.",
    "Employee was struck in the head by a falling pallet in the warehouse and suffered a concussion.",
    "While lifting a heavy drum, the employee felt a sharp pain in her lower back.",
    "An employee's hand was caught in the rollers of a conveyor, amputating the tip of the middle finger.",
    "A truck driver slipped on ice while exiting the cab and broke his ankle.",
    "Employee splashed sodium hydroxide on his forearm while cleaning a tank, causing chemical burns.",
    "A roofer fell approximately 12 feet through a skylight and fractured several ribs.",
    "Worker received an electric shock while replacing a breaker and was hospitalized for observation.",
    "An employee was burned on the hand by hot oil from a fryer.",
    "A forklift ran over the foot of a pedestrian worker, crushing two toes.",
]


def unit_rows(n: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, dim, generator=gen)
    return x / x.norm(dim=1, keepdim=True)


def draws(model: torch.nn.Module, s: int, scale: float, gen: torch.Generator) -> torch.Tensor:
    theta0 = get_flat(model)
    return theta0 + scale * torch.randn(s, theta0.numel(), generator=gen)


def reference_ce(backend: Backend, model, thetas, feats, labels) -> np.ndarray:
    """float64 CE from eval-mode logits, draw by draw, computed in numpy with log-sum-exp."""
    model.eval()
    y = labels.numpy()
    rows = []
    for theta in thetas:
        set_flat(model, theta)
        with torch.no_grad():
            z = backend.forward(model, feats).double().numpy()
        m = z.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
        rows.append(lse - z[np.arange(len(y)), y])
    return np.stack(rows)


# fixtures ----------------------------------------------------------------------------------------
def _head_case(hidden: int):
    gen = torch.Generator().manual_seed(101 + hidden)
    backend = HeadBackend(n_classes=N_CLASSES, device=CPU, seed=3, params=HeadParams(hidden=hidden, dropout=0.3))
    feats = {"x": unit_rows(11, 384, gen)}
    labels = torch.randint(0, N_CLASSES, (11,), generator=gen)
    model = backend.new_model(feats)
    thetas = draws(model, S, 0.05, gen)
    return backend, model, thetas, feats, labels


def _full_case():
    gen = torch.Generator().manual_seed(202)
    backend = FullBackend(n_classes=N_CLASSES, device=CPU, seed=3, params=FullParams(tiny=True), max_length=32)
    feats = backend.featurize(NARRATIVES)
    labels = torch.randint(0, N_CLASSES, (len(NARRATIVES),), generator=gen)
    model = backend.new_model(feats)
    thetas = draws(model, S, 0.02, gen)
    return backend, model, thetas, feats, labels


@pytest.fixture(scope="module")
def full_case():
    return _full_case()


@pytest.fixture(scope="module", params=["head-mlp16", "head-linear", "full-tiny"])
def case(request):
    if request.param == "full-tiny":
        return request.getfixturevalue("full_case")
    return _head_case(16 if request.param == "head-mlp16" else 0)


# tests -------------------------------------------------------------------------------------------
def test_full_features_are_padded_token_ids(full_case):
    _, _, _, feats, _ = full_case
    assert set(feats) == {"input_ids", "attention_mask"}
    assert feats["input_ids"].shape == feats["attention_mask"].shape
    assert feats["input_ids"].shape[0] == len(NARRATIVES)
    assert feats["input_ids"].shape[1] <= 32
    # the longest narrative is truncated to max_length, so the longest row fills every column
    assert int(feats["attention_mask"].sum(1).max()) == feats["input_ids"].shape[1]
    assert int(feats["attention_mask"].sum(1).min()) < feats["input_ids"].shape[1]  # some rows are padded


def test_draws_differ_enough_to_matter(case):
    """Guard against a vacuous comparison: the draws give visibly different losses."""
    backend, model, thetas, feats, labels = case
    ce = reference_ce(backend, model, thetas, feats, labels)
    assert np.isfinite(ce).all() and (ce > 0).all()
    assert np.ptp(ce, axis=0).max() > 1e-3


def test_matches_generic_and_float64_reference(case):
    backend, model, thetas, feats, labels = case
    ce = backend.per_record_ce(model, thetas, feats, labels)
    generic = Backend.per_record_ce(backend, model, thetas, feats, labels)
    ref = reference_ce(backend, model, thetas, feats, labels)
    n = labels.shape[0]
    assert ce.shape == (S, n) and generic.shape == (S, n)
    assert ce.dtype == torch.float32 and ce.device.type == "cpu"
    np.testing.assert_allclose(ce.numpy(), generic.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(ce.double().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(generic.double().numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_chunking_does_not_change_losses(case, batch_size):
    """Record counts that are not a multiple of the batch size (11 records) give the same numbers
    (the default batch sizes exceed n: a single partial chunk, covered above)."""
    backend, model, thetas, feats, labels = case
    few = thetas[:3]
    ref = reference_ce(backend, model, few, feats, labels)
    ce = backend.per_record_ce(model, few, feats, labels, batch_size=batch_size)
    generic = Backend.per_record_ce(backend, model, few, feats, labels, batch_size=batch_size)
    np.testing.assert_allclose(ce.double().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(generic.double().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_leaves_model_in_eval_mode(case):
    backend, model, thetas, feats, labels = case
    model.train()
    first = backend.per_record_ce(model, thetas, feats, labels)
    assert not model.training
    assert not any(m.training for m in model.modules())
    # dropout is off: a second call (model still in eval) is bit-identical
    model.train()
    second = backend.per_record_ce(model, thetas, feats, labels)
    assert torch.equal(first, second)


def test_single_draw(case):
    backend, model, thetas, feats, labels = case
    one = thetas[2:3]
    ce = backend.per_record_ce(model, one, feats, labels)
    assert ce.shape == (1, labels.shape[0]) and ce.dtype == torch.float32
    ref = reference_ce(backend, model, one, feats, labels)
    np.testing.assert_allclose(ce.double().numpy(), ref, rtol=1e-5, atol=1e-5)
    # and it is the same row as in the S-draw stack
    stack = backend.per_record_ce(model, thetas, feats, labels)
    np.testing.assert_allclose(ce[0].numpy(), stack[2].numpy(), rtol=0, atol=1e-5)


def test_rows_follow_draw_order_and_columns_follow_records(case):
    """Permuting the draws permutes the rows; permuting records (and labels) permutes the columns."""
    backend, model, thetas, feats, labels = case
    base = backend.per_record_ce(model, thetas, feats, labels)
    perm_s = torch.tensor([6, 0, 5, 1, 4, 2, 3])
    np.testing.assert_allclose(
        backend.per_record_ce(model, thetas[perm_s], feats, labels).numpy(), base[perm_s].numpy(), rtol=0, atol=1e-5
    )
    perm_n = torch.randperm(labels.shape[0], generator=torch.Generator().manual_seed(5))
    shuffled = {k: v[perm_n] for k, v in feats.items()}
    np.testing.assert_allclose(
        backend.per_record_ce(model, thetas, shuffled, labels[perm_n]).numpy(),
        base[:, perm_n].numpy(),
        rtol=0,
        atol=1e-5,
    )


def test_label_enters_loss(case):
    """CE_i(θ) = logsumexp(z_i) − z_i[y_i]: changing a label changes exactly that column."""
    backend, model, thetas, feats, labels = case
    base = backend.per_record_ce(model, thetas, feats, labels)
    other = labels.clone()
    other[4] = (other[4] + 1) % N_CLASSES
    moved = backend.per_record_ce(model, thetas, feats, other)
    keep = [i for i in range(labels.shape[0]) if i != 4]
    np.testing.assert_allclose(moved[:, keep].numpy(), base[:, keep].numpy(), rtol=0, atol=1e-6)
    assert (moved[:, 4] - base[:, 4]).abs().min() > 0
    # summing exp(−CE) over all labels gives 1 for every draw and record (a proper softmax)
    total = sum(
        torch.exp(-backend.per_record_ce(model, thetas[:2], feats, torch.full_like(labels, c)))
        for c in range(N_CLASSES)
    )
    np.testing.assert_allclose(total.numpy(), 1.0, atol=1e-5)
