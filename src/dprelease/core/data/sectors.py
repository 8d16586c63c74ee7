"""The industry sector of an OSHA record, one definition for every mechanism: the first two digits of its
``Primary NAICS`` code (the NAICS sector), :data:`UNKNOWN` where the column holds no two leading digits.

NVDP's attacker probe (:mod:`dprelease.mechanisms.nvdp.probe`) and GPP's sensitive attribute (:mod:`dprelease.mechanisms.gpp.osha`)
both read the sector from here. What each then does with rare sectors is its own, and differs:

* NVDP's probe keeps sectors with at least 20 training records as classes and folds the rest, and the
  :data:`UNKNOWN` records, into one ``other`` class (placed last);
* GPP keeps sectors with at least ``gpp.osha.min_sector_rows`` (10) training records, :data:`UNKNOWN`
  included as a class of its own, and names the rest ``other`` (:func:`group_rare`).

The two rules were written separately and no reason for the difference is recorded; they are kept as they
are so that published figures do not move (NVDP's probe AUC in ``metrics/nvdp_probe.json`` and its report;
GPP's OSHA rows in ``metrics/gpp_osha.json``, its report and the GPP sanitizer's card). Their AUCs are not
comparable in any case: NVDP's probe is a logistic regression, GPP's an MLP.
"""

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
