"""The one shape of a privacy claim: every arm and every release writes a :class:`Guarantee` (kind, ε, δ or why none,
the mechanism's own quantities); reports, MLflow and the manifest read it instead of re-deriving ε or δ.

See docs/guarantees.md, T.2."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from dprelease.contracts import plugins
from dprelease.contracts.mechanism import Kind
from dprelease.core.privacy.kinds import KINDS as CORE
from dprelease.core.privacy.kinds import UNCERTIFIED_INDEX, coverage_sentence  # noqa: F401  (coverage_sentence: re-export)

NO_DELTA_PPM = "asymptotic, not quantified"
NOT_PRIVATE = "none (not private)"
NO_DP_CLAIM = "none (no differential-privacy claim)"
NO_DELTA_CENSORED = "0 for exact posterior sampling (not for the SWAG approximation)"
NO_DELTA_CENSORED_LOCAL = "asymptotic, not quantified (data-dependent weights)"
UNIFORM_WEIGHTS = "uniform (w ≡ 1, independent of the data)"
RISK_WEIGHTS = "risk weights fitted on the same data (round 2)"

_KNOWN: dict[str, Kind] = {}


def register(*declared: Kind) -> None:
    """Add kinds to the vocabulary; a name declared twice by different declarations is an error.

    Args:
        *declared: the kinds' declarations."""
    for k in declared:
        if _KNOWN.setdefault(k.name, k) is not k:
            raise RuntimeError(f"guarantee kind {k.name!r} declared twice")


register(*CORE)


def _load() -> None:
    """Every listed package's kinds (their ``kinds`` modules, imported once each by Python)."""
    for k in plugins.guarantee_kinds():
        if _KNOWN.get(k.name) is not k:
            register(k)


def kind(name: str) -> Kind:
    """The declaration of the kind ``name``.

    A name not known yet loads every package's ``kinds`` module first; one still unknown is a one-line error naming
    the known kinds.

    Args:
        name: the kind's name, as a record's ``kind`` holds it.

    Returns:
        Its declaration."""
    if name not in _KNOWN:
        _load()
    if name not in _KNOWN:
        raise ValueError(f"unknown guarantee kind {name!r} (one of {', '.join(_KNOWN)})")
    return _KNOWN[name]


def kinds() -> dict[str, Kind]:
    """Every kind of every listed package (imports their ``kinds`` modules)."""
    _load()
    return dict(_KNOWN)


@dataclass(frozen=True)
class Guarantee:
    mechanism: str
    kind: str
    epsilon: float | None
    delta: float | None = None
    delta_reason: str | None = None
    quantities: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        k = kind(self.kind)
        if (self.delta is None) == (self.delta_reason is None):
            raise ValueError("a guarantee has either a δ or the reason there is none, not both or neither")
        if not k.claims_epsilon:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError(f"a {self.kind!r} guarantee has no ε and no δ")
        elif self.epsilon is None or not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise ValueError(f"{self.mechanism}: ε must be a finite non-negative number, got {self.epsilon}")
        if self.delta is not None and not 0 <= self.delta < 1:
            raise ValueError(f"{self.mechanism}: δ must lie in [0, 1), got {self.delta}")
        if "delta" in self.quantities:
            raise ValueError("quantities must name their own meaning; 'delta' is reserved for δ")
        self._check_coverage(k)

    def _check_coverage(self, k: Kind) -> None:
        """The kind's own rule (``ppm_uncertified``: its index and r < d), then: an ε needs a sampler certified in
        every direction."""
        q = self.quantities
        r, d = q.get("certified_directions"), q.get("parameters")
        if k.check is not None and (why := k.check(q)) is not None:
            raise ValueError(f"{self.mechanism}: {why}")
        if self.epsilon is not None and (r is not None or d is not None):
            if not (_count(r) and _count(d)) or r != d:
                raise ValueError(
                    f"{self.mechanism}: an ε needs the sampler certified in every direction, got "
                    f"{r!r} of {d!r}: that is a 'ppm_uncertified' record, not a {self.kind!r} one"
                )

    @property
    def delta_text(self) -> str:
        return f"{self.delta:.2g}" if self.delta is not None else str(self.delta_reason)

    @property
    def meaning(self) -> str:
        k = kind(self.kind)
        return k.describe(self.quantities) if k.describe is not None else k.meaning

    @property
    def claim_text(self) -> str:
        """The claim in one short line, never an ε where the kind has none: "ε = 7.145", "ε = 1.5, δ = 1e-05",
        "index 2Δ̂ = 7.145 (not DP; certified in 19 of 126,316 directions)", "no ε (none)"."""
        if self.epsilon is not None:
            return f"ε = {self.epsilon:.4g}" + (f", δ = {self.delta:.2g}" if self.delta is not None else "")
        k = kind(self.kind)
        return k.claim(self.quantities) if k.claim is not None else f"no ε ({self.kind})"

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Guarantee":
        """The guarantee a record's ``as_dict`` wrote (validated as any guarantee is).

        Args:
            d: the record's fields.

        Returns:
            The guarantee."""
        return cls(**d)


