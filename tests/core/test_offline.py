"""dprelease.core.offline: the offline switches; an explicit environment value wins."""

from __future__ import annotations

import os

from dprelease.core import offline

EXPECTED = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


# offline ------------------------------------------------------------------------------------------
def test_switches_are_the_documented_ones():
    assert offline.SWITCHES == EXPECTED


def test_apply_sets_unset_switches(monkeypatch):
    for key in EXPECTED:
        monkeypatch.delenv(key, raising=False)
    offline.apply()
    for key, value in EXPECTED.items():
        assert os.environ[key] == value


def test_apply_keeps_explicit_values(monkeypatch):
    for key in EXPECTED:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "")  # set, even if empty: still explicit
    offline.apply()
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"
    assert os.environ["TRANSFORMERS_OFFLINE"] == ""
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"  # the unset one is still switched on


def test_apply_is_idempotent(monkeypatch):
    for key in EXPECTED:
        monkeypatch.delenv(key, raising=False)
    offline.apply()
    before = {k: os.environ[k] for k in EXPECTED}
    offline.apply()
    assert {k: os.environ[k] for k in EXPECTED} == before


def test_quiet_applies_switches_too(monkeypatch):
    for key in EXPECTED:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    offline.quiet()
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"
