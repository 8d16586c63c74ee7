"""One linear PPM configuration, sampled and measured: the MAP, the K-FAC whitening, Markov chains from over-dispersed
secret starts, the per-draw statistics (log ξ, max-loss M_s), Δ̂, the all-parameter temperature, the diagnostics,
and the released draw chosen with the secret key. Tensors and a ``seeds`` function in, a :class:`Run` out; the
callers (:mod:`.released`, :mod:`.frontier`) bring the data and the key and decide what is written where.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from dprelease.mechanisms.linear_ppm import diagnostics, maths
from dprelease.mechanisms.linear_ppm.sampler import overdispersed_starts, run_chains

CHUNK = 20  # draws evaluated at once (memory: CHUNK × n × K floats)


@dataclass(frozen=True)
class Run:
    target: maths.Target
    theta_map: torch.Tensor  # [K, D]
    thetas: torch.Tensor  # [chains·draws, K, D] kept draws, chain-major (private)
    max_loss: np.ndarray  # [chains, draws] M_s = max_i w_i·c(CE_i(θ_s)) (private)
    log_posterior: np.ndarray  # [chains, draws] −U(θ_s) (private)
    record_risk: np.ndarray  # [n] max_s CE_i(θ_s), uncensored, unweighted (private: the risk of each record)
    delta_hat: float  # max_s M_s
    temperature: np.ndarray  # [p] per-direction configurational temperatures (private detail)
    diagnostics: dict  # private detail (per chain)
    sampler: dict  # public settings and aggregates (step sizes, seconds)
    seconds: float

    @property
    def summary(self) -> dict:
        """Public aggregates of the run: Δ̂, the temperature over all directions, the diagnostics' worst values."""
        t = self.temperature
        return {
            "local_sensitivity": self.delta_hat,
            "parameters": int(t.size),
            "temperature_all": float(t.mean()),
            "temperature_all_q05": float(np.quantile(t, 0.05)),
            "temperature_all_q95": float(np.quantile(t, 0.95)),
            **diagnostics.summary(self.diagnostics),
            "sampler": self.sampler,
            "seconds": round(self.seconds, 1),
        }

    def draw(self, rng: np.random.Generator) -> tuple[int, torch.Tensor]:
        """ONE kept draw chosen uniformly with ``rng`` (the secret key's): its index and θ."""
        i = int(rng.integers(len(self.thetas)))
        return i, self.thetas[i]


def statistics(target: maths.Target, pre: maths.Preconditioner, z: torch.Tensor) -> dict:
    """Per-draw log ξ and max-loss, per-record max CE, and the per-coordinate equipartition temperature, for kept
    draws z [S, p] (chunked; one gradient per draw)."""
    s_total = len(z)
    lp, ml, risk = [], [], torch.zeros(len(target.y))
    zg_sum, z_sum, g_sum = (torch.zeros(z.shape[1], dtype=torch.float64) for _ in range(3))
    for start in range(0, s_total, CHUNK):
        zc = z[start : start + CHUNK].clone().requires_grad_(True)
        theta = pre.theta(zc)
        u = target.potential(theta)
        (grad,) = torch.autograd.grad(u.sum(), zc)
        with torch.no_grad():
            ce = maths.per_record_ce(theta, target.xa, target.y)
            contrib = maths.censor(ce, target.kappa)
            contrib = contrib if target.weights is None else contrib * target.weights
            lp.append(-u.detach().double())
            ml.append(contrib.max(1).values.double())
            risk = torch.maximum(risk, ce.max(0).values)
            zd, gd = zc.detach().double(), grad.double()
            zg_sum += (zd * gd).sum(0)
            z_sum += zd.sum(0)
            g_sum += gd.sum(0)
    t = zg_sum / s_total - (z_sum / s_total) * (g_sum / s_total)  # mean (z − z̄)·∂U/∂z per coordinate
    return {
        "log_posterior": torch.cat(lp).numpy(),
        "max_loss": torch.cat(ml).numpy(),
        "record_risk": risk.numpy(),
        "temperature": t.numpy(),
    }


def sample(
    target: maths.Target,
    *,
    seeds: Callable[[str], int],
    starts_rng: np.random.Generator,
    chains: int,
    warmup: int,
    draws: int,
    start_spread: float = 2.0,
    max_tree_depth: int = 6,
    target_accept: float = 0.8,
    kind: str = "hmc_split",
) -> Run:
    """Sample ξ_T (``target``) with ``chains`` chains of the sampler ``kind`` (:mod:`.sampler`) on the
    K-FAC-whitened coordinates; ``seeds(label)`` gives each chain's seed and ``starts_rng`` the over-dispersed
    starts (both from the secret key)."""
    begin = time.perf_counter()
    theta_map = maths.fit_map(target)
    pre = maths.kfac(target, theta_map)
    starts = overdispersed_starts(starts_rng, chains, target.dim, spread=start_spread)

    ch = run_chains(
        maths.whitened_potential(target, pre),
        starts,
        [seeds(f"chain{c}") for c in range(chains)],
        warmup=warmup,
        draws=draws,
        max_tree_depth=max_tree_depth,
        target_accept=target_accept,
        kind=kind,
    )
    z = ch.z.reshape(chains * draws, -1)
    st = statistics(target, pre, z)
    shaped = {k: st[k].reshape(chains, draws) for k in ("log_posterior", "max_loss")}
    diag = diagnostics.diagnose(shaped, divergences=ch.divergences, acceptance=ch.acceptance)
    sampler = {
        **ch.settings,
        "preconditioner": "K-FAC at the MAP (G⊗A + λI)",
        "step_size_min": min(ch.step_size),
        "step_size_max": max(ch.step_size),
        "sampling_seconds": round(ch.seconds, 1),
    }
    with torch.no_grad():
        thetas = torch.cat([pre.theta(z[i : i + CHUNK]) for i in range(0, len(z), CHUNK)])
    return Run(
        target=target,
        theta_map=theta_map,
        thetas=thetas,
        max_loss=shaped["max_loss"],
        log_posterior=shaped["log_posterior"],
        record_risk=st["record_risk"],
        delta_hat=float(st["max_loss"].max()),
        temperature=st["temperature"],
        diagnostics=diag,
        sampler=sampler,
        seconds=time.perf_counter() - begin,
    )


def predict(theta: torch.Tensor, xa: torch.Tensor) -> torch.Tensor:
    """Arg-max class of the linear head θ on augmented features."""
    with torch.no_grad():
        return (xa @ theta.T).argmax(1)


def epsilon(run: Run, *, epsilon_declared: float | None = None) -> float:
    """ε of one draw: the declared ε (censored: κ = ε·T/2 bounds every contribution) or 2Δ̂/T (measured)."""
    if run.target.kappa is not None:
        if epsilon_declared is None or not math.isclose(
            maths.kappa_for(epsilon_declared, run.target.temperature), run.target.kappa
        ):
            raise ValueError("a censored run's ε is its declared one, with κ = ε·T/2")
        return float(epsilon_declared)
    return 2.0 * run.delta_hat / run.target.temperature
