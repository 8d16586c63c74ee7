"""The practical guide's implementation algorithm (seed 001 §3–4, Figure 2) as pure decision rules.

ε is an output of SWAG-PPM, governed jointly by the weight slope c and the number of fine-tune (FT) epochs. After every
run: accept when the privacy and utility requirements hold; otherwise move by the run's fit verdict (under-fit: more FT
epochs; over-fit: fewer, or lower c once bracketed; ok but ε too high: lower c; ok, ε met, utility not: stop). A move
to a configuration already tried, c below ``c_min`` or a spent run budget stops the search.

See docs/algorithms.md, I.10 (the rules as a table)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Requirements:
    target_epsilon: float  # ε must be strictly below this
    max_drop_weighted: float  # relative F1 drop from the non-private baseline, e.g. 0.10
    max_drop_macro: float

    def __post_init__(self) -> None:
        if self.target_epsilon <= 0:
            raise ValueError("tune.target_epsilon must be > 0")
        for name in ("max_drop_weighted", "max_drop_macro"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"tune.{name} must lie in (0, 1)")


@dataclass(frozen=True)
class Steps:
    start_c: float = 1.0
    start_epochs: int = 7
    c_step: float = 0.15
    epoch_step: int = 3
    c_min: float = 0.1
    min_epochs: int = 1
    max_epochs: int = 40


@dataclass(frozen=True)
class Outcome:
    c: float
    epochs: int
    epsilon: float
    weighted_f1: float
    macro_f1: float
    verdict: str  # underfit | overfit | ok

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    action: str  # accept | more_epochs | fewer_epochs | lower_c | stop
    reason: str
    next_c: float | None = None
    next_epochs: int | None = None


def assess(o: Outcome, req: Requirements, baseline: dict) -> tuple[bool, bool]:
    """(privacy met, utility met) against the non-private baseline's weighted and macro F1."""
    privacy = o.epsilon < req.target_epsilon

    def drop(value: float, base: float) -> float:
        return 1 - value / base if base > 0 else 0.0  # nothing to lose against a zero baseline

    drop_w = drop(o.weighted_f1, baseline["weighted_f1"])
    drop_m = drop(o.macro_f1, baseline["macro_f1"])
    return privacy, drop_w <= req.max_drop_weighted and drop_m <= req.max_drop_macro


def _lower_c(o: Outcome, steps: Steps, why: str) -> Decision:
    c = round(o.c - steps.c_step, 6)
    if c < steps.c_min:
        return Decision("stop", f"{why}; c would fall below {steps.c_min}")
    return Decision("lower_c", why, c, steps.start_epochs)


def decide(history: list[Outcome], req: Requirements, baseline: dict, steps: Steps = Steps()) -> Decision:
    """The next move after the last outcome of ``history`` (rules in the module docstring)."""
    o = history[-1]
    privacy, utility = assess(o, req, baseline)
    if privacy and utility:
        return Decision("accept", f"ε {o.epsilon:.2f} < {req.target_epsilon} and F1 within the allowed drop")
    if o.verdict == "underfit":
        if o.epochs + steps.epoch_step > steps.max_epochs:
            d = _lower_c(o, steps, "under-fit but FT epochs exhausted")
        else:
            d = Decision(
                "more_epochs", "max deltas persistently variable (under-fit)", o.c, o.epochs + steps.epoch_step
            )
    elif o.verdict == "overfit":
        bracketed = any(h.c == o.c and h.epochs < o.epochs and h.verdict == "underfit" for h in history[:-1])
        if bracketed:
            d = _lower_c(o, steps, "under-fit to over-fit at this c: the target is unlikely at this c")
        elif o.epochs - steps.epoch_step < steps.min_epochs:
            d = _lower_c(o, steps, "over-fit at the fewest FT epochs")
        else:
            d = Decision("fewer_epochs", "isolated max-delta spikes (over-fit)", o.c, o.epochs - steps.epoch_step)
    elif not privacy:
        d = _lower_c(o, steps, f"fit ok but ε {o.epsilon:.2f} ≥ {req.target_epsilon}: down-weight more")
    else:
        return Decision("stop", "utility requirement unmet at a converged fit: revisit the requirements")
    tried = {(h.c, h.epochs) for h in history}
    if d.action != "stop" and (d.next_c, d.next_epochs) in tried:
        return Decision("stop", f"{d.reason}; next configuration (c={d.next_c}, FT={d.next_epochs}) already tried")
    return d


def choose(outcomes: list[Outcome], req: Requirements, baseline: dict) -> Outcome | None:
    """From a grid: among configurations meeting both requirements, the best macro F1 (then lowest ε)."""
    ok = [o for o in outcomes if all(assess(o, req, baseline))]
    return max(ok, key=lambda o: (o.macro_f1, -o.epsilon)) if ok else None
