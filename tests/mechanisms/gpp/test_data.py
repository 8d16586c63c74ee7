"""Digits composites and the OSHA columns (sector, region, client merging)."""

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from dprelease.core.errors import DataError
from dprelease.mechanisms.gpp.data import digits_composites, load_regions, merge_regions, osha_columns


def test_digits_composites_labels_and_split():
    d = digits_composites(n_train=300, n_test=100, clients=3, seed=0)
    assert d.x_train.shape == (300, 128) and d.x_test.shape == (100, 128)
    assert d.x_train.min() >= 0 and d.x_train.max() <= 1
    assert d.u_train.max() <= 18 and np.array_equal(d.s_train, d.u_train % 2)  # S = parity(U): G.4's flag
    assert set(np.unique(d.client_train)) == {0, 1, 2} and d.n_u == 19 and d.n_s == 2
    again = digits_composites(n_train=300, n_test=100, clients=3, seed=0)
    assert np.array_equal(again.x_test, d.x_test)
    with pytest.raises(DataError):
        digits_composites(n_train=0, n_test=1, clients=1, seed=0)


def test_regions_table_covers_every_state_of_the_bundled_data():
    regions = load_regions(ROOT / "data" / "osha_regions.csv")
    states = pd.read_csv(ROOT / "data" / "osha_sir_2015_2016.csv.gz", usecols=["State"], dtype=str)["State"]
    assert set(states.str.strip().str.upper()) <= set(regions)
    assert set(regions.values()) == set(range(1, 11))


def test_merge_regions_keeps_at_least_min_rows_per_client():
    ids, names = merge_regions({1: 500, 2: 400, 9: 30, 10: 40}, 100)
    assert names == ["region 1", "regions 2+9+10"] and ids[9] == ids[10] == ids[2] == 1
    ids, names = merge_regions({1: 500, 9: 60, 10: 50}, 100)
    assert names == ["region 1", "regions 9+10"]


def test_osha_columns_refuse_missing_columns_and_unknown_states():
    frame = pd.DataFrame({"t": ["x"], "n": ["1"], "Primary NAICS": ["236"], "State": ["ATLANTIS"]})
    with pytest.raises(DataError, match="no OSHA region"):
        osha_columns(frame, text_column="t", label_column="n", regions={"TEXAS": 6})
    with pytest.raises(DataError, match="needs column"):
        osha_columns(frame.drop(columns="State"), text_column="t", label_column="n", regions={})
