"""The one-line errors every entry point prints instead of a traceback (exit code 2)."""

from __future__ import annotations

import errno


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


def os_error_line(err: OSError) -> str:
    """An OSError met while running (a full disk at publish, a folder made read-only) as one line: which file, the
    reason, what to do. Nothing is half-written: every output is written to a temporary sibling and renamed into
    place, so a re-run starts clean."""
    where = err.filename or "a file"
    why = err.strerror or " ".join(str(err).split()) or type(err).__name__
    todo = {
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space (disk quota)",
        errno.EACCES: "make it writable",
        errno.EPERM: "make it writable",
        errno.EROFS: "use a writable file system",
    }.get(err.errno, "fix it")
    return (
        f"{where}: {why}: {todo} and run again (nothing was released; a re-run resumes after the last finished stage)"
    )
