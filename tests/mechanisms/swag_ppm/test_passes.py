"""swag_ppm.passes: the posterior pass (per-record max CE L_i and per-draw max weighted loss M_s) on a tiny
hand-made project (3 classes, a head with hidden=4 on 6-dimensional features, SWAG moments of round 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import install_test_key

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import get_flat, save_features, set_flat
from dprelease.core.config import parse_params
from dprelease.core.data.splits import backend_for
from dprelease.core.io import write_json
from dprelease.core.privacy import secret
from dprelease.mechanisms.swag_ppm import ppm
from dprelease.mechanisms.swag_ppm.passes import posterior_pass
from dprelease.mechanisms.swag_ppm.swag import SwagCollector, SwagMoments, iter_samples

N, DIM, CLASSES, DRAWS = 12, 6, 3, 8


def _params(draw_batch: int = 3, seed: int = 2025):
    return parse_params(
        {
            "seed": seed,
            "ppm": {"draws": DRAWS, "draw_batch": draw_batch, "smoke_test": True},
            "model": {"device": "cpu", "head": {"hidden": 4}},
        }
    )


def _project(root, rank: int = 3):
    """labels.json, train features and round-1 SWAG moments (rank ``rank``) under ``root``."""
    params = _params()
    lay = Layout.from_params(params, install_test_key(root))  # the passes draw from the key
    write_json(
        lay.data / "labels.json",
        {"codes": ["10", "11", "12"], "titles": ["a", "b", "c"], "train_sizes": [5, 4, 3], "test_sizes": [5, 4, 3]},
    )
    gen = torch.Generator().manual_seed(3)
    x = F.normalize(torch.randn(N, DIM, generator=gen), dim=1)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 1])
    save_features(lay.features / "train.safetensors", {"x": x}, y)
    theta0 = get_flat(backend_for(params, lay).new_model({"x": x}))
    swag = SwagCollector(theta0.numel(), rank=rank)
    for _ in range(5):
        swag.collect(theta0 + 0.5 * torch.randn(theta0.numel(), generator=gen))
    swag.moments().save(lay.swag(1) / "moments.safetensors")
    return lay, x, y


@pytest.fixture
def project(tmp_path):
    return _project(tmp_path)


def _naive_ce(params, lay, x, y, what: str = "sensitivity", r: int = 1) -> np.ndarray:
    """[S, n] CE of every record under each draw, one draw at a time through the ordinary forward pass."""
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors")
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, f"{what}/round{r}"))
    thetas = torch.cat(list(iter_samples(moments, params.ppm.draws, params.ppm.draw_batch, gen)))
    assert thetas.shape[0] == params.ppm.draws
    model = backend_for(params, lay).new_model({"x": x}).eval()
    rows = []
    with torch.no_grad():
        for theta in thetas:
            set_flat(model, theta)
            rows.append(F.cross_entropy(model(x), y, reduction="none").double().numpy())
    return np.stack(rows)


def _weights(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.1, 1.0, N)


def test_record_max_matches_a_naive_loop(project):
    lay, x, y = project
    params = _params()
    weights = _weights()
    record_max, max_deltas = posterior_pass(params, lay, 1, weights, "sensitivity")
    ce = _naive_ce(params, lay, x, y)
    assert record_max.shape == (N,) and record_max.dtype == np.float64
    np.testing.assert_allclose(record_max, ce.max(axis=0), rtol=1e-5, atol=1e-6)
    assert max_deltas.shape == (DRAWS,)
    np.testing.assert_allclose(max_deltas, ppm.max_weighted_loss(ce, weights), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(max_deltas, (ce * weights).max(axis=1), rtol=1e-5, atol=1e-6)
    # the sensitivity Δ̂ and ε these give
    delta_hat, eps = ppm.epsilon(max_deltas)
    assert delta_hat == pytest.approx(float((ce * weights).max()), rel=1e-5) and eps == 2 * delta_hat


def test_max_weighted_loss_is_exactly_that_of_the_backends_ce(project):
    """Same draws, same batched CE: M_s is bit-for-bit ppm.max_weighted_loss of the stacked CE."""
    lay, x, y = project
    params = _params()
    weights = _weights(1)
    _, max_deltas = posterior_pass(params, lay, 1, weights, "sensitivity")
    backend = backend_for(params, lay)
    model = backend.new_model({"x": x})
    moments = SwagMoments.load(lay.swag(1) / "moments.safetensors")
    gen = torch.Generator().manual_seed(secret.seed(lay.artifacts, "sensitivity/round1"))
    ce = np.concatenate(
        [
            backend.per_record_ce(model, t, {"x": x}, y).double().numpy()
            for t in iter_samples(moments, DRAWS, params.ppm.draw_batch, gen)
        ]
    )
    np.testing.assert_array_equal(max_deltas, ppm.max_weighted_loss(ce, weights))


def test_without_weights_no_max_deltas(project):
    lay, x, y = project
    params = _params()
    record_max, max_deltas = posterior_pass(params, lay, 1, None, "risk")
    assert max_deltas is None
    np.testing.assert_allclose(record_max, _naive_ce(params, lay, x, y, what="risk").max(axis=0), rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(record_max)) and np.all(record_max > 0)


def test_the_stage_name_and_the_key_pick_the_draws_never_the_public_seed(project):
    lay, _, _ = project
    a, _ = posterior_pass(_params(), lay, 1, None, "sensitivity")
    again, _ = posterior_pass(_params(), lay, 1, None, "sensitivity")
    np.testing.assert_array_equal(a, again)  # reproducible
    other_stage, _ = posterior_pass(_params(), lay, 1, None, "risk")
    assert not np.allclose(a, other_stage)
    public_seed, _ = posterior_pass(_params(seed=2026), lay, 1, None, "sensitivity")
    np.testing.assert_array_equal(a, public_seed)  # Δ̂'s draws (so ε) are not the public seed's
    secret.rotate(lay.artifacts)
    other_key, _ = posterior_pass(_params(), lay, 1, None, "sensitivity")
    assert not np.allclose(a, other_key)


def test_weights_must_match_the_records(project):
    lay, _, _ = project
    with pytest.raises(ValueError):
        posterior_pass(_params(), lay, 1, np.ones(N + 1), "sensitivity")


def test_draw_batch_only_chunks_the_evaluation(project):
    """For every draw_batch, the result is the naive loop over the draws that draw_batch's sampling stream
    gives (draws are sampled per chunk: with a low-rank SWAG part the stream depends on the chunking, which
    is why ppm.draw_batch is a declared dependency of the sampling stages)."""
    lay, x, y = project
    weights = _weights(2)
    for batch in (1, 3, 8):
        params = _params(draw_batch=batch)
        record_max, max_deltas = posterior_pass(params, lay, 1, weights, "sensitivity")
        ce = _naive_ce(params, lay, x, y)
        np.testing.assert_allclose(record_max, ce.max(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(max_deltas, ppm.max_weighted_loss(ce, weights), rtol=1e-5, atol=1e-6)


def test_the_pass_stages_depend_on_draw_batch():
    """Draws are sampled chunk by chunk (torch.randn per chunk), so the draw set — hence L_i, M_s and ε — is a
    function of ppm.draw_batch as well as ppm.draws and the seed: every stage that runs the pass must list it
    among its parameters so DVC re-runs it when it changes."""
    from dprelease.mechanisms.swag_ppm.stages import declare

    stages = {s.name: s for s in declare(_params())}
    for name in ("risk", "sensitivity_r2", "reweight"):
        assert {"ppm.draws", "ppm.draw_batch", "seed"} <= set(stages[name].params), name
