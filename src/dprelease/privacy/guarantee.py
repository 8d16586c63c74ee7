"""The one shape of a privacy claim. Every arm and every release writes a :class:`Guarantee`; reports,
MLflow and the release manifest read it instead of re-deriving ε or δ.

* ``kind`` says what sort of claim it is (see :data:`KINDS`);
* ``delta`` is a number, or ``None`` with ``delta_reason`` saying why there is none;
* ``quantities`` holds the mechanism's own numbers under their own names (SWAG-PPM's local
  sensitivity Δ̂ is ``local_sensitivity``, never ``delta``; DP-SGD's noise multiplier, sampling rate…).

A SWAG-PPM sampler whose temperature is certified in only r of its d parameter directions makes no ε claim:
its kind is ``ppm_uncertified``, ``epsilon`` is None and the number it has — the index 2Δ̂, which is not an ε —
sits in ``quantities["uncertified_index"]`` with ``certified_directions`` r and ``parameters`` d. Validation
refuses an ε of any kind whose quantities record r < d (docs/guarantees.md, K.9).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

KINDS = {
    "ppm_local_asymptotic": (
        "local, asymptotic ε-DP of the pseudo posterior mechanism: ε = 2Δ̂ with Δ̂ measured on this database "
        "from posterior draws; δ → 0 as n grows and is not quantified; conditional on the posterior approximation"),
    "ppm_censored": (
        "ε-DP of the censored pseudo posterior mechanism for an exact posterior draw: the weights do not depend "
        "on the data and each record's weighted log-likelihood is censored at ε/2, so Δ ≤ ε/2 for every pair of "
        "neighbouring databases (Hu, Williams & Savitsky); the draw here comes from SWAG, so the claim is "
        "conditional on that approximation"),
    "ppm_censored_local": (
        "local ε of the censored pseudo posterior mechanism with data-dependent weights: each record's weighted "
        "log-likelihood is censored at ε/2 on THIS database, but the weights were fitted on the same data, so "
        "removing one record can change every weight and the bound does not hold for every neighbouring pair; "
        "conditional on the posterior approximation"),
    "dp_accountant": "(ε, δ)-differential privacy from a privacy accountant, worst case over neighbouring databases",
    "bayesian_dp": "(ε, δ)-Bayesian differential privacy from a Rényi-divergence accountant",
    "ppm_uncertified": (
        "no differential-privacy guarantee: the pseudo posterior mechanism's index 2Δ̂ (Δ̂ measured on this database "
        "from posterior draws) for a sampler whose temperature is certified in only some of its parameter "
        "directions; a sampler colder than the posterior in an uncertified direction can leak without the bound "
        "the index suggests, so the index is not an ε"),
    "none": "no privacy guarantee",
    "empirical_lower_bound": "an empirical lower bound on ε from an attack: evidence about the mechanism, not a guarantee",
    "empirical_probe": (
        "no differential-privacy ε: an empirical statement, a fresh attribute probe's AUC on the released "
        "representations (evidence against that attacker, not a worst-case bound)"),
}
NO_EPSILON = {"none", "empirical_probe", "ppm_uncertified"}  # kinds that claim no ε (and so no δ)
UNCERTIFIED_INDEX = "uncertified_index"  # ppm_uncertified's number: 2Δ̂, never an ε
NO_DELTA_PPM = "asymptotic, not quantified"
NOT_PRIVATE = "none (not private)"
NO_DP_CLAIM = "none (no differential-privacy claim)"
NO_DELTA_CENSORED = "0 for exact posterior sampling (not for the SWAG approximation)"
NO_DELTA_CENSORED_LOCAL = "asymptotic, not quantified (data-dependent weights)"
UNIFORM_WEIGHTS = "uniform (w ≡ 1, independent of the data)"
RISK_WEIGHTS = "risk weights fitted on the same data (round 2)"


@dataclass(frozen=True)
class Guarantee:
    mechanism: str
    kind: str
    epsilon: float | None
    delta: float | None = None
    delta_reason: str | None = None
    quantities: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown guarantee kind {self.kind!r} (one of {', '.join(KINDS)})")
        if (self.delta is None) == (self.delta_reason is None):
            raise ValueError("a guarantee has either a δ or the reason there is none, not both or neither")
        if self.kind in NO_EPSILON:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError(f"a {self.kind!r} guarantee has no ε and no δ")
        elif self.epsilon is None or not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise ValueError(f"{self.mechanism}: ε must be a finite non-negative number, got {self.epsilon}")
        if self.delta is not None and not 0 <= self.delta < 1:
            raise ValueError(f"{self.mechanism}: δ must lie in [0, 1), got {self.delta}")
        if "delta" in self.quantities:
            raise ValueError("quantities must name their own meaning; 'delta' is reserved for δ")
        self._check_coverage()

    def _check_coverage(self) -> None:
        """An ε needs a sampler certified in every direction; ``ppm_uncertified`` records how many it is."""
        q = self.quantities
        r, d = q.get("certified_directions"), q.get("parameters")
        if self.kind == "ppm_uncertified":
            index = q.get(UNCERTIFIED_INDEX)
            if not isinstance(index, (int, float)) or not math.isfinite(index) or index < 0:
                raise ValueError(f"{self.mechanism}: a 'ppm_uncertified' record needs its index 2Δ̂ as a finite "
                                 f"non-negative quantities[{UNCERTIFIED_INDEX!r}], got {index!r}")
            if not (_count(r) and _count(d) and d >= 1 and r < d):
                raise ValueError(f"{self.mechanism}: a 'ppm_uncertified' record needs certified_directions r < "
                                 f"parameters d (whole numbers), got r={r!r}, d={d!r}")
        elif self.epsilon is not None and (r is not None or d is not None):
            if not (_count(r) and _count(d)) or r != d:
                raise ValueError(f"{self.mechanism}: an ε needs the sampler certified in every direction, got "
                                 f"{r!r} of {d!r}: that is a 'ppm_uncertified' record, not a {self.kind!r} one")

    @property
    def delta_text(self) -> str:
        return f"{self.delta:.2g}" if self.delta is not None else str(self.delta_reason)

    @property
    def meaning(self) -> str:
        if self.kind == "ppm_uncertified":
            return uncertified_text(self.quantities)
        return KINDS[self.kind]

    @property
    def claim_text(self) -> str:
        """The claim in one short line, never an ε where the kind has none: "ε = 7.145", "ε = 1.5, δ = 1e-05",
        "index 2Δ̂ = 7.145 (not DP; certified in 19 of 126,316 directions)", "no ε (none)"."""
        if self.epsilon is not None:
            return f"ε = {self.epsilon:.4g}" + (f", δ = {self.delta:.2g}" if self.delta is not None else "")
        if self.kind == "ppm_uncertified":
            q = self.quantities
            return (f"index 2Δ̂ = {q[UNCERTIFIED_INDEX]:.4g} (not DP; certified in {q['certified_directions']:,} of "
                    f"{q['parameters']:,} directions)")
        return f"no ε ({self.kind})"

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Guarantee":
        return cls(**d)


def ppm(epsilon: float, local_sensitivity: float, *, mechanism: str = "SWAG-PPM", **quantities) -> Guarantee:
    """SWAG-PPM: ε = 2Δ̂ (local, asymptotic), Δ̂ and the mechanism's settings as quantities."""
    return Guarantee(mechanism, "ppm_local_asymptotic", float(epsilon), None, NO_DELTA_PPM,
                     {"local_sensitivity": float(local_sensitivity), **quantities})


