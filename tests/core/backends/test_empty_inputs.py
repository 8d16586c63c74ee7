"""0-row inputs, which a subset or batch drawn from the secret key can produce (an empty DP-SGD Poisson batch, a
canary subset): every backend's forward gives an empty [0, C] output (still attached to the parameters, so a
training step on it is a zero-gradient step), per-record CE of 0 records an empty [S, 0] tensor,
predict_proba an empty [0, C]; a fit over 0 records is a one-line error naming the fit."""

from __future__ import annotations

import pytest
import torch

from core.backends.test_backend_registry import CPU, TEXTS
from dprelease.core.backends.base import get_flat
from dprelease.core.backends.full import FullBackend
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import FullParams, HeadParams, OptimParams
from dprelease.core.errors import DataError, OneLineError
from dprelease.mechanisms.swag_ppm.params import SwagParams

C = 3


def _backend(name: str):
    if name == "head":
        return HeadBackend(n_classes=C, device=CPU, seed=1, params=HeadParams(hidden=8))
    return FullBackend(n_classes=C, device=CPU, seed=5, params=FullParams(tiny=True), max_length=32)


def _features(backend, n: int = len(TEXTS)) -> tuple[dict, torch.Tensor]:
    if backend.name == "head":  # unit rows standing for embeddings (no encoder pass needed)
        x = torch.nn.functional.normalize(torch.randn(n, 384, generator=torch.Generator().manual_seed(0)), dim=1)
        feats = {"x": x}
    else:
        feats = backend.featurize((TEXTS * n)[:n])
    return feats, torch.arange(n) % C


def _empty(feats: dict) -> dict:
    return {k: v[:0] for k, v in feats.items()}


@pytest.fixture(params=["head", "full"])
def setup(request):
    backend = _backend(request.param)
    feats, y = _features(backend)
    return backend, backend.new_model(feats), feats, y


def test_forward_on_0_rows_is_an_empty_output_attached_to_every_parameter(setup):
    backend, model, feats, _ = setup
    model.train()
    logits = backend.forward(model, _empty(feats))
    assert logits.shape == (0, C)
    logits.float().sum().backward()  # a training step on an empty batch: zero gradient, no crash
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and not g.any() for g in grads)
    model.eval()
    with torch.no_grad():
        assert backend.forward(model, _empty(feats)).shape == (0, C)
        assert backend.forward(model, take_rows(feats, 2)).shape == (2, C)  # non-empty batches unchanged


def take_rows(feats: dict, n: int) -> dict:
    return {k: v[:n] for k, v in feats.items()}


def test_predict_proba_of_0_rows_is_empty(setup):
    backend, model, feats, _ = setup
    probs = backend.predict_proba(model, _empty(feats))
    assert probs.shape == (0, C) and probs.dtype == torch.float32


def test_the_release_scorer_of_0_narratives_is_empty(setup, tmp_path):
    backend, model, _, _ = setup
    arch = backend.write_release_model(model, tmp_path)
    probs = type(backend).release_scorer(tmp_path, arch, CPU)([])
    assert probs.shape == (0, C)


def test_per_record_ce_of_0_records_is_empty(setup):
    backend, model, feats, y = setup
    thetas = get_flat(model).expand(4, -1).clone()
    ce = backend.per_record_ce(model, thetas, _empty(feats), y[:0])
    assert ce.shape == (4, 0)
    assert backend.per_record_ce(model, thetas, feats, y).shape == (4, len(y))


def test_a_fit_over_0_records_is_a_one_line_error_naming_it(setup):
    from dprelease.core.training import epoch, finetune
    from dprelease.mechanisms.swag_ppm.swag_train import swag

    backend, model, feats, y = setup
    empty, none, before = _empty(feats), y[:0], get_flat(model)
    opt = OptimParams(epochs=1, lr=1e-3, batch_size=2, weight_decay=0.0)
    with pytest.raises(DataError, match=r"^fine-tune r2: 0 training records") as info:
        finetune(backend, model, empty, none, None, opt, seed=0, desc="fine-tune r2")
    assert isinstance(info.value, OneLineError) and "\n" not in str(info.value)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(DataError, match=r"^non-private: 0 training records"):
        epoch(backend, model, empty, none, None, sgd, 2, torch.Generator().manual_seed(0), desc="non-private")
    with pytest.raises(DataError, match=r"^SWAG r1: 0 training records"):
        swag(
            backend,
            model,
            empty,
            none,
            None,
            SwagParams(epochs=2, lr=0.01, batch_size=2, rank=2),
            seed=0,
            desc="SWAG r1",
        )
    assert torch.equal(get_flat(model), before)  # nothing was fitted


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ghost", "hooks"])
def test_dpsgd_survives_empty_poisson_batches_on_the_full_backend(mode, monkeypatch):
    """The crash of issue 37 (a key whose Poisson sampling left a batch empty: the full backend's forward
    raised 'cannot reshape tensor of 0 elements'); q = 1/16 over 16 records leaves ~37 % of batches empty."""
    from dprelease.mechanisms.dpsgd.train import train_dpsgd

    backend = _backend("full")
    feats, y = _features(backend, 16)
    model = backend.new_model(feats)
    seen = []
    forward = FullBackend.forward

    def counting(m, batch):
        seen.append(int(next(iter(batch.values())).shape[0]))
        return forward(m, batch)

    monkeypatch.setattr(backend, "forward", counting)
    r = train_dpsgd(
        backend,
        model,
        feats,
        y,
        epochs=1,
        batch_size=1,
        lr=0.01,
        max_grad_norm=1.0,
        target_epsilon=5.0,
        delta=1e-3,
        grad_sample_mode=mode,
        seed=0,
        noise_seed=3,
    )
    assert r.steps == len(seen) == 16 and 0 in seen and max(seen) > 0  # empty batches ran, and full ones
    assert torch.isfinite(get_flat(model)).all()
