"""dprelease.core.training: the weighted AdamW fine-tune on a tiny head over random unit-norm features."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_head_backend, tiny_problem

from dprelease.core.backends.base import get_flat, trainable
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams, OptimParams
from dprelease.core.training import History, epoch, finetune

N, DIM, C = 48, 384, 3
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _problem(seed: int = 0):
    return tiny_problem(N, C, seed)


def _backend() -> HeadBackend:
    return tiny_head_backend(C)


OPT = OptimParams(epochs=5, lr=1e-2, batch_size=8, weight_decay=0.01)


def test_finetune_reduces_loss_with_one_loss_per_epoch():
    feats, y = _problem()
    assert len(set(y.tolist())) == C  # every class present
    backend = _backend()
    model = backend.new_model(feats)
    history = finetune(backend, model, feats, y, None, OPT, seed=0)
    assert isinstance(history, History)
    assert len(history.losses) == OPT.epochs
    assert all(isinstance(v, float) and v >= 0 for v in history.losses)
    assert history.losses[-1] < 0.5 * history.losses[0]
    # the head actually learned the labelling
    acc = (backend.predict_proba(model, feats).argmax(1) == y).float().mean().item()
    assert acc > 0.9


def test_finetune_is_deterministic_for_a_seed():
    feats, y = _problem()
    backend = _backend()
    runs = {}
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        model = backend.new_model(feats)
        hist = finetune(backend, model, feats, y, None, OptimParams(epochs=2, lr=1e-2, batch_size=8), seed=seed)
        runs[name] = (get_flat(model).clone(), hist.losses)
    assert torch.equal(runs["a"][0], runs["b"][0])
    assert runs["a"][1] == runs["b"][1]
    assert not torch.equal(runs["a"][0], runs["c"][0])  # another seed: other batches and dropout masks


def test_unit_weights_equal_no_weights():
    feats, y = _problem()
    backend = _backend()
    opt = OptimParams(epochs=2, lr=1e-2, batch_size=8)
    m1, m2 = backend.new_model(feats), backend.new_model(feats)
    h1 = finetune(backend, m1, feats, y, None, opt, seed=3)
    h2 = finetune(backend, m2, feats, y, torch.ones(N), opt, seed=3)
    assert h1.losses == h2.losses
    assert torch.equal(get_flat(m1), get_flat(m2))


def test_zero_weights_give_zero_loss_and_only_weight_decay_moves_parameters():
    feats, y = _problem()
    backend = _backend()

    # weight_decay = 0: zero weighted loss → zero gradient → AdamW's moments stay 0 and its update is
    # 0 / (sqrt(0) + eps) = 0, so the parameters do not move at all.
    model = backend.new_model(feats)
    theta0 = get_flat(model).clone()
    hist = finetune(backend, model, feats, y, torch.zeros(N), OptimParams(epochs=2, lr=1e-2, batch_size=8), seed=0)
    assert hist.losses == [0.0, 0.0]
    assert torch.equal(get_flat(model), theta0)

    # weight_decay > 0: the gradient is still zero, but AdamW's decoupled decay multiplies every trainable
    # parameter (biases included) by (1 - lr_t * wd) at each step, whatever the loss. With the linear
    # schedule lr_t = lr * (1 - s / steps), s = 0..steps-1, the parameters shrink by exactly that product.
    opt = OptimParams(epochs=2, lr=1e-2, batch_size=8, weight_decay=0.1)
    model = backend.new_model(feats)
    theta0 = get_flat(model).clone()
    hist = finetune(backend, model, feats, y, torch.zeros(N), opt, seed=0)
    assert hist.losses == [0.0, 0.0]
    steps = opt.epochs * -(-N // opt.batch_size)
    factor = 1.0
    for s in range(steps):
        factor *= 1 - opt.lr * (1 - s / steps) * opt.weight_decay
    assert factor < 1
    torch.testing.assert_close(get_flat(model), theta0 * factor, rtol=1e-5, atol=1e-7)


def test_epoch_mean_loss_matches_weighted_definition():
    """One epoch with lr = 0 leaves θ unchanged, so its loss is the record-weighted mean of
    (1/|B|) Σ w_i CE_i over batches = (1/n) Σ w_i CE_i (not renormalised by Σ w)."""
    feats, y = _problem()
    backend = HeadBackend(n_classes=C, device=torch.device("cpu"), seed=1, params=HeadParams(hidden=8, dropout=0.0))
    model = backend.new_model(feats)
    w = torch.linspace(0.0, 2.0, N)
    optimizer = torch.optim.SGD(trainable(model), lr=0.0)
    loss = epoch(backend, model, feats, y, w, optimizer, batch_size=10, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ce = F.cross_entropy(model(feats["x"]), y, reduction="none")
    assert loss == pytest.approx(float((w * ce).mean()), rel=1e-5)


def test_the_prior_is_part_of_the_objective():
    """With ``prior_precision`` λ the mini-batch loss is mean(w·CE) + λ/(2N)|θ|²: with zero weights plain SGD
    shrinks θ by exactly (1 − lr·λ/N) per step, and an lr-0 epoch reports that objective."""
    feats, y = _problem()
    backend = _backend()
    model = backend.new_model(feats)
    theta0 = get_flat(model).clone()
    lam, lr = 3.0, 0.1
    opt = torch.optim.SGD(trainable(model), lr=lr)
    loss = epoch(
        backend,
        model,
        feats,
        y,
        torch.zeros(N),
        opt,
        batch_size=8,
        generator=torch.Generator().manual_seed(0),
        prior_precision=lam,
    )
    steps = -(-N // 8)
    torch.testing.assert_close(get_flat(model), theta0 * (1 - lr * lam / N) ** steps, rtol=1e-5, atol=1e-7)
    assert loss > 0
    backend = HeadBackend(n_classes=C, device=torch.device("cpu"), seed=1, params=HeadParams(hidden=8, dropout=0.0))
    model = backend.new_model(feats)
    theta = get_flat(model)
    loss = epoch(
        backend,
        model,
        feats,
        y,
        None,
        torch.optim.SGD(trainable(model), lr=0.0),
        batch_size=N,
        generator=torch.Generator().manual_seed(0),
        prior_precision=lam,
    )
    model.eval()
    with torch.no_grad():
        ce = F.cross_entropy(model(feats["x"]), y).item()
    assert loss == pytest.approx(ce + lam / (2 * N) * float(theta @ theta), rel=1e-5)


def _tiny_full():
    from dprelease.core.backends.full import FullBackend
    from dprelease.core.config import FullParams

    backend = FullBackend(n_classes=3, device=torch.device("cpu"), seed=5, params=FullParams(tiny=True), max_length=16)
    texts = [
        "worker fell from a ladder",
        "hand caught in a press",
        "burned by hot oil",
        "struck by a falling box",
        "cut by a saw blade",
        "slipped on ice",
    ]
    return backend, backend.featurize(texts), torch.tensor([0, 1, 2, 0, 1, 2])


def _grads(backend, model, feats, y, *, prior_precision, prior_center):
    from dprelease.core.backends.base import trainable
    from dprelease.core.training import epoch

    opt = torch.optim.SGD(trainable(model), lr=0.0)
    torch.manual_seed(0)  # the same dropout masks for both calls
    epoch(
        backend,
        model,
        feats,
        y,
        None,
        opt,
        len(y),
        torch.Generator().manual_seed(1),
        prior_precision=prior_precision,
        prior_center=prior_center,
    )
    return [p.grad.clone() for p in trainable(model)]


def test_at_the_prior_centre_the_objective_has_no_prior_gradient():
    backend, feats, y = _tiny_full()
    model = backend.build_model()  # θ₀ itself
    centre = backend.prior_center(model)
    with_prior = _grads(backend, model, feats, y, prior_precision=1e4, prior_center=centre)
    without = _grads(backend, model, feats, y, prior_precision=0.0, prior_center=None)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-7) for a, b in zip(with_prior, without))
    zero_centred = _grads(backend, model, feats, y, prior_precision=1e4, prior_center=None)
    assert not all(torch.allclose(a, b, atol=1e-4) for a, b in zip(zero_centred, without))  # N(0, I/λ) pulls


def test_a_full_backend_fine_tune_keeps_the_encoder_near_the_public_weights(monkeypatch):
    from dprelease.core.backends.base import get_flat
    from dprelease.core.config import OptimParams
    from dprelease.core.training import finetune

    backend, feats, y = _tiny_full()
    theta0 = get_flat(backend.build_model())
    opt = OptimParams(epochs=3, lr=0.01, batch_size=3, weight_decay=0.0)

    def fitted() -> float:
        model = backend.build_model(seed=7)  # a fit's own initialisation
        finetune(backend, model, feats, y, None, opt, seed=3, prior_precision=1e3)
        return float((get_flat(model) - theta0).norm())

    centred = fitted()
    monkeypatch.setattr(backend, "prior_center", lambda model: None)  # the former prior N(0, I/λ)
    zero = fitted()
    assert centred < 0.5 * zero, (centred, zero)


def test_training_options_are_keyword_only():
    """The data, weights and settings are positional; the seed and every option after them are keyword-only, in
    the fine-tune and in SWAG alike (a seed passed where a flag was expected is a TypeError, not a wrong run)."""
    import inspect

    from dprelease.mechanisms.swag_ppm import calibrate, swag_train

    for fn, positional in (
        (finetune, ["backend", "model", "features", "labels", "weights", "opt"]),
        (swag_train.swag, ["backend", "model", "features", "labels", "weights", "params"]),
        (calibrate.swag, ["backend", "model", "features", "labels", "weights", "params"]),
    ):
        kinds = {n: p.kind for n, p in inspect.signature(fn).parameters.items()}
        assert [n for n, k in kinds.items() if k is inspect.Parameter.POSITIONAL_OR_KEYWORD] == positional, fn
        assert "seed" in kinds and kinds["seed"] is inspect.Parameter.KEYWORD_ONLY, fn
