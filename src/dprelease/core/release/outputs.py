"""What `predict` and `sanitize` may write, and where: they never harm the user's files.

* The output path must be new, or (`predict --force`, and `sanitize`) an existing plain file that is not the input
  (nor a hard link to it) and not inside the release folder. A directory, a symbolic link, a device, a FIFO or a socket at the path is
  refused, never replaced: ``--output /dev/null`` as root must not replace the system's node.
* `predict` adds its columns (``code``, ``title``, ``probability``; ``--column-prefix`` puts a prefix on all
  three) to the input's; an input that already has a column of those names is refused, never overwritten.
* An input with no data rows is an error: nothing coded, nothing written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dprelease.core.errors import ReleaseError

KINDS = {
    stat.S_ISLNK: "a symbolic link",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISSOCK: "a socket",
}


def check_output(output: str | Path, *, input_file: str | Path, release: str | Path, replace: bool = True) -> Path:
    """``output``, or a one-line :class:`ReleaseError` when writing there would replace something that is
    not a plain output file (see the module docstring); ``replace=False`` (`predict` without ``--force``): any
    existing file."""
    output = Path(output)
    try:
        st = os.lstat(output)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ReleaseError(f"{output}: cannot use the output path ({e.strerror or e})") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ReleaseError(f"{output}: output path is an existing directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in KINDS.items() if test(st.st_mode)), "not a regular file")
            raise ReleaseError(
                f"{output}: output path exists and is {kind}; refusing to replace it (give a new file name)"
            )
        try:
            same = os.path.samefile(output, input_file)
        except OSError:
            same = False
        if same:
            raise ReleaseError(
                f"{output}: output path is the input file itself; give another name (the input is never overwritten)"
            )
    home = Path(release).resolve()
    if home.is_dir() and (output.parent.resolve() == home or home in output.parent.resolve().parents):
        raise ReleaseError(f"{output}: output path is inside the release folder {release}; write it elsewhere")
    if st is not None and not replace:
        raise ReleaseError(f"{output}: exists; refusing to replace it (give a new file name, or --force to replace it)")
    return output


def new_columns(existing, names: tuple[str, ...], prefix: str, input_file: str | Path) -> list[str]:
    """The output's new column names (``prefix`` + name), refused if any is already an input column."""
    out = [f"{prefix}{name}" for name in names]
    clash = [c for c in out if c in set(map(str, existing))]
    if clash:
        raise ReleaseError(
            f"{input_file}: already has column(s) {', '.join(clash)}, which predict would "
            "overwrite; rename them, or give --column-prefix (e.g. --column-prefix predicted_)"
        )
    return out


def require_rows(n: int, input_file: str | Path) -> None:
    if n == 0:
        raise ReleaseError(f"{input_file}: no narratives (a header and no data rows): nothing done, nothing written")
