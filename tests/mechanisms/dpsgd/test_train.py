"""dpsgd.train: bad settings refused before training; a tiny DP-SGD run spends at most its target ε with the
step count and sampling rate of the accountant's recipe, and its noise comes from the noise seed alone."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import tiny_head_backend, tiny_problem

from dprelease.core.backends.base import get_flat
from dprelease.core.privacy.rdp import sampled_gaussian_epsilon
from dprelease.mechanisms.dpsgd.train import check_setting, train_dpsgd


@pytest.mark.parametrize(
    "args, needle",
    [
        ((100, 10, 0.0, 1e-3), "target ε"),
        ((100, 10, 1.0, 1.0), "δ must lie"),
        ((100, 200, 1.0, 1e-3), "batch size 200"),
    ],
)
def test_bad_settings_are_one_line_errors(args, needle):
    with pytest.raises(ValueError, match=needle) as err:
        check_setting(*args)
    assert "\n" not in str(err.value)


def _run(noise_seed: int):
    feats, y = tiny_problem(64, dim=16)
    backend = tiny_head_backend()
    model = backend.new_model(feats)
    res = train_dpsgd(
        backend,
        model,
        feats,
        y,
        epochs=2,
        batch_size=16,
        lr=0.05,
        max_grad_norm=1.0,
        target_epsilon=3.0,
        delta=1e-3,
        seed=0,
        noise_seed=noise_seed,
    )
    return res, get_flat(model).detach().clone()


def test_a_tiny_run_spends_at_most_its_target_and_its_noise_follows_the_noise_seed(one_torch_thread):
    res, theta = _run(noise_seed=11)
    assert res.sample_rate == pytest.approx(16 / 64)
    assert res.steps == math.ceil(2 / res.sample_rate)
    assert res.epsilon <= 3.0 + 1e-6 and res.epsilon > 2.5  # σ searched for the target
    assert sampled_gaussian_epsilon(res.noise_multiplier, res.sample_rate, res.steps, 1e-3) == pytest.approx(
        res.epsilon, rel=1e-3
    )
    again, theta_again = _run(noise_seed=11)
    other, theta_other = _run(noise_seed=12)
    assert torch.equal(theta, theta_again)  # same key, same model
    assert not torch.equal(theta, theta_other) and other.noise_multiplier == res.noise_multiplier
