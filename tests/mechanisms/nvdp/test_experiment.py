"""The experiment grid and the variants' clipping."""

from dprelease.mechanisms.nvdp.experiment import architecture, clip_for, grid, module_from
from dprelease.mechanisms.nvdp.nvib import NO_CLIP
from tests.mechanisms.nvdp.conftest import nvdp_params


def test_grid_and_clips():
    params = nvdp_params(lambdas=[0.001, 0.1], release_lambda=0.1)
    assert grid(params) == [
        ("nonprivate", None),
        ("unconstrained", 0.001),
        ("unconstrained", 0.1),
        ("clipped", 0.001),
        ("clipped", 0.1),
    ]
    c = clip_for(params, "mrpc", "clipped")
    assert (c.mu, c.alpha_min, c.alpha_max, c.sigma_order) == (2.0, 0.0, 0.5, 1.1)
    assert clip_for(params, "mrpc", "unconstrained") == NO_CLIP


def test_architecture_round_trip():
    params = nvdp_params()
    arch = architecture(params, "osha", "clipped", 0.01, 5)
    m = module_from(arch)
    assert m.nvib.clip == clip_for(params, "osha", "clipped") and m.head.out_features == 5 and m.nvib.stochastic
    assert not module_from(architecture(params, "osha", "nonprivate", None, 5)).nvib.stochastic


def test_init_is_a_function_of_the_seed_only():
    import torch

    from dprelease.mechanisms.nvdp.experiment import new_model

    params = nvdp_params()
    torch.manual_seed(1)
    a = new_model(params, "mrpc", "clipped", 2, torch.device("cpu"), 5)
    torch.manual_seed(2)  # the global RNG state does not matter
    b = new_model(params, "mrpc", "clipped", 2, torch.device("cpu"), 5)
    c = new_model(params, "mrpc", "clipped", 2, torch.device("cpu"), 6)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.block.q.weight, c.block.q.weight)
