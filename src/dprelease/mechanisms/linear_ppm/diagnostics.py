"""Convergence diagnostics of the chains and the refusal rule: ArviZ's rank-normalised split R-hat and bulk/tail
ESS (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021) of two scalar statistics per draw — the log pseudo
posterior and the per-draw max-loss M_s = max_i w_i·c(CE_i) that Δ̂ is the maximum of — plus the sampler's
divergent transitions. Each threshold is declared in params before any run; a configuration that fails one is
refused.

The per-chain values are private (they are statistics of the data's posterior); :func:`summary` is the
aggregate that goes to the card and the metrics.
"""

from __future__ import annotations

import warnings

import numpy as np

from dprelease.core.errors import OneLineError

STATISTICS = ("log_posterior", "max_loss")


class DiagnosticsRefused(OneLineError):
    """The chains failed a declared diagnostic threshold: nothing is released."""


def _az():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz

    return arviz


def statistic(values: np.ndarray) -> dict:
    """R-hat (rank-normalised split), bulk and tail ESS of one statistic, [chains, draws]."""
    az, v = _az(), np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 2 or v.shape[1] < 4:
        raise ValueError("diagnostics need at least 2 chains of at least 4 draws: [chains, draws]")
    return {
        "rhat": float(az.rhat(v, method="rank")),
        "ess_bulk": float(az.ess(v, method="bulk")),
        "ess_tail": float(az.ess(v, method="tail")),
    }


def diagnose(stats: dict[str, np.ndarray], *, divergences: list[int], acceptance: list[float]) -> dict:
    """Per-statistic diagnostics and the sampler's counts (the private detail)."""
    out = {name: statistic(stats[name]) for name in STATISTICS if name in stats}
    out["divergences"] = int(sum(divergences))
    out["divergences_per_chain"] = [int(d) for d in divergences]
    out["acceptance_per_chain"] = [round(float(a), 4) for a in acceptance]
    return out


def summary(diag: dict) -> dict:
    """The public aggregate: worst R-hat, smallest ESS, total divergences, acceptance range."""
    stats = [diag[name] for name in STATISTICS if name in diag]
    acc = diag["acceptance_per_chain"]
    return {
        "rhat_max": max(s["rhat"] for s in stats),
        "ess_bulk_min": min(s["ess_bulk"] for s in stats),
        "ess_tail_min": min(s["ess_tail"] for s in stats),
        "divergences": diag["divergences"],
        "acceptance_min": min(acc),
        "acceptance_max": max(acc),
        **{f"rhat_{name}": diag[name]["rhat"] for name in STATISTICS if name in diag},
    }


def failures(
    diag: dict,
    *,
    rhat_max: float,
    ess_min: float,
    divergences_max: int,
    temperature: float | None = None,
    temperature_tolerance: float | None = None,
) -> list[str]:
    """Which declared thresholds the chains fail (empty: they pass). ``temperature``: the all-direction
    equipartition temperature, which must lie within ``temperature_tolerance`` of 1."""
    out = []
    if (
        temperature is not None
        and temperature_tolerance is not None
        and not abs(temperature - 1) <= temperature_tolerance
    ):
        out.append(f"all-direction temperature {temperature:.3f} outside 1 ± {temperature_tolerance:g}")
    for name in STATISTICS:
        if name not in diag:
            continue
        s = diag[name]
        if not s["rhat"] <= rhat_max:  # NaN fails too
            out.append(f"R-hat of {name} {s['rhat']:.3f} > {rhat_max:g}")
        for kind in ("ess_bulk", "ess_tail"):
            if not s[kind] >= ess_min:
                out.append(f"{kind.replace('_', ' ')} ESS of {name} {s[kind]:.0f} < {ess_min:g}")
    if diag["divergences"] > divergences_max:
        out.append(f"{diag['divergences']} divergent transitions > {divergences_max}")
    return out


def require(
    diag: dict,
    *,
    what: str,
    rhat_max: float,
    ess_min: float,
    divergences_max: int,
    temperature: float | None = None,
    temperature_tolerance: float | None = None,
) -> None:
    """Refuse (one line) when any declared threshold fails."""
    failed = failures(
        diag,
        rhat_max=rhat_max,
        ess_min=ess_min,
        divergences_max=divergences_max,
        temperature=temperature,
        temperature_tolerance=temperature_tolerance,
    )
    if failed:
        raise DiagnosticsRefused(
            f"{what}: release refused, the chains did not pass the declared diagnostics ({'; '.join(failed)})"
        )
