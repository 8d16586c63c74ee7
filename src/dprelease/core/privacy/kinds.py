"""The core guarantee kinds (docs/guarantees.md, K): the kinds of claim any mechanism may make, declared
like every package's own (:class:`dprelease.contracts.mechanism.Kind` in ``KINDS``) and found the same way
(:func:`dprelease.core.privacy.guarantee.kind`). A kind only one mechanism makes lives in that mechanism's
``kinds`` module (SWAG-PPM's ``ppm_uncertified`` and ``ppm_censored_local``: ``swag_ppm/kinds.py``).

The pseudo posterior mechanism's kinds name the sampler a draw comes from, ``quantities["sampler"]`` (SWAG
when a record names none): an exact posterior draw is what the claim is about, the sampler an approximation.
This module, like every ``kinds`` module, imports :mod:`dprelease.contracts.mechanism` only: reading a release's
guarantee never imports torch.
"""

from __future__ import annotations

from dprelease.contracts.mechanism import Kind

UNCERTIFIED_INDEX = "uncertified_index"  # ppm_uncertified's number: 2Δ̂, never an ε
DEFAULT_SAMPLER = "SWAG"  # the sampler of a record that names none (every record before the quantity existed)


def sampler(q: dict) -> str:
    """The sampler the draw came from, as its record names it.

    Args:
        q: a guarantee record's quantities.

    Returns:
        The sampler's name (SWAG for a record that names none)."""
    return str(q.get("sampler") or DEFAULT_SAMPLER)


def article(word: str) -> str:
    """ "a" or "an" before ``word``: an initialism without a vowel is spelled out (an MCMC, an HMC, a SWAG).

    Args:
        word: the word that follows.

    Returns:
        ``"a"`` or ``"an"``."""
    letters = "AEFHILMNORSX" if word.isupper() and not set(word[1:]) & set("AEIOU") else "AEIOUaeiou"
    return "an" if word[:1] in letters else "a"


def beside(q: dict, key: str) -> str:
    """ " (point estimate 7.145 …)" after the headline figure (the GEV upper bound), when both are recorded.

    Args:
        q: a guarantee record's quantities.
        key: the point estimate's quantity.

    Returns:
        The parenthesis, or ``""`` when the record has no point estimate."""
    return (
        f" (point estimate {q[key]:.3f}, from the measured maximum Δ̂; the headline uses the upper end of the GEV "
        "interval of Δ's tail quantile, so the point estimate may lie below that interval)"
        if q.get(key) is not None
        else ""
    )


def coverage_sentence(q: dict) -> str:
    """What is and what is not certified, in one sentence (the model card, the run summary).

    Args:
        q: a pseudo posterior draw's guarantee quantities (``certified_directions``, ``parameters``).

    Returns:
        The sentence."""
    r, d = q.get("certified_directions"), q.get("parameters")
    if r is None or d is None:
        return (
            "Coverage not recorded: this record predates the all-direction check, so the sampler's temperature "
            "is certified in SWAG's subspace only and its ε does not cover the other directions."
        )
    if r >= d:
        t_all = q.get("temperature_min_all")
        how = f"ε = 2Δ / min(1, T_min) with T_min ≥ {t_all:.3g} over all of them" if t_all is not None else "ε = 2Δ"
        return (
            f"Certified: the sampler's temperature in all {d:,} parameter directions ({how}); not certified: that "
            "Δ̂ bounds every database and every θ (it is measured here, with a GEV tail bound), a quantified δ, or "
            "that a Gaussian sampler acts like the exact posterior beyond its temperature."
        )
    return (
        f"Certified: the sampler's temperature in {r:,} of its {d:,} parameter directions (SWAG's subspace); not "
        f"certified: the other {d - r:,}, where the sampler may be far colder than the posterior, so no ε is "
        "claimed and the index 2Δ̂ is not one."
    )


def coverage_lines(manifest: dict) -> list[str]:
    """The card's "what is certified" line of a pseudo posterior draw.

    Args:
        manifest: the release manifest (its ``guarantee``).

    Returns:
        The card's lines."""
    return [f"* what is certified: {coverage_sentence(manifest['guarantee']['quantities'])}"]


def measured_lines(manifest: dict, *, what: str) -> list[str]:
    """The card's "how it was measured" line of a pseudo posterior draw's figure 2Δ.

    Args:
        manifest: the release manifest (its ``guarantee``).
        what: the figure's formula, e.g. ``ε = 2Δ``.

    Returns:
        The card's lines."""
    g = manifest["guarantee"]
    q = g["quantities"]
    bound = q.get("local_sensitivity_bound")
    return [
        f"* how it was measured: {what}, Δ̂ = the largest weighted loss max_i w_i·CE_i over "
        f"{q.get('posterior_draws')} posterior draws of round {q.get('round')} and over the released draw "
        f"itself; Δ̂ = {q['local_sensitivity']:.3f}"
        + (f", Δ = {bound:.3f} ({q.get('claim_basis')})" if bound is not None else "")
        + " (no statistic of a round that was not released is published)"
    ]


