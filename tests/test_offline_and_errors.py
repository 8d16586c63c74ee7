"""dprelease.offline (offline switches; an explicit environment value wins) and dprelease.errors
(one-line ValueErrors)."""

from __future__ import annotations

import os

import pytest

from dprelease import errors, offline

EXPECTED = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


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


# errors -------------------------------------------------------------------------------------------
ERROR_CLASSES = [errors.OneLineError, errors.ConfigError, errors.DataError, errors.ReleaseError]


@pytest.mark.parametrize("cls", ERROR_CLASSES)
def test_error_classes_are_one_line_value_errors(cls):
    assert issubclass(cls, ValueError)
    assert issubclass(cls, errors.OneLineError)
    err = cls("  first line\n\tsecond   line\r\n third  ")
    assert str(err) == "first line second line third"
    assert err.args == ("first line second line third",)
    with pytest.raises(ValueError, match="^first line second line third$"):
        raise err


@pytest.mark.parametrize("cls", ERROR_CLASSES)
def test_error_message_from_non_string(cls):
    assert str(cls(Exception("a\nb"))) == "a b"
    assert str(cls(42)) == "42"
    assert str(cls("")) == ""


def test_error_classes_are_distinct_siblings():
    assert not issubclass(errors.ConfigError, errors.DataError)
    assert not issubclass(errors.DataError, errors.ReleaseError)
    assert not issubclass(errors.ReleaseError, errors.ConfigError)


def test_reexported_classes_are_the_same_objects():
    from dprelease.config import ConfigError
    from dprelease.data.records import DataError

    assert ConfigError is errors.ConfigError
    assert DataError is errors.DataError
