"""Record-local roles: each report's role (train / validation / test / unused) is a function of that report and a key,
never of the others, so adding or removing one report moves no other (the unit of privacy).

See docs/guarantees.md, T.1."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

ROLES = ("train", "validation", "test", "unused")


def report_ids(frame: pd.DataFrame) -> np.ndarray:
    """A stable content id per report: sha256 of its narrative, code and (when read) event date.

    Never a row number or a position: the same report has the same id in any extract that holds it.
    Identical reports share an id (and so a role); each still counts as one report.
    """
    dates = frame["date"].dt.strftime("%Y-%m-%d") if "date" in frame.columns else pd.Series("", index=frame.index)
    fields = zip(frame["text"], frame["label"], dates, strict=True)
    return np.array([hashlib.sha256("\0".join(f).encode("utf-8")).hexdigest() for f in fields], dtype=object)


def public_uniforms(ids: Sequence[str], *, seed: int, purpose: str) -> np.ndarray:
    """Uniforms in [0, 1) from the public seed (for public reports only: anyone can recompute them)."""
    prefix = f"dprelease public {purpose} {seed}\0".encode()
    return np.array([_unit(hashlib.sha256(prefix + i.encode()).digest()) for i in ids], dtype=float)


def _unit(digest: bytes) -> float:
    return int.from_bytes(digest[:8], "little") / 2.0**64


def label_space(
    public: pd.DataFrame, *, min_class_size: int, limit_classes: int | None, declared: Sequence[str] | None = None
) -> list[str]:
    """The codes a model can output: ``declared`` (each with a public report), or those with at least
    ``min_class_size`` public reports (the ``limit_classes`` largest when set, ties by code), in OIICS order. Fixed
    from public inputs before any private report is read."""
    counts = public["label"].value_counts()
    if declared is not None:
        missing = [c for c in declared if counts.get(c, 0) < 1]
        if missing:
            raise ValueError(f"data.codes: {', '.join(missing)} have no public report (a rate needs a public count)")
        return sorted(set(declared), key=code_order)
    kept = [c for c in counts.index if counts[c] >= min_class_size]
    if limit_classes is not None:
        kept = sorted(kept, key=lambda c: (-int(counts[c]), str(c)))[:limit_classes]
    return sorted(kept, key=code_order)


def code_order(code: str) -> tuple:
    return (not code.isdigit(), int(code) if code.isdigit() else 0, code)


def inclusion_rates(public: pd.DataFrame, codes: Sequence[str], *, cap: int | None) -> dict[str, float]:
    """Per code, the probability a report of that code is used: min(1, cap / public count) — the per-class cap as a
    rate from the public period (a private period like the public one gives about ``cap`` reports per class);
    1 everywhere when ``cap`` is None."""
    counts = public["label"].value_counts()
    return {c: 1.0 if cap is None else min(1.0, cap / int(counts[c])) for c in codes}


def fractions(*, test_size: float, validation_size: float) -> tuple[float, float, float]:
    """(train, validation, test) shares of the used reports: the held-out ``test_size`` of which
    ``validation_size`` is validation."""
    held = test_size
    return 1.0 - held, held * validation_size, held * (1.0 - validation_size)


def assign(
    u: np.ndarray, labels: Sequence[str], *, rates: Mapping[str, float], shares: tuple[float, float, float]
) -> np.ndarray:
    """Each report's role from its own uniform ``u`` and code alone: outside the label space or ``u`` ≥ its code's
    rate → ``unused``; otherwise ``u / rate`` falls in the train, validation or test share."""
    rate = np.array([rates.get(c, 0.0) for c in labels], dtype=float)
    used = u < rate
    v = np.where(used, u / np.where(rate > 0, rate, 1.0), 1.0)
    train, validation, _ = shares
    role = np.where(v < train, "train", np.where(v < train + validation, "validation", "test"))
    return np.where(used, role, "unused").astype(object)


def expected_sizes(
    public: pd.DataFrame, rates: Mapping[str, float], shares: tuple[float, float, float]
) -> dict[str, int]:
    """The expected size of each role if the private period looks like the public one: public inputs only (the
    figure δ and DP-SGD's normaliser use, never the private count)."""
    counts = public["label"].value_counts()
    used = sum(rates[c] * int(counts.get(c, 0)) for c in rates)
    return {name: max(2, int(round(used * s))) for name, s in zip(("train", "validation", "test"), shares)}
