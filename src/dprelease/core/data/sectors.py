"""The industry sector of an OSHA record, one definition for every mechanism: the first two digits of its ``Primary
NAICS`` code, :data:`UNKNOWN` where there are none. NVDP's probe and GPP read it from here and fold rare sectors by
different rules, kept as they are.

See docs/gpp.md, "Notes from the code", `core/data/sectors.py`."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

SECTOR_COLUMN = "Primary NAICS"
UNKNOWN = "unknown"  # no two leading digits in Primary NAICS
OTHER = "other"  # the class rare sectors are folded into


def sector(naics: object) -> str:
    """The NAICS sector of one record: the first two characters of its stripped ``Primary NAICS`` when both
    are ASCII digits, else :data:`UNKNOWN`."""
    code = str(naics).strip()[:2]
    return code if len(code) == 2 and code.isascii() and code.isdigit() else UNKNOWN


def sectors(naics: Iterable) -> list[str]:
    """:func:`sector` of every value (a column of ``Primary NAICS``)."""
    return [sector(v) for v in naics]


def group_rare(values: pd.Series, min_count: int, other: str = OTHER) -> pd.Series:
    """Values seen fewer than ``min_count`` times become ``other`` (keeps a probe's classes stable)."""
    counts = values.value_counts()
    rare = counts.index[counts < min_count]
    return values.where(~values.isin(rare), other)
