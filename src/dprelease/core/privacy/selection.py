"""Private selection with a random stopping rule (Liu & Talwar 2019, Alg. 1; docs/algorithms.md, D.10).

Repeat: draw a candidate from an ε-DP mechanism and score it; release it if its score reaches τ;
otherwise stop with probability γ and release nothing. If each (candidate, score) is ε-DP, the whole
procedure is 2ε-DP whatever the number of tries (expected tries ≤ 1/γ). For SWAG-PPM, ε = 2Δ, so
selection costs 4Δ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass
class Selection(Generic[T]):
    selected: T | None
    tries: int
    scores: list[float] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.selected is not None


def select(
    draw: Callable[[], T], score: Callable[[T], float], tau: float, gamma: float, rng: np.random.Generator
) -> Selection[T]:
    """Draw candidates until one scores ≥ ``tau``, stopping with probability ``gamma`` after each failure (Liu & Talwar).

    Args:
        draw: makes one candidate.
        score: a candidate's score.
        tau: the threshold.
        gamma: the stopping probability, in (0, 1].
        rng: the stopping coins' generator (from the secret key).

    Returns:
        The selection: the candidate (None when it stopped first), the number of tries and the scores (private)."""
    if not 0 < gamma <= 1:
        raise ValueError(f"selection.gamma must lie in (0, 1], got {gamma}")
    scores: list[float] = []
    while True:
        candidate = draw()
        q = float(score(candidate))
        scores.append(q)
        if q >= tau:
            return Selection(candidate, len(scores), scores)
        if rng.random() < gamma:
            return Selection(None, len(scores), scores)


def selection_budget(epsilon_per_candidate: float) -> float:
    """Total ε of the selection: 2ε (Liu & Talwar 2019, Theorem 3.1 with random stopping).

    Args:
        epsilon_per_candidate: the ε of one candidate.

    Returns:
        The selection's ε, whatever the number of tries."""
    return 2.0 * epsilon_per_candidate