def _local_asymptotic(g: dict) -> str:
    q = g["quantities"]
    return (
        f"This model is ONE random draw from a risk-weighted (pseudo) posterior over the classifier's "
        f"parameters; with respect to its training records it satisfies ε = {g['epsilon']:.3f}"
        f"{beside(q, 'epsilon_point_estimate')} differential "
        "privacy *locally* (the sensitivity Δ̂ is measured on this database, not over all databases) and "
        "*asymptotically* (δ → 0 as the number of records grows; δ is not quantified), and the bound is only as "
        f"good as the {sampler(q)} approximation of the posterior it was sampled from."
    )


def _local_asymptotic_measured(manifest: dict) -> list[str]:
    return measured_lines(manifest, what="ε = 2Δ / min(1, T_min)") + [
        "* releasing another draw, or a privately selected one, from the same data composes: the "
        "plain release (ε) and a selected one (2ε) together cost ε + 2ε."
    ]


def _censored(g: dict) -> str:
    q = g["quantities"]
    s = sampler(q)
    return (
        f"This model is ONE random draw from a (pseudo) posterior with weights that do not depend on the data "
        f"({q.get('weights')}) and each record's log-likelihood censored at ε/2, so for an exact posterior draw "
        f"it satisfies ε = {g['epsilon']:.3f} differential privacy for every pair of neighbouring databases; the "
        f"draw comes from {article(s)} {s} approximation of that posterior, so the claim is only as good as the "
        "approximation."
    )


CENSORED = (
    "ε-DP of the censored pseudo posterior mechanism for an exact posterior draw: the weights do not depend "
    "on the data and each record's weighted log-likelihood is censored at ε/2, so Δ ≤ ε/2 for every pair of "
    "neighbouring databases (Hu, Williams & Savitsky); the draw here comes from {sampler}, so the claim is "
    "conditional on that approximation"
)


def _accountant(g: dict) -> str:
    q = g["quantities"]
    return f"(ε = {g['epsilon']:.3f}, δ = {g['delta']:.2g})-differential privacy from {q.get('accountant', 'an')} accountant."


def _no_guarantee(g: dict) -> str:
    return "No privacy guarantee."


def _bayesian(g: dict) -> str:
    return (
        f"(ε = {g['epsilon']:.3f}, δ = {g['delta']:.2g})-Bayesian differential privacy from a Rényi-divergence "
        "accountant (an expectation over the data distribution, not a worst case over neighbouring databases)."
    )


def _lower_bound(g: dict) -> str:
    return (
        f"No privacy guarantee: ε ≥ {g['epsilon']:.3f} is an empirical lower bound from an attack, evidence about "
        "the mechanism."
    )


def _probe(g: dict) -> str:
    auc = g["quantities"].get("adversary_auc")
    return (
        "No differential-privacy guarantee: an empirical statement, a fresh attribute probe's AUC "
        + (f"{auc:.3f} " if isinstance(auc, (int, float)) else "")
        + "on the released representations (evidence against that attacker, not a worst-case bound)."
    )


KINDS = (
    Kind(
        "ppm_local_asymptotic",
        "local, asymptotic ε-DP of the pseudo posterior mechanism: ε = 2Δ̂ with Δ̂ measured on this database "
        "from posterior draws; δ → 0 as n grows and is not quantified; conditional on the posterior approximation",
        True,
        _local_asymptotic,
        measured=_local_asymptotic_measured,
        conditions=coverage_lines,
        tail_headline=True,
    ),
    Kind(
        "ppm_censored",
        CENSORED.format(sampler="the record's sampler (SWAG unless it names another)"),
        True,
        _censored,
        describe=lambda q: CENSORED.format(sampler=sampler(q)),
    ),
    Kind(
        "dp_accountant",
        "(ε, δ)-differential privacy from a privacy accountant, worst case over neighbouring databases",
        True,
        _accountant,
        worst_case=True,
    ),
    Kind("bayesian_dp", "(ε, δ)-Bayesian differential privacy from a Rényi-divergence accountant", True, _bayesian),
    Kind("none", "no privacy guarantee", False, _no_guarantee),
    Kind(
        "empirical_lower_bound",
        "an empirical lower bound on ε from an attack: evidence about the mechanism, not a guarantee",
        True,
        _lower_bound,
    ),
    Kind(
        "empirical_probe",
        "no differential-privacy ε: an empirical statement, a fresh attribute probe's AUC on the released "
        "representations (evidence against that attacker, not a worst-case bound)",
        False,
        _probe,
    ),
)
