"""gpp.model: the release is μ + σ ε from the caller's generator (μ for the deterministic baseline), the KL
term is that of N(μ, σ²) to N(0, I), and the encoder loss pulls towards utility and away from the adversary."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from dprelease.mechanisms.gpp.model import Encoder, encoder_loss, head, kl_term, mlp, reparameterise


def test_mlp_and_head_shapes():
    net = mlp(6, [5, 4], 3)
    assert [m.out_features for m in net if isinstance(m, torch.nn.Linear)] == [5, 4, 3]
    assert head(8, 2, ())(torch.zeros(7, 8)).shape == (7, 2)


def test_release_is_a_draw_from_the_generator_or_the_mean():
    torch.manual_seed(0)
    enc, x = Encoder(6, 4, (8,)), torch.randn(5, 6)
    a = enc.release(x, torch.Generator().manual_seed(3))
    b = enc.release(x, torch.Generator().manual_seed(3))
    c = enc.release(x, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    enc.deterministic = True
    mu, _ = enc(x)
    assert torch.equal(enc.release(x, torch.Generator().manual_seed(3)), mu)


def test_reparameterise_has_the_stated_moments():
    mu, logvar = torch.full((20_000, 1), 2.0), torch.full((20_000, 1), math.log(0.25))
    z = reparameterise(mu, logvar, torch.Generator().manual_seed(0))
    assert z.mean().item() == pytest.approx(2.0, abs=0.02) and z.std().item() == pytest.approx(0.5, abs=0.01)


def test_kl_is_zero_at_the_prior_and_matches_the_closed_form():
    assert kl_term(torch.zeros(3, 4), torch.zeros(3, 4)).item() == 0.0
    mu, logvar = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, math.log(4.0)]])
    expected = 0.5 * (1.0 + 0.0) + 0.5 * (4.0 - math.log(4.0) - 1.0)
    assert kl_term(mu, logvar).item() == pytest.approx(expected)


def test_encoder_loss_is_beta_utility_minus_adversary_plus_lambda_kl():
    torch.manual_seed(1)
    z, mu, logvar = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6, 3)
    u, s = torch.randint(0, 4, (6,)), torch.randint(0, 2, (6,))
    hu, hs = head(3, 4, ()), head(3, 2, ())
    got = encoder_loss(z, mu, logvar, u, s, hu, hs, beta=2.0, lam=0.1)
    want = 2.0 * F.cross_entropy(hu(z), u) - F.cross_entropy(hs(z), s) + 0.1 * kl_term(mu, logvar)
    assert got.item() == pytest.approx(want.item())
