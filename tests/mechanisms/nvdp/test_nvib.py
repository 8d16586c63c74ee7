"""NVIB layer: prior row, clipping bounds after the forward pass, sampling, KL terms."""

import math

import torch
from torch.distributions import Dirichlet, kl_divergence

from dprelease.mechanisms.nvdp.nvib import (
    Clip,
    NVDPModule,
    NVIBLayer,
    Posterior,
    kl_dirichlet,
    kl_gaussian,
    pool_pair,
    segments,
)


def _inputs(b=3, n=5, p=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 5 * torch.randn(b, n, p, generator=g)
    mask = torch.ones(b, n)
    mask[0, 3:] = 0
    return x, mask


def test_prior_row_and_clipping_bounds_hold_after_forward():
    torch.manual_seed(0)
    x, mask = _inputs()
    clip = Clip(mu=2.0, sigma_order=1.1, alpha_min=0.0, alpha_max=0.5)
    layer = NVIBLayer(8, 6, clip=clip, logvar_init=2 * math.log(0.05))
    with torch.no_grad():
        layer.mu.weight.mul_(10)
        layer.alpha.bias.fill_(3.0)
    post, z, pi = layer(x, mask, torch.Generator().manual_seed(1))
    assert post.mu.norm(dim=-1).max() <= 2.0 + 1e-5
    assert post.sigma.min() >= math.sqrt(0.1 / 1.1) - 1e-6
    assert post.alpha.max() <= 0.5 + 1e-7 and post.alpha.min() >= 0.0
    assert float(post.alpha[0, 0].detach()) == 0.5  # the prior's α = 1 is clamped too (code behaviour)
    assert post.mask[:, 0].all() and post.mask[0, 4:].sum() == 0
    assert torch.allclose(pi.sum(-1), torch.ones(3)) and float(pi[0, 4:].sum().detach()) == 0.0
    free = NVIBLayer(8, 6)
    with torch.no_grad():
        free.mu.weight.copy_(layer.mu.weight)
        free.mu.bias.copy_(layer.mu.bias)
    assert free.posterior(x, mask).mu.norm(dim=-1).max() > 2.0  # the bound is the clip's doing


def test_sampling_is_reproducible_from_the_generator():
    x, mask = _inputs()
    layer = NVIBLayer(8, 6)
    a = layer(x, mask, torch.Generator().manual_seed(3))
    b = layer(x, mask, torch.Generator().manual_seed(3))
    c = layer(x, mask, torch.Generator().manual_seed(4))
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2]) and not torch.equal(a[1], c[1])


def test_kl_terms():
    mu = torch.zeros(1, 3, 2)
    logvar = torch.zeros(1, 3, 2)
    alpha = torch.tensor([[1.0, 2.0, 0.5]])
    post = Posterior(mu, logvar, alpha, torch.ones(1, 3))
    assert torch.allclose(kl_gaussian(post), torch.zeros(1))
    want = kl_divergence(Dirichlet(alpha[0]), Dirichlet(torch.ones(3)))
    assert torch.allclose(kl_dirichlet(post), want.unsqueeze(0), atol=1e-5)
    post.mu = torch.ones(1, 3, 2)
    # only the input's components (rows 1, 2) count, weighted by α_i/α_0 = 2/3.5, 0.5/3.5; KL = 0.5·2 each
    assert math.isclose(float(kl_gaussian(post)), 2.5 / 3.5, rel_tol=1e-6)


def test_module_trains_and_deterministic_variant():
    x, mask = _inputs()
    model = NVDPModule(8, 8, 2, heads=2)
    logits, post = model(x, mask, torch.Generator().manual_seed(0))
    loss = logits.logsumexp(-1).mean() + kl_gaussian(post).mean() + kl_dirichlet(post).mean()
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    det = NVDPModule(8, 8, 2, heads=2, stochastic=False)
    g = torch.Generator().manual_seed(0)
    assert torch.equal(det(x, mask, g)[0], det(x, mask, g)[0])


def test_pair_pooling_pools_each_segment_on_its_own():
    hidden = torch.arange(2 * 5 * 2, dtype=torch.float32).view(2, 5, 2)  # row 0 is the prior component
    mask = torch.tensor([[1.0, 1.0, 2.0, 2.0], [1.0, 2.0, 2.0, 0.0]])  # segment mask without the prior row
    valid, second = segments(mask)
    assert valid.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]] and second.tolist() == [[0, 0, 1, 1], [0, 1, 1, 0]]
    out = pool_pair(hidden, valid, second)
    u0, v0 = hidden[0, 1:3].mean(0), hidden[0, 3:5].mean(0)
    u1, v1 = hidden[1, 1], hidden[1, 2:4].mean(0)
    assert torch.allclose(out[0], torch.cat([u0, v0, (u0 - v0).abs(), u0 * v0]))
    assert torch.allclose(out[1], torch.cat([u1, v1, (u1 - v1).abs(), u1 * v1]))


def test_pair_module_reads_the_segments_and_its_posterior_ignores_them():
    x, mask = _inputs()
    seg = mask.clone()
    seg[1:, 3:] = 2.0  # inputs 1 and 2: tokens 3, 4 are the second text
    pair = NVDPModule(8, 8, 2, heads=2, pair=True, stochastic=False)
    assert pair.head.in_features == 32
    g = torch.Generator().manual_seed(0)
    post_seg, rep_seg = pair.represent(x, seg, g)
    post_one, rep_one = pair.represent(x, mask, g)
    assert torch.equal(post_seg.mu, post_one.mu) and torch.equal(post_seg.mask, post_one.mask)  # same posterior
    assert torch.equal(rep_seg[0], rep_one[0]) and not torch.allclose(rep_seg[1], rep_one[1])  # pooling differs
