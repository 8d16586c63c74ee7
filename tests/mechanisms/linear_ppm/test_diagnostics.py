"""Diagnostics: ArviZ's split R-hat and ESS; unmixed chains refused in one line; the public summary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.mechanisms.linear_ppm import diagnostics
from dprelease.mechanisms.linear_ppm.sampler import run_chains

LIMITS = {"rhat_max": 1.05, "ess_min": 100.0, "divergences_max": 0}


def _diag(stats, divergences=(0, 0, 0, 0)):
    return diagnostics.diagnose(stats, divergences=list(divergences), acceptance=[0.8] * len(divergences))


def test_well_mixed_chains_pass():
    rng = np.random.default_rng(0)
    d = _diag({"log_posterior": rng.standard_normal((4, 300)), "max_loss": rng.standard_normal((4, 300))})
    assert diagnostics.failures(d, **LIMITS) == []
    diagnostics.require(d, what="x", **LIMITS)
    s = diagnostics.summary(d)
    assert s["rhat_max"] < 1.02 and s["ess_bulk_min"] > 600 and s["divergences"] == 0


def test_chains_stuck_at_different_modes_are_refused_in_one_line():
    rng = np.random.default_rng(1)
    stuck = rng.standard_normal((4, 300)) + np.array([[0.0], [0.0], [5.0], [5.0]])
    d = _diag({"log_posterior": stuck, "max_loss": rng.standard_normal((4, 300))})
    with pytest.raises(diagnostics.DiagnosticsRefused) as e:
        diagnostics.require(d, what="linear PPM", **LIMITS)
    message = str(e.value)
    assert "\n" not in message and "refused" in message and "R-hat of log_posterior" in message


def test_a_deliberately_unmixed_run_is_refused(one_torch_thread):
    """Two separated modes, chains started in different ones, 2 warm-up steps: R-hat catches it."""

    def bimodal(z):  # [chains, 2] → [chains], or [2] → a scalar
        return -torch.logsumexp(torch.stack([-0.5 * ((z - 6) ** 2).sum(-1), -0.5 * ((z + 6) ** 2).sum(-1)]), 0)

    starts = torch.tensor([[6.0, 6.0], [6.0, 6.0], [-6.0, -6.0], [-6.0, -6.0]])
    ch = run_chains(bimodal, starts, [1, 2, 3, 4], warmup=2, draws=50)
    lp = np.stack([[-bimodal(z).item() for z in chain] for chain in ch.z])
    first = ch.z[:, :, 0].numpy()
    d = _diag({"log_posterior": lp, "max_loss": first}, ch.divergences)
    with pytest.raises(diagnostics.DiagnosticsRefused, match="R-hat of max_loss"):
        diagnostics.require(d, what="unmixed", **LIMITS)


def test_divergences_low_ess_and_temperature_are_failures():
    rng = np.random.default_rng(2)
    ok = {"log_posterior": rng.standard_normal((4, 300)), "max_loss": rng.standard_normal((4, 300))}
    assert "3 divergent transitions > 0" in diagnostics.failures(_diag(ok, (0, 1, 2, 0)), **LIMITS)
    sticky = np.cumsum(rng.standard_normal((4, 300)), axis=1)  # random walks: tiny ESS
    assert any("ESS" in f for f in diagnostics.failures(_diag({"log_posterior": sticky}), **LIMITS))
    assert diagnostics.failures(_diag(ok), **LIMITS, temperature=0.5, temperature_tolerance=0.1) == [
        "all-direction temperature 0.500 outside 1 ± 0.1"
    ]
    with pytest.raises(ValueError):
        diagnostics.statistic(np.zeros((1, 10)))
