"""Snapshots cut by EventDate: growing windows, same rows → same bytes, both file formats."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dprelease.errors import DataError
from dprelease.service.snapshots import cut_windows, snapshot_id

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "sir_2015_2017_first28_original_format.csv"


def _bundled(tmp_path) -> Path:
    path = tmp_path / "sir.csv"
    pd.DataFrame({"EventDate": ["2015-01-02", "2015-12-31", "2016-03-01", "2016-12-30"],
                  "Final Narrative": ["a", "b", "c", "d"], "Nature": ["1", "2", "1", "2"]}).to_csv(path, index=False)
    return path


def test_windows_grow_and_are_byte_stable(tmp_path):
    files = cut_windows(_bundled(tmp_path), ["2016-06-30", "2015-12-31"], tmp_path / "w")
    assert [f.name for f in files] == ["sir_to_2015-12-31.csv.gz", "sir_to_2016-06-30.csv.gz"]
    assert [len(pd.read_csv(f)) for f in files] == [2, 3]                # end dates inclusive
    ids = [snapshot_id(f) for f in files]
    again = cut_windows(_bundled(tmp_path), ["2015-12-31"], tmp_path / "w2")
    assert snapshot_id(again[0]) == ids[0] and ids[0].startswith("sir_to_2015-12-31-")


def test_original_osha_format_dates(tmp_path):
    rows = pd.read_csv(FIXTURE, dtype=str)
    (f,) = cut_windows(FIXTURE, ["2015-01-03"], tmp_path)
    cut = pd.read_csv(f, dtype=str)
    assert list(cut.columns) == list(rows.columns)
    assert 0 < len(cut) <= len(rows)
    assert (pd.to_datetime(cut["EventDate"], format="mixed") <= "2015-01-03").all()


def test_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"EventDate": ["2015-01-01", "soon"], "x": ["a", "b"]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"EventDate 'soon' in data row 2 is not a date"):
        cut_windows(bad, ["2015-12-31"], tmp_path / "w")
    with pytest.raises(DataError, match="no row has EventDate on or before 2014-01-01"):
        cut_windows(_bundled(tmp_path), ["2014-01-01"], tmp_path / "w")
    with pytest.raises(DataError, match="not a date"):
        cut_windows(_bundled(tmp_path), ["someday"], tmp_path / "w")
    nodate = tmp_path / "nodate.csv"
    pd.DataFrame({"x": ["a"]}).to_csv(nodate, index=False)
    with pytest.raises(DataError, match="no EventDate column"):
        cut_windows(nodate, ["2015-12-31"], tmp_path / "w")