def ppm(epsilon: float, local_sensitivity: float, *, mechanism: str = "SWAG-PPM", **quantities) -> Guarantee:
    """SWAG-PPM: ε = 2Δ̂ (local, asymptotic), Δ̂ and the mechanism's settings as quantities.

    Args:
        epsilon: the claimed ε.
        local_sensitivity: the measured Δ̂ (never called ``delta``).
        mechanism: the mechanism's label.
        **quantities: the mechanism's own numbers.

    Returns:
        A guarantee of kind ``ppm_local_asymptotic``, with no δ and the reason why."""
    return Guarantee(
        mechanism,
        "ppm_local_asymptotic",
        float(epsilon),
        None,
        NO_DELTA_PPM,
        {"local_sensitivity": float(local_sensitivity), **quantities},
    )


def uncertified(
    index: float,
    local_sensitivity: float,
    *,
    certified_directions: int,
    parameters: int,
    mechanism: str = "SWAG-PPM",
    **quantities,
) -> Guarantee:
    """A SWAG-PPM sampler certified in r < d directions: no ε, no δ; the index 2Δ̂ in the quantities.

    Args:
        index: the index 2Δ̂ (NOT an ε), stored as ``quantities["uncertified_index"]``.
        local_sensitivity: the measured Δ̂.
        certified_directions: r, the directions whose temperature is certified.
        parameters: d, the sampler's parameters.
        mechanism: the mechanism's label.
        **quantities: the mechanism's own numbers.

    Returns:
        A guarantee of kind ``ppm_uncertified``."""
    return Guarantee(
        mechanism,
        "ppm_uncertified",
        None,
        None,
        NO_DP_CLAIM,
        {
            UNCERTIFIED_INDEX: float(index),
            "local_sensitivity": float(local_sensitivity),
            "certified_directions": int(certified_directions),
            "parameters": int(parameters),
            **quantities,
        },
    )


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def censored(
    epsilon: float, local_sensitivity: float, *, weights: str, mechanism: str = "SWAG-PPM censored", **quantities
) -> Guarantee:
    """The censored variant: ε fixed in advance by the censoring level ε/2; strict only with uniform weights.

    Args:
        epsilon: the declared ε (the level is ε/2).
        local_sensitivity: the measured Δ̂ (≤ ε/2).
        weights: :data:`UNIFORM_WEIGHTS` (strict, every neighbouring pair), or fitted weights (the claim is local).
        mechanism: the mechanism's label.
        **quantities: the mechanism's own numbers.

    Returns:
        A guarantee of kind ``ppm_censored`` or ``ppm_censored_local``."""
    strict = weights == UNIFORM_WEIGHTS
    return Guarantee(
        mechanism,
        "ppm_censored" if strict else "ppm_censored_local",
        float(epsilon),
        None,
        NO_DELTA_CENSORED if strict else NO_DELTA_CENSORED_LOCAL,
        {"local_sensitivity": float(local_sensitivity), "weights": weights, **quantities},
    )


def accountant(mechanism: str, epsilon: float, delta: float, **quantities) -> Guarantee:
    """An accountant's (ε, δ)-DP claim, worst case over neighbouring databases (DP-SGD and the like).

    Args:
        mechanism: the mechanism's label.
        epsilon: the accountant's ε.
        delta: its δ.
        **quantities: the mechanism's own numbers (σ, q, steps…).

    Returns:
        A guarantee of kind ``dp_accountant``."""
    return Guarantee(mechanism, "dp_accountant", float(epsilon), float(delta), None, quantities)


def none(mechanism: str = "non-private", **quantities) -> Guarantee:
    """No privacy claim at all (a non-private arm).

    Args:
        mechanism: the mechanism's label.
        **quantities: the mechanism's own numbers.

    Returns:
        A guarantee of kind ``none``."""
    return Guarantee(mechanism, "none", None, None, NOT_PRIVATE, quantities)


def empirical_probe(mechanism: str, adversary_auc: float, *, statement: str, **quantities) -> Guarantee:
    """No ε: the adversary AUC of a fresh attribute probe on released representations, and the claim in words.

    Args:
        mechanism: the mechanism's label.
        adversary_auc: the probe's AUC, in [0, 1].
        statement: the claim in words.
        **quantities: the mechanism's own numbers.

    Returns:
        A guarantee of kind ``empirical_probe``."""
    if not 0.0 <= adversary_auc <= 1.0:
        raise ValueError(f"{mechanism}: an AUC lies in [0, 1], got {adversary_auc}")
    return Guarantee(
        mechanism,
        "empirical_probe",
        None,
        None,
        NO_DP_CLAIM,
        {"adversary_auc": float(adversary_auc), "statement": statement, **quantities},
    )
