import torch

from dprelease.mechanisms.nvdp.clipstats import ClipStats
from dprelease.mechanisms.nvdp.nvib import NO_CLIP, Clip, NVIBLayer


def _post(clip):
    torch.manual_seed(0)
    layer = NVIBLayer(8, 4, clip=clip)
    with torch.no_grad():
        layer.mu.weight.mul_(20.0)
        layer.alpha.bias.fill_(1.0)  # α ≈ e > 1
        layer.logvar.bias.fill_(2 * torch.log(torch.tensor(0.1)).item())  # σ = 0.1 < floor 0.302
    x, mask = torch.randn(3, 5, 8), torch.ones(3, 5)
    mask[0, 3:] = 0
    return layer.posterior(x, mask)


def test_rates_are_measured_before_clipping():
    clip = Clip(mu=1.0, sigma_order=1.1, alpha_min=0.0, alpha_max=1.0)
    post = _post(clip)
    assert float(post.mu.norm(dim=-1).max()) <= 1.0 + 1e-5  # clipped values are bounded ...
    stats = ClipStats(clip)
    stats.add(post)
    s = stats.summary()
    assert stats.vectors == 13  # 15 token vectors less 2 padded, prior rows excluded
    assert s["clip_alpha_max_binds"] == 1.0 and s["clip_sigma_binds"] == 1.0  # ... the raw ones all exceed
    assert s["clip_alpha_min_binds"] == 0.0
    raw_norm = post.raw[0][:, 1:].norm(dim=-1)[post.mask[:, 1:].bool()]
    assert abs(s["clip_mu_binds"] - float((raw_norm > 1.0).float().mean())) < 1e-9
    assert s["pre_clip_alpha_max"] > 1.0


def test_rule_off_reports_none_and_nothing_binds_under_loose_thresholds():
    post = _post(NO_CLIP)
    assert ClipStats(NO_CLIP).summary()["clip_mu_binds"] is None
    stats = ClipStats(Clip(mu=1e6, sigma_order=1.0001, alpha_min=0.0, alpha_max=1e6))
    stats.add(post)
    s = stats.summary()
    assert s["clip_mu_binds"] == 0.0 and s["clip_alpha_max_binds"] == 0.0 and s["clip_sigma_binds"] == 0.0
