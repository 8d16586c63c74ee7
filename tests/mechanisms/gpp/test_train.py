"""Algorithm 1 and the baselines: shapes, seeding, the alternating updates, bad input."""

import dataclasses

import numpy as np
import pytest
import torch

from dprelease.mechanisms.gpp.params import GPPParams
from dprelease.mechanisms.gpp.train import METHODS, GPPInputError, TrainConfig, release, train_gpp, train_method

TINY = TrainConfig.from_params(
    GPPParams(), d_z=4, epochs=2, batch_size=16, lr=1e-3, encoder_hidden=(16, 8), head_hidden=(8,)
)


def _data(n=64, d=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    u = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)
    s = (x[:, 2] > 0).astype(np.int64)
    return x, u, s


@pytest.mark.parametrize("method", METHODS)
def test_every_method_releases_one_row_per_record(method):
    x, u, s = _data()
    model, _ = train_method(method, x, u, s, n_u=4, n_s=2, config=TINY, seed=1, noise=0.5)
    z = release(model, x, seed=2)
    assert z.shape == (64, 6 if method == "raw" else 4) and z.dtype == np.float32 and np.isfinite(z).all()


def test_gpp_is_seeded_and_stochastic_per_draw():
    x, u, s = _data()
    a, hist = train_gpp(x, u, s, n_u=4, n_s=2, config=TINY, seed=3)
    b, _ = train_gpp(x, u, s, n_u=4, n_s=2, config=TINY, seed=3)
    assert np.array_equal(release(a, x, seed=5), release(b, x, seed=5))  # same seeds, same draw
    assert not np.array_equal(release(a, x, seed=5), release(a, x, seed=6))  # a fresh draw differs
    assert len(hist.encoder) == TINY.epochs and len(hist.adversary) == TINY.epochs and len(hist.kl) == TINY.epochs


def test_noprivacy_releases_mu_deterministically():
    x, u, s = _data()
    model, _ = train_method("noprivacy", x, u, s, n_u=4, n_s=2, config=TINY, seed=1)
    assert np.array_equal(release(model, x, seed=1), release(model, x, seed=2))


def test_k_zero_never_trains_the_adversary_and_k_steps_do():
    """k = 0 leaves the heads at their initial weights (the encoder fights a random adversary)."""
    x, u, s = _data()
    torch.manual_seed(0)
    _, hist0 = train_gpp(x, u, s, n_u=4, n_s=2, config=dataclasses.replace(TINY, k=0), seed=1)
    _, hist2 = train_gpp(x, u, s, n_u=4, n_s=2, config=TINY, seed=1)
    assert hist0.adversary == [0.0, 0.0] and all(v > 0 for v in hist2.adversary)


def test_gpp_hides_an_independent_sensitive_bit_a_plain_encoder_keeps():
    """On data where S is a separate coordinate, GPP's adversary loss stays near log 2 (chance)."""
    x, u, s = _data(n=256)
    cfg = TrainConfig.from_params(
        GPPParams(), d_z=4, epochs=8, batch_size=32, lr=3e-3, encoder_hidden=(32, 16), head_hidden=(16,)
    )
    _, hist = train_gpp(x, u, s, n_u=4, n_s=2, config=cfg, seed=0)
    assert hist.adversary[-1] > 0.6  # log 2 ≈ 0.693: the adversary cannot beat chance by much


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(x=np.zeros((0, 3), np.float32)), "non-empty"),
        (dict(x=np.full((4, 3), np.nan, np.float32)), "NaN"),
        (dict(u=np.zeros(3, np.int64)), "does not match"),
        (dict(s=-np.ones(4, np.int64)), "≥ 0"),
    ],
)
def test_bad_input_is_one_line_error(bad, message):
    args = dict(x=np.zeros((4, 3), np.float32), u=np.zeros(4, np.int64), s=np.zeros(4, np.int64)) | bad
    with pytest.raises(GPPInputError, match=message):
        train_gpp(args["x"], args["u"], args["s"], n_u=2, n_s=2, config=TINY, seed=0)


def test_unknown_method_and_bad_noise():
    x, u, s = _data()
    with pytest.raises(GPPInputError, match="unknown GPP method"):
        train_method("nvdp", x, u, s, n_u=4, n_s=2, config=TINY, seed=0)
    with pytest.raises(GPPInputError, match="noise"):
        train_method("noisy", x, u, s, n_u=4, n_s=2, config=TINY, seed=0, noise=0.0)


def test_settings_come_from_params_yaml_alone():
    """TrainConfig and ProbeConfig hold no defaults of their own: the gpp: section of params.yaml is the one
    source, and a value set there is the value a fit uses."""
    from dprelease.core.config import parse_params
    from dprelease.mechanisms.gpp.audit import ProbeConfig
    from dprelease.mechanisms.gpp.stages import probe_config, train_config

    with pytest.raises(TypeError):
        TrainConfig()  # no second set of defaults to drift from params.yaml
    with pytest.raises(TypeError):
        ProbeConfig()
    default = train_config(parse_params({}), 8)
    g = GPPParams()
    assert (default.epochs, default.lr, default.beta, default.k) == (g.epochs, g.lr, g.beta, g.k)
    params = parse_params({"gpp": {"epochs": 7, "lr": 0.02, "head_hidden": [5], "probe": {"lr": 0.3}}})
    cfg, probe = train_config(params, 8), probe_config(params)
    assert (cfg.d_z, cfg.epochs, cfg.lr, cfg.head_hidden) == (8, 7, 0.02, (5,))
    assert (probe.lr, probe.hidden, probe.epochs) == (0.3, (5,), g.probe.epochs)
    assert train_config(params, 8, epochs=3).epochs == 3  # a sweep's reduced epochs
    with pytest.raises(TypeError, match="no field"):
        TrainConfig.from_params(g, d_z=4, epoch=3)
