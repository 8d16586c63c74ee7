"""The audit must convict planted bugs (issue 23), fast variant: a small head on synthetic embeddings with
input-space canaries, trained by the project's own fine-tune and DP-SGD code, audited by mia.onerun.

(a) a non-private model labelled "ε = 1" (δ = 0): the pure one-run bound must exceed 1 at 95 %;
(b) DP-SGD with its noise multiplier divided by 4, claiming the accountant's ε for the undivided one. At this
    small size (1,000 canaries, claim ε = 4) the audit SEES the bug — its bound is several times honest
    DP-SGD's on the same canaries — but does NOT convict it (measured: ε_LB 2.46 against the claim 4.0,
    280 of 300 guesses right); the test pins what holds, and the full-size canary run (4,000 input
    canaries) is where conviction is checked. Honest DP-SGD must never be convicted (the sanity rule)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.compare.mia import onerun
from dprelease.compare.mia.scores import loss_scores
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams, OptimParams
from dprelease.core.training import finetune
from dprelease.mechanisms.dpsgd.train import train_dpsgd

DIM, C, N_REAL, M = 384, 5, 400, 1000
GRID = [100, 300, 1000]


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(C, DIM, generator=g)
    y = torch.randint(0, C, (N_REAL,), generator=g)
    x = centres[y] + 0.8 * torch.randn(N_REAL, DIM, generator=g)
    x /= x.norm(dim=1, keepdim=True)
    cx = torch.randn(M, DIM, generator=g)
    cx /= cx.norm(dim=1, keepdim=True)
    cy = torch.randint(0, C, (M,), generator=g)
    member = np.random.default_rng(seed).random(M) < 0.5
    inc = torch.from_numpy(np.flatnonzero(member))
    train = {"x": torch.cat([x, cx[inc]])}
    return train, torch.cat([y, cy[inc]]), {"x": cx}, cy, member


@pytest.fixture(scope="module")
def data():
    return _data()


def _backend() -> HeadBackend:
    return HeadBackend(n_classes=C, device=torch.device("cpu"), seed=1, params=HeadParams(hidden=64, dropout=0.0))


def _audit(backend, model, canaries, cy, member, delta):
    s = loss_scores(backend.predict_proba(model, canaries).numpy(), cy.numpy())
    return onerun.canary_audit(s, member, guess_grid=GRID, delta=delta)


def test_nonprivate_labelled_eps1_is_convicted(data):
    train, y, canaries, cy, member = data
    backend = _backend()
    model = backend.new_model(train)
    finetune(backend, model, train, y, None, OptimParams(epochs=30, lr=3e-3, batch_size=64, weight_decay=0.0), seed=0)
    audit = _audit(backend, model, canaries, cy, member, 0.0)
    assert audit["steinke"]["epsilon_lower_bound"] > 1.0  # convicted: the claim "ε = 1" is false
    assert audit["fdp"]["epsilon_lower_bound"] > 1.0  # the pure f-DP bound convicts it too


def _dpsgd(data, divisor: float, noise_seed: int):
    train, y, canaries, cy, member = data
    backend = _backend()
    model = backend.new_model(train)
    delta = 1 / (2 * len(y))
    res = train_dpsgd(
        backend,
        model,
        train,
        y,
        epochs=40,
        batch_size=128,
        lr=0.01,
        max_grad_norm=1.0,
        target_epsilon=4.0,
        delta=delta,
        grad_sample_mode="hooks",
        seed=0,
        noise_seed=noise_seed,
        planted_noise_divisor=divisor,
    )
    return res, _audit(backend, model, canaries, cy, member, delta)


@pytest.mark.slow  # two DP-SGD trainings with per-sample gradients (about a minute on an idle 2-core machine)
def test_dpsgd_with_a_quarter_of_its_noise_stands_out_and_honest_dpsgd_is_not_convicted(data):
    bug, audit_bug = _dpsgd(data, 4.0, noise_seed=12345)
    assert bug.epsilon == pytest.approx(4.0, rel=0.02)  # the bug still claims the target ε
    honest, audit_ok = _dpsgd(data, 1.0, noise_seed=54321)
    assert audit_ok["fdp"]["epsilon_lower_bound"] <= honest.epsilon  # sanity rule
    assert audit_ok["steinke"]["epsilon_lower_bound"] <= honest.epsilon
    assert audit_bug["fdp"]["epsilon_lower_bound"] > 2 * audit_ok["fdp"]["epsilon_lower_bound"]
