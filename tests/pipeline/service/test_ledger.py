"""The privacy ledger: salted record hashes and basic composition (golden numbers by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.pipeline.service.ledger import Ledger, record_hashes, report_table

SALT = b"s" * 32


def _h(*ids: int) -> np.ndarray:
    return record_hashes([f"narrative {i}" for i in ids], ["111"] * len(ids), SALT)


def test_hashes_are_salted_deduplicated_and_whitespace_insensitive():
    a = record_hashes(["A  worker fell.", "cut"], ["1", "2"], SALT)
    b = record_hashes(["cut", "A worker fell. "], ["2", "1"], SALT)
    assert a.shape == (2, 16) and (a == b).all()  # order and spacing do not matter
    assert len(record_hashes(["x", "x"], ["1", "1"], SALT)) == 1  # the same record once
    assert not (record_hashes(["x"], ["1"], SALT) == record_hashes(["x"], ["1"], b"t" * 32)).all()
    assert not (record_hashes(["x"], ["1"], SALT) == record_hashes(["x"], ["2"], SALT)).all()
    with pytest.raises(ValueError, match="2 narratives but 1 labels"):
        record_hashes(["a", "b"], ["1"], SALT)


def test_cumulative_is_the_worst_record_sum_over_published_versions(tmp_path):
    led = Ledger(tmp_path / "ledger")
    led.add("1", 2.0, _h(1, 2, 3))
    led.publish("1")
    led.add("2", 3.0, _h(3, 4))  # shares record 3 with v1
    led.add("3", 5.0, _h(7, 8))  # shares nothing
    # v2: record 3 is in v1 (published, 2) and v2 (3) -> 5; record 4 only v2 -> 3; max 5
    assert led.cumulative("2") == pytest.approx(5.0)
    assert led.cumulative("3") == pytest.approx(5.0)  # no overlap: its own ε
    assert led.cumulative("1") == pytest.approx(2.0)  # v2 is not published: it does not count
    led.publish("2")
    led.add("4", 1.0, _h(1, 3, 9))  # record 3: v1 + v2 + v4 = 6; record 1: v1 + v4 = 3
    assert led.cumulative("4") == pytest.approx(6.0)
    assert led.cumulative("1") == pytest.approx(5.0)  # record 3 is now in v1 and v2
    assert led.overlapping("4") == ["1", "2"]
    report = {r["version"]: r for r in led.report()}
    assert report["4"]["cumulative_epsilon"] == pytest.approx(6.0) and report["3"]["overlaps"] == []


def test_ledger_persists_and_keeps_no_text(tmp_path):
    led = Ledger(tmp_path / "ledger")
    salt = led.salt
    assert len(salt) == 32 and Ledger(tmp_path / "ledger").salt == salt  # made once
    led.add("1", 2.5, record_hashes(["secret narrative about a worker"], ["111"], salt), snapshot="abc")
    again = Ledger(tmp_path / "ledger")
    assert again.entry("1").epsilon == 2.5 and again.entry("1").records == 1
    assert (tmp_path / "ledger").stat().st_mode & 0o077 == 0  # owner-only folder
    for f in (tmp_path / "ledger").iterdir():
        assert b"secret" not in f.read_bytes()
    with pytest.raises(ValueError, match="already in the privacy ledger"):
        again.add("1", 1.0, _h(1))
    with pytest.raises(KeyError):
        again.entry("9")


def test_report_table_shows_aggregates_per_version(tmp_path):
    led = Ledger(tmp_path / "ledger")
    led.add("1", 2.0, _h(1, 2, 3))
    led.publish("1")
    led.add("2", 1.5, _h(3, 4))
    lines = report_table(led.report()).splitlines()
    assert lines[2:4] == [
        "| 1 | 2.000 | 3 | yes | — | 2.000 |",
        "| 2 | 1.500 | 2 | no | 1 | 3.500 |",
    ]  # record 3 is in both: 2.0 + 1.5
    assert lines[4] == "" and lines[5].startswith("cumulative ε: per record")


def test_a_version_without_an_epsilon_spends_an_unbounded_budget_and_persists(tmp_path):
    led = Ledger(tmp_path / "ledger")
    led.add("1", 2.0, _h(1, 2))
    led.publish("1")
    led.add("2", float("inf"), _h(2, 3))  # ppm_uncertified: no ε, so nothing bounds what its records spent
    assert led.cumulative("2") == float("inf") and led.cumulative("1") == pytest.approx(2.0)
    assert Ledger(tmp_path / "ledger").cumulative("2") == float("inf")  # JSON round trip (Infinity)
    assert "| 2 | inf |" in report_table(led.report())
