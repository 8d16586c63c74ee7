"""One configuration sampled end to end on a small softmax head: the all-parameter temperature reads ≈ 1 and the
draws' variance in every Hessian eigen-direction matches the Laplace inverse at the MAP; Δ̂, ε and the draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.mechanisms.linear_ppm import maths, posterior


def _target(**kw) -> maths.Target:
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(400, 3, generator=g), dim=1)
    y = (x @ torch.randn(3, 3, generator=g) * 2 + 0.5 * torch.randn(400, 3, generator=g)).argmax(1)
    return maths.Target(xa=maths.augment(x), y=y, n_classes=3, **({"prior_precision": 1.0} | kw))


@pytest.fixture(scope="module")
def run(one_torch_thread):
    return posterior.sample(
        _target(),
        seeds=lambda what: 1000 + int(what[-1]),
        starts_rng=np.random.default_rng(0),
        chains=4,
        warmup=150,
        draws=250,
    )


def test_all_parameter_temperature_reads_one(run):
    """Equipartition over ALL 12 directions: exact sampling reads 1 (tolerance: a few Monte Carlo errors)."""
    s = run.summary
    assert s["parameters"] == 12
    assert abs(s["temperature_all"] - 1) < 0.1
    assert np.all(np.abs(run.temperature - 1) < 0.35)
    assert s["divergences"] == 0 and s["rhat_max"] < 1.05 and s["ess_bulk_min"] > 100


def test_variance_in_every_hessian_direction_matches_the_laplace_inverse(run):
    """In the spirit of swag_ppm/temperature.py: per-direction temperatures Var(vⱼᵀθ)·hⱼ over the eigenbasis of
    the exact Hessian at the MAP (all 12 directions) read ≈ 1 for a near-Gaussian posterior (n = 400)."""
    t = run.target
    theta_map = run.theta_map.double().reshape(-1)
    hess = torch.autograd.functional.hessian(lambda v: t.potential(v.reshape(t.shape).float()).double(), theta_map)
    h, v = torch.linalg.eigh(hess)
    proj = run.thetas.double().reshape(len(run.thetas), -1) @ v
    temps = proj.var(0) * h
    assert abs(temps.mean().item() - 1) < 0.15
    assert temps.min().item() > 0.6 and temps.max().item() < 1.5
    assert (run.thetas.double().reshape(len(run.thetas), -1).mean(0) - theta_map).abs().max() < 0.1


def test_delta_hat_epsilon_and_the_released_draw(run):
    assert run.delta_hat == pytest.approx(float(run.max_loss.max()))
    assert posterior.epsilon(run) == pytest.approx(2 * run.delta_hat)
    i, theta = run.draw(np.random.default_rng(5))
    j, same = run.draw(np.random.default_rng(5))
    assert i == j and torch.equal(theta, same) and torch.equal(theta, run.thetas[i])
    assert len({run.draw(np.random.default_rng(s))[0] for s in range(10)}) > 5
    assert run.record_risk.shape == (400,) and np.all(run.record_risk >= 0)


def test_censored_epsilon_is_the_declared_one_and_temperature_divides(one_torch_thread):
    cens = posterior.sample(
        _target(kappa=maths.kappa_for(4.0, 0.5), temperature=0.5),
        seeds=lambda what: 7,
        starts_rng=np.random.default_rng(1),
        chains=2,
        warmup=30,
        draws=30,
    )
    assert posterior.epsilon(cens, epsilon_declared=4.0) == 4.0
    assert cens.delta_hat <= 1.0  # κ = 4·0.5/2
    with pytest.raises(ValueError):
        posterior.epsilon(cens, epsilon_declared=8.0)
    tempered = posterior.sample(
        _target(temperature=0.5),
        seeds=lambda what: 7,
        starts_rng=np.random.default_rng(1),
        chains=2,
        warmup=20,
        draws=20,
    )
    assert posterior.epsilon(tempered) == pytest.approx(2 * tempered.delta_hat / 0.5)
