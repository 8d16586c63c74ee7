"""The guarantee kinds only SWAG-PPM makes (docs/guarantees.md, K.3 and K.9); the pseudo posterior kinds other
mechanisms make too (``ppm_local_asymptotic``, ``ppm_censored``) are the core's (:mod:`dprelease.core.privacy.kinds`).

Found by name (:func:`dprelease.core.privacy.guarantee.kind`) whether or not this package's plug-in was imported:
this module imports the declarations only, never torch.
"""

from __future__ import annotations

import math

from dprelease.contracts.mechanism import Kind
from dprelease.core.privacy.kinds import UNCERTIFIED_INDEX, beside, coverage_lines, measured_lines


def uncertified_text(q: dict) -> str:
    """The one-line meaning of a ``ppm_uncertified`` record."""
    return (
        f"index 2Δ̂ = {q[UNCERTIFIED_INDEX]:.4g}, not a differential-privacy guarantee: the sampler is certified "
        f"in {q['certified_directions']:,} of {q['parameters']:,} directions"
    )


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _uncertified_check(q: dict) -> str | None:
    """An uncertified record carries its index 2Δ̂ and r < d certified directions."""
    index = q.get(UNCERTIFIED_INDEX)
    if not isinstance(index, (int, float)) or not math.isfinite(index) or index < 0:
        return (
            f"a 'ppm_uncertified' record needs its index 2Δ̂ as a finite non-negative "
            f"quantities[{UNCERTIFIED_INDEX!r}], got {index!r}"
        )
    r, d = q.get("certified_directions"), q.get("parameters")
    if not (_count(r) and _count(d) and d >= 1 and r < d):
        return (
            f"a 'ppm_uncertified' record needs certified_directions r < parameters d (whole numbers), got "
            f"r={r!r}, d={d!r}"
        )
    return None


def _uncertified_claim(q: dict) -> str:
    return (
        f"index 2Δ̂ = {q[UNCERTIFIED_INDEX]:.4g} (not DP; certified in {q['certified_directions']:,} of "
        f"{q['parameters']:,} directions)"
    )


def _uncertified_sentence(g: dict) -> str:
    q = g["quantities"]
    return (
        "This model is ONE random draw from a risk-weighted (pseudo) posterior over the classifier's parameters "
        f"and it carries NO differential-privacy guarantee: {uncertified_text(q)}{beside(q, 'uncertified_index_point')}; "
        "a sampler colder than the posterior in an uncertified direction can reveal more than the index "
        "suggests, so the index is not an ε."
    )


def _censored_local_sentence(g: dict) -> str:
    return (
        f"This model is ONE random draw from a risk-weighted (pseudo) posterior whose per-record weighted "
        f"log-likelihood is censored at ε/2 (ε = {g['epsilon']:.3f}). The weights ({g['quantities'].get('weights')}) were "
        "fitted on the same data, so removing one record can change every weight: the censoring bounds each "
        "record's contribution on THIS database only, and the claim is local, not a guarantee for every pair of "
        "neighbouring databases; it is also only as good as the SWAG approximation."
    )


KINDS = (
    Kind(
        "ppm_censored_local",
        "local ε of the censored pseudo posterior mechanism with data-dependent weights: each record's weighted "
        "log-likelihood is censored at ε/2 on THIS database, but the weights were fitted on the same data, so "
        "removing one record can change every weight and the bound does not hold for every neighbouring pair; "
        "conditional on the posterior approximation",
        True,
        _censored_local_sentence,
    ),
    Kind(
        "ppm_uncertified",
        "no differential-privacy guarantee: the pseudo posterior mechanism's index 2Δ̂ (Δ̂ measured on this database "
        "from posterior draws) for a sampler whose temperature is certified in only some of its parameter "
        "directions; a sampler colder than the posterior in an uncertified direction can leak without the bound "
        "the index suggests, so the index is not an ε",
        False,
        _uncertified_sentence,
        measured=lambda manifest: measured_lines(manifest, what="the index (not an ε) = 2Δ"),
        conditions=coverage_lines,
        describe=uncertified_text,
        claim=_uncertified_claim,
        check=_uncertified_check,
        tail_headline=True,
    ),
)
