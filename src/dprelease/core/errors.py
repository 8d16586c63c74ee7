"""The one-line errors every entry point prints instead of a traceback (exit code 2)."""

from __future__ import annotations


class OneLineError(ValueError):
    """Base: the message is one line naming the problem."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ConfigError(OneLineError):
    """A problem in params.yaml or a command-line override."""


class DataError(OneLineError):
    """Bad input data (file, column, rows)."""


class ReleaseError(OneLineError):
    """A problem with a release folder or predict input."""
