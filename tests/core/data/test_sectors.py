"""The one industry-sector definition (dprelease.core.data.sectors) and how each mechanism groups sectors."""

import numpy as np
import pandas as pd

from dprelease.core.data.sectors import OTHER, UNKNOWN, group_rare, sector, sectors


def test_sector_is_the_first_two_ascii_naics_digits():
    assert [sector(v) for v in ("238160", " 3323", "33", 236220, 23.0)] == ["23", "33", "33", "23", "23"]
    assert [sector(v) for v in ("", "4x1", "2", None, float("nan"), "²³1", "  ")] == [UNKNOWN] * 7
    assert sectors(pd.Series(["236220", "", "4x1"])) == ["23", UNKNOWN, UNKNOWN]


def test_rare_values_are_folded_into_other():
    assert group_rare(pd.Series(["a", "a", "b"]), 2).tolist() == ["a", "a", OTHER]
    assert group_rare(pd.Series(["a", "b"]), 1).tolist() == ["a", "b"]


def test_both_mechanisms_read_the_sector_from_the_shared_definition():
    """A record without usable NAICS digits is UNKNOWN in GPP's columns and in NVDP's OSHA task alike."""
    from dprelease.mechanisms.gpp.data import osha_columns

    frame = pd.DataFrame(
        {"t": ["a", "b", "c"], "n": ["1", "2", "3"], "Primary NAICS": ["236220", "x", ""], "State": ["TEXAS"] * 3}
    )
    cols = osha_columns(frame, text_column="t", label_column="n", regions={"TEXAS": 6})
    assert cols["sector"].tolist() == ["23", UNKNOWN, UNKNOWN]


def test_nvdp_probe_folds_unknown_into_other_while_gpp_keeps_it_as_a_class():
    """The two grouping rules documented in dprelease.core.data.sectors (kept so published figures stay put)."""
    from dprelease.mechanisms.nvdp.probe import sector_labels

    train = ["23"] * 20 + [UNKNOWN] * 25 + ["33"] * 3 + [""] * 2
    y_train, y_test, classes = sector_labels(train, ["23", UNKNOWN, "99"])
    assert classes == ["23", OTHER] and y_test.tolist() == [0, 1, 1]
    assert np.bincount(y_train).tolist() == [20, 30]  # UNKNOWN, rare "33" and the old "" marker: all other
    assert sorted(set(group_rare(pd.Series(train[:48]), 10))) == ["23", OTHER, UNKNOWN]