def uncertified(index: float, local_sensitivity: float, *, certified_directions: int, parameters: int,
                mechanism: str = "SWAG-PPM", **quantities) -> Guarantee:
    """A SWAG-PPM sampler certified in ``certified_directions`` r < ``parameters`` d directions: no ε, no δ; the
    index 2Δ̂ under ``quantities["uncertified_index"]``."""
    return Guarantee(mechanism, "ppm_uncertified", None, None, NO_DP_CLAIM,
                     {UNCERTIFIED_INDEX: float(index), "local_sensitivity": float(local_sensitivity),
                      "certified_directions": int(certified_directions), "parameters": int(parameters), **quantities})


def uncertified_text(q: dict) -> str:
    """The one-line meaning of a ``ppm_uncertified`` record."""
    return (f"index 2Δ̂ = {q[UNCERTIFIED_INDEX]:.4g}, not a differential-privacy guarantee: the sampler is certified "
            f"in {q['certified_directions']:,} of {q['parameters']:,} directions")


def coverage_sentence(q: dict) -> str:
    """What is and what is not certified, in one sentence (the model card, the run summary)."""
    r, d = q.get("certified_directions"), q.get("parameters")
    if r is None or d is None:
        return ("Coverage not recorded: this record predates the all-direction check, so the sampler's temperature "
                "is certified in SWAG's subspace only and its ε does not cover the other directions.")
    if r >= d:
        t_all = q.get("temperature_min_all")
        how = f"ε = 2Δ / min(1, T_min) with T_min ≥ {t_all:.3g} over all of them" if t_all is not None else "ε = 2Δ"
        return (f"Certified: the sampler's temperature in all {d:,} parameter directions ({how}); not certified: that "
                "Δ̂ bounds every database and every θ (it is measured here, with a GEV tail bound), a quantified δ, or "
                "that a Gaussian sampler acts like the exact posterior beyond its temperature.")
    return (f"Certified: the sampler's temperature in {r:,} of its {d:,} parameter directions (SWAG's subspace); not "
            f"certified: the other {d - r:,}, where the sampler may be far colder than the posterior, so no ε is "
            "claimed and the index 2Δ̂ is not one.")


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def censored(epsilon: float, local_sensitivity: float, *, weights: str, mechanism: str = "SWAG-PPM censored",
             **quantities) -> Guarantee:
    """The censored variant: ε fixed in advance by the censoring level ε/2; the measured Δ̂ (≤ ε/2) and the
    weights used as quantities. Strict (every neighbouring pair) only with data-independent weights
    (:data:`UNIFORM_WEIGHTS`); with weights fitted on the data the claim is local."""
    strict = weights == UNIFORM_WEIGHTS
    return Guarantee(mechanism, "ppm_censored" if strict else "ppm_censored_local", float(epsilon), None,
                     NO_DELTA_CENSORED if strict else NO_DELTA_CENSORED_LOCAL,
                     {"local_sensitivity": float(local_sensitivity), "weights": weights, **quantities})


def accountant(mechanism: str, epsilon: float, delta: float, **quantities) -> Guarantee:
    return Guarantee(mechanism, "dp_accountant", float(epsilon), float(delta), None, quantities)


def none(mechanism: str = "non-private", **quantities) -> Guarantee:
    return Guarantee(mechanism, "none", None, None, NOT_PRIVATE, quantities)


def empirical_probe(mechanism: str, adversary_auc: float, *, statement: str, **quantities) -> Guarantee:
    """No ε: the adversary AUC of a fresh attribute probe on released representations, and the claim in words."""
    if not 0.0 <= adversary_auc <= 1.0:
        raise ValueError(f"{mechanism}: an AUC lies in [0, 1], got {adversary_auc}")
    return Guarantee(mechanism, "empirical_probe", None, None, NO_DP_CLAIM,
                     {"adversary_auc": float(adversary_auc), "statement": statement, **quantities})
