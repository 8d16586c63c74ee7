"""The claim a SWAG-PPM draw is released under (docs/guarantees.md, K.1, K.9, M, O): Δ̂, the sampler's temperatures and
Δ̂'s tail in, one guarantee record out. Numbers only.

See docs/guarantees.md, T.6."""

from __future__ import annotations

from typing import Callable

from dprelease.core.privacy import guarantee
from dprelease.core.privacy.guarantee import Guarantee
from dprelease.mechanisms.swag_ppm.temperature import implied_epsilon

HEADLINE = (
    "GEV upper bound ({confidence:.0%} interval) of the {level:.4f} quantile of the per-draw maximum, or the "
    "measured Δ̂ if larger"
)
POINT_ONLY = "the measured Δ̂ (no extreme-value fit: fewer than 10 posterior draws)"
KINDS = ("ppm_local_asymptotic", "ppm_uncertified")  # what :func:`ppm_claim` releases under


def coverage(temp: dict, *, parameters: int) -> tuple[int, float]:
    """(directions certified, the certified smallest temperature over them) from a temperature record
    (``Temperature.as_dict()``): all ``parameters`` when it carries the all-direction floor, else SWAG's r."""
    if parameters < 1:
        raise ValueError(f"a sampler has at least one parameter, got {parameters}")
    floor = temp.get("all_parameters_min")
    if floor is not None and floor > 0:
        return parameters, min(float(floor), float(temp["subspace_min"]))
    return min(int(temp["rank"]), parameters), float(temp["subspace_min"])


def sensitivity_bound(local_sensitivity: float, tail: dict | None) -> tuple[float, str]:
    """(Δ the claim uses, how it was obtained): the tail's upper bound when fitted, never below Δ̂."""
    if tail is None:
        return float(local_sensitivity), POINT_ONLY
    return max(float(local_sensitivity), float(tail["ci_high"])), HEADLINE.format(**tail)


def ppm_claim(
    local_sensitivity: float,
    temp: dict,
    *,
    parameters: int,
    tail: dict | None = None,
    budget: Callable[[float], float] | None = None,
    mechanism: str = "SWAG-PPM",
    **quantities,
) -> Guarantee:
    """The guarantee of one draw from a sampler with temperatures ``temp`` and measured Δ̂ ``local_sensitivity``
    (module docstring). ``budget``: maps one draw's figure to the released mechanism's (private selection: 2ε),
    applied to ε and the index alike; the per-draw figure is kept as ``…_per_candidate``."""
    bound, basis = sensitivity_bound(local_sensitivity, tail)
    r, t_min = coverage(temp, parameters=parameters)
    spend = budget or (lambda e: e)
    q = {
        "temperature": temp["subspace"],
        "temperature_min": temp["subspace_min"],
        "temperature_all": temp["all_parameters"],
        "temperature_min_all": temp.get("all_parameters_min"),
        "local_sensitivity_bound": bound,
        "claim_basis": basis,
        **quantities,
    }
    if r >= parameters:
        eps = implied_epsilon(2 * bound, t_min)
        extra = {"epsilon_per_candidate": eps} if budget else {}
        return guarantee.ppm(
            spend(eps),
            local_sensitivity,
            mechanism=mechanism,
            certified_directions=parameters,
            parameters=parameters,
            epsilon_point_estimate=spend(implied_epsilon(2 * local_sensitivity, t_min)),
            epsilon_at_temperature_one=spend(2 * local_sensitivity),
            **extra,
            **q,
        )
    extra = {"uncertified_index_per_candidate": 2 * bound} if budget else {}
    return guarantee.uncertified(
        spend(2 * bound),
        local_sensitivity,
        certified_directions=r,
        parameters=parameters,
        mechanism=mechanism,
        uncertified_index_point=spend(2 * local_sensitivity),
        **extra,
        **q,
    )


def summary(g: Guarantee) -> dict:
    """The manifest's ``claim`` block: the statement as quoted (the headline), the point figure beside it, how
    Δ was obtained and what is certified. Never an ε for a record that has none."""
    q = g.quantities
    if g.epsilon is not None:
        figures = {"epsilon": g.epsilon, "epsilon_point_estimate": q.get("epsilon_point_estimate")}
    else:
        figures = {
            "uncertified_index": q.get(guarantee.UNCERTIFIED_INDEX),
            "uncertified_index_point": q.get("uncertified_index_point"),
        }
    return {
        "kind": g.kind,
        "statement": g.claim_text,
        **figures,
        "basis": q.get("claim_basis"),
        "certified_directions": q.get("certified_directions"),
        "parameters": q.get("parameters"),
        "coverage": guarantee.coverage_sentence(q),
    }
