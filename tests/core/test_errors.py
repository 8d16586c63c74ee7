"""dprelease.core.errors: the one-line ValueErrors every entry point prints (exit code 2)."""

from __future__ import annotations

import pytest

from dprelease.core import errors

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
    from dprelease.core.config import ConfigError
    from dprelease.core.data.records import DataError

    assert ConfigError is errors.ConfigError
    assert DataError is errors.DataError


def test_an_oserror_is_one_line_naming_the_file_and_what_to_do():
    import errno

    full = errors.os_error_line(OSError(errno.ENOSPC, "No space left on device", "release/model.safetensors"))
    assert full.startswith("release/model.safetensors: No space left on device: free some space and run again")
    assert "\n" not in full and "nothing was released" in full
    assert "make it writable" in errors.os_error_line(PermissionError(errno.EACCES, "Permission denied", "metrics"))
    assert errors.os_error_line(OSError("odd\nerror")).startswith("a file: odd error: fix it")
