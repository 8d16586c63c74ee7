"""One run per project root, and short critical sections shared between processes.

Both are ``flock`` locks on a file, so the kernel releases them when the holder dies (crash, SIGKILL):
a lock can never be left behind. The root lock records who holds it, so a second run says plainly
whom it is waiting for instead of mixing its results with the first run's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from dprelease.core.errors import OneLineError

ROOT_LOCK = ".dprelease.lock"


class Busy(OneLineError):
    """Another run holds the project root."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid', '?')} ({info.get('command', '?')}), since {since}"


@contextlib.contextmanager
def root_lock(root: str | Path, command: str | None = None) -> Iterator[None]:
    """Hold the project root for this run; :class:`Busy` (one line naming the holder) if taken."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / ROOT_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(
                f"{root.resolve()} is in use by another dprelease run: {_holder(path)}; "
                "wait for it to finish or use another --root"
            ) from None
        info = {"pid": os.getpid(), "command": command or " ".join(sys.argv)[:200], "since": time.time()}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the flock


@contextlib.contextmanager
def file_lock(path: str | Path, timeout_s: float = 120.0) -> Iterator[None]:
    """Exclusive section across processes (e.g. creating the MLflow database); waits up to ``timeout_s``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Busy(f"{path}: still locked by another process after {timeout_s:.0f} s") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)
