"""The file contract between a mechanism and the frontier: ``metrics/frontier/<source>.json``, written by the stage a
package's ``FRONTIER`` names; aggregates only.

See docs/frontier.md, "Notes from the code", `core/utility/points.py`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dprelease.core.io import read_json, write_json

FOLDER = "metrics/frontier"
# how a point's configuration was chosen: on the public proxy (zero ε), by private selection (its ε covers the
# search), on the private validation split (NOT covered: plotted, never recommended), declared (no search)
PUBLIC_PROXY, PRIVATE_SELECTION, PRIVATE_VALIDATION, DECLARED = (
    "public proxy",
    "private selection",
    "private validation",
    "declared",
)
TUNINGS = (PUBLIC_PROXY, PRIVATE_SELECTION, PRIVATE_VALIDATION, DECLARED)
COVERED = (PUBLIC_PROXY, PRIVATE_SELECTION, DECLARED)  # the choice is public, or its ε covers it


@dataclass(frozen=True, kw_only=True)
class Point:
    mechanism: str  # the row's name in the frontier (e.g. "dpsgd_linear")
    label: str  # human-readable
    kind: str  # a guarantee kind (dprelease.core.privacy.guarantee.kind)
    epsilon: float | None  # what the guarantee claims (None: no ε claimed)
    delta: float | None
    accountant: str  # how ε was computed ("RDP (Opacus conversion)", "PRV", "analytic Gaussian", "2Δ̂", "—")
    weighted_f1: list[float]  # test split, one per seed (refits with secret seeds)
    macro_f1: list[float]
    target_epsilon: float | None = None  # the declared level it was calibrated to (None: measured)
    validation_weighted_f1: float | None = None  # the chosen configuration's validation score (selection)
    config: dict[str, Any] = field(default_factory=dict)  # public hyper-parameters of the chosen configuration
    arm: str | None = None  # the audited arm this point IS (same configuration), for the audit bound
    tuning: str | None = None  # how its configuration was chosen: TUNINGS (None: an older file, not stated)
    proxy_weighted_f1: float | None = None  # the chosen configuration's score on the public proxy (zero ε)

    def __post_init__(self) -> None:
        if self.tuning is not None and self.tuning not in TUNINGS:
            raise ValueError(
                f"frontier point {self.mechanism}: tuning {self.tuning!r} is not one of {', '.join(TUNINGS)}"
            )
        if len(self.weighted_f1) != len(self.macro_f1) or not self.weighted_f1:
            raise ValueError(f"frontier point {self.mechanism}: one weighted and one macro F1 per seed")
        for v in (*self.weighted_f1, *self.macro_f1):
            if not (0.0 <= v <= 1.0):
                raise ValueError(f"frontier point {self.mechanism}: F1 {v} outside [0, 1]")
        if self.epsilon is not None and not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"frontier point {self.mechanism}: ε must be finite and ≥ 0, or None (got {self.epsilon})")


def points_file(root: str | Path, source: str) -> Path:
    return Path(root) / FOLDER / f"{source}.json"


def write_points(root: str | Path, source: str, points: list[Point], *, grid_size: int, selection: str) -> dict:
    """Write one source's points (atomically) and return the document."""
    if grid_size < 1:
        raise ValueError("grid_size must be ≥ 1 (1: no search)")
    doc = {"source": source, "grid_size": int(grid_size), "selection": selection, "points": [asdict(p) for p in points]}
    write_json(points_file(root, source), doc)
    return doc


def read_points(path: str | Path) -> tuple[dict, list[Point]]:
    """A source's document and its points (validated)."""
    doc = read_json(path)
    return doc, [Point(**p) for p in doc["points"]]
