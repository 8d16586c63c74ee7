"""Promotion gates: may the registry's ``production`` alias move to a candidate version? Pure: figures in, a decision
out (epsilon, cumulative, utility and audit gates; every one must pass).

See docs/service.md, "Notes from the code", `pipeline/service/gates.py`."""

from __future__ import annotations

from dataclasses import dataclass

AUDIT_FALSE_ALARM = 0.05  # the gate's bound is a 95 % lower bound


@dataclass(frozen=True)
class Figures:
    """What the gates look at for one version (candidate or production)."""

    epsilon: float | None  # None: the version claims no ε (its kind says why)
    utility: float
    cumulative_epsilon: float | None = None
    audit_lower_bound: float | None = None
    audit_method: str | None = None  # which audit the bound comes from (the version's epsilon_lb_method tag)
    kind: str | None = None  # the guarantee kind (the version's ``guarantee`` tag)


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Decision:
    gates: tuple[Gate, ...]

    @property
    def promote(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def failed(self) -> list[str]:
        return [g.name for g in self.gates if not g.passed]

    def reason(self) -> str:
        if self.promote:
            return "all gates passed: " + "; ".join(g.detail for g in self.gates)
        return "refused by " + "; ".join(f"{g.name} ({g.detail})" for g in self.gates if not g.passed)


def decide(
    candidate: Figures,
    production: Figures | None,
    *,
    epsilon_budget: float,
    cumulative_budget: float | None = None,
    utility_tolerance: float = 0.0,
    audit: bool = True,
) -> Decision:
    c = candidate
    if c.epsilon is None:  # never compared as a number: an uncertified index is not an ε
        gates = [Gate("epsilon", False, f"no ε claimed (kind {c.kind or 'unknown'}) vs budget {epsilon_budget:g}")]
    else:
        gates = [Gate("epsilon", c.epsilon <= epsilon_budget, f"ε {c.epsilon:.3f} vs budget {epsilon_budget:g}")]
    if cumulative_budget is not None:
        if c.cumulative_epsilon is None:
            raise ValueError("a cumulative budget is set but the candidate has no cumulative ε")
        gates.append(
            Gate(
                "cumulative",
                c.cumulative_epsilon <= cumulative_budget,
                f"cumulative ε {c.cumulative_epsilon:.3f} vs cap {cumulative_budget:g}",
            )
        )
    if production is not None:
        floor = production.utility - utility_tolerance
        gates.append(
            Gate(
                "utility",
                c.utility >= floor,
                f"utility {c.utility:.4f} vs production {production.utility:.4f} − {utility_tolerance:g}",
            )
        )
    if audit and c.audit_lower_bound is not None and c.epsilon is not None:  # no claim: nothing to convict
        how = f", {c.audit_method}" if c.audit_method else ""
        gates.append(
            Gate(
                "audit",
                c.audit_lower_bound <= c.epsilon,
                f"audit ε lower bound {c.audit_lower_bound:.3f} vs claimed {c.epsilon:.3f} (95 % bound{how}; "
                f"false-alarm rate ≤ {AUDIT_FALSE_ALARM:.0%}: an honest claim is refused that often at most)",
            )
        )
    return Decision(tuple(gates))
