"""The strict (censored) variant, docs/guarantees.md, P: each record's weighted loss is censored at κ = ε/2 in
training, SWAG and the sensitivity pass, so Δ̂ ≤ ε/2 and the stated ε is fixed in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import make_root, run_stages, slice_raw

from dprelease.core.backends.base import get_flat
from dprelease.core.backends.head import HeadBackend
from dprelease.core.config import HeadParams, parse_params
from dprelease.core.io import read_json
from dprelease.core.privacy.censor import Censor
from dprelease.core.training import epoch
from dprelease.mechanisms.swag_ppm import ppm
from dprelease.mechanisms.swag_ppm.fit import release_censor
from dprelease.pipeline import registry


def test_max_weighted_loss_is_censored():
    ce = np.array([[0.5, 4.0, 9.0], [0.1, 0.2, 0.3]])
    w = np.array([1.0, 0.5, 1.0])
    np.testing.assert_allclose(ppm.max_weighted_loss(ce, w), [9.0, 0.3])
    np.testing.assert_allclose(ppm.max_weighted_loss(ce, w, censor=Censor(2.5, "hard")), [2.5, 0.3])
    soft = ppm.max_weighted_loss(ce, w, censor=Censor(2.5, "soft"))
    np.testing.assert_allclose(soft, [2.5 * np.tanh(9.0 / 2.5), 2.5 * np.tanh(0.3 / 2.5)])
    assert (soft < 2.5).all()


@pytest.mark.parametrize("form", ["hard", "soft"])
def test_every_censored_contribution_lies_in_0_kappa(form):
    """The bound behind the strict guarantee: 0 ≤ censored loss ≤ κ for any loss ≥ 0 (both forms,
    torch and numpy agree), so adding or removing a record moves the log-likelihood by at most κ."""
    c = Censor(1.5, form)
    x = np.concatenate([np.linspace(0, 50, 1001), [1e6]])
    out = c.numpy(x)
    assert (out >= 0).all() and (out <= 1.5).all() and (np.diff(out) >= 0).all()
    np.testing.assert_allclose(c.torch(torch.from_numpy(x)).numpy(), out, rtol=1e-12)
    with pytest.raises(ValueError):
        Censor(0.0)
    with pytest.raises(ValueError):
        Censor(1.0, "clip")


def test_soft_censoring_keeps_a_gradient_above_the_level():
    x = torch.tensor([4.7], requires_grad=True)  # log(108) above κ = 2.75
    Censor(2.75, "soft").torch(x).sum().backward()
    assert 0 < float(x.grad) < 1
    y = torch.tensor([4.7], requires_grad=True)
    Censor(2.75, "hard").torch(y).sum().backward()
    assert float(y.grad) == 0.0


def test_censored_records_contribute_no_gradient():
    """One full-batch SGD step (lr 1) on min(w·CE, κ) equals the step on the uncensored records alone
    (the loss is still averaged over the whole batch)."""
    gen = torch.Generator().manual_seed(0)
    backend = HeadBackend(3, torch.device("cpu"), 0, HeadParams(hidden=4, dropout=0.0))
    feats = {"x": F.normalize(torch.randn(10, 5, generator=gen), dim=-1)}
    y = torch.randint(0, 3, (10,), generator=gen)
    w = torch.rand(10, generator=gen)
    model = backend.new_model(feats)
    start = get_flat(model).clone()
    with torch.no_grad():
        ce = F.cross_entropy(model(feats["x"]), y, reduction="none") * w
    kappa = float(ce.median())
    keep = ce <= kappa
    assert 0 < keep.sum() < 10
    ref = backend.new_model(feats)
    loss = (F.cross_entropy(ref(feats["x"]), y, reduction="none") * w * keep).sum() / 10
    expected = start - torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(ref.parameters()))])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    epoch(
        backend,
        model,
        feats,
        y,
        w,
        opt,
        batch_size=10,
        generator=torch.Generator().manual_seed(1),
        censor=Censor(kappa, "hard"),
    )
    torch.testing.assert_close(get_flat(model), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_censored_release_reports_the_fixed_epsilon(tmp_path):
    params = parse_params(slice_raw(ppm__mechanism="censored", ppm__censor_epsilon=1.0))
    assert not params.ppm.reweighting and release_censor(params) == Censor(0.5, "soft")
    names = [s.name for s in registry.group(params, "release")]
    assert "reweight" not in names
    root = make_root(tmp_path)
    run_stages(params, root, names)
    g = read_json(root / "metrics/swag_ppm_draw.json")["guarantee"]
    # the release path's weights come from round 1's risks (fitted on the same data): a local claim, never strict
    assert g["kind"] == "ppm_censored_local" and g["epsilon"] == 1.0 and g["delta"] is None
    assert "fitted on the same data" in g["quantities"]["weights"]
    assert 0 < g["quantities"]["local_sensitivity"] <= 0.5  # Δ̂ ≤ ε/2 by construction
    m = np.load(root / params.artifacts / "round2/sensitivity/max_deltas.npy")
    assert m.max() <= 0.5  # soft censoring saturates at κ in floating point
    manifest = read_json(root / params.release / "release.json")
    assert manifest["variant"] == "censored" and manifest["censor_epsilon"] == 1.0
    assert manifest["mechanism"] == "swag_ppm"  # the name released.mechanism gives it (the common field)


def test_censored_mechanism_needs_its_epsilon():
    """The level is declared (default 8.0, fixed before any run); null is a one-line error, not ε(D)."""
    from dprelease.core.errors import ConfigError

    assert release_censor(parse_params(slice_raw(ppm__mechanism="censored"))).level == 4.0  # κ = 8.0 / 2
    assert release_censor(parse_params(slice_raw())) is None  # the asymptotic PPM censors nothing
    with pytest.raises(ConfigError, match="censor_epsilon") as info:
        parse_params(slice_raw(ppm__mechanism="censored", ppm__censor_epsilon=None))
    assert "\n" not in str(info.value)
