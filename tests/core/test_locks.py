"""locks: the project-root lock and the short cross-process file lock (flock: released by the kernel)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dprelease.core.errors import OneLineError
from dprelease.core.locks import ROOT_LOCK, Busy, file_lock, root_lock

TIMEOUT = 900  # seconds a helper process may take before the test fails (generous: a loaded machine; every wait
#               returns when the process does)


def _run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=TIMEOUT
    )


def _try_root_lock(root: Path) -> subprocess.CompletedProcess:
    """Another process tries to take the root lock; prints BUSY:<message> or ACQUIRED."""
    return _run_child(f"""
        from dprelease.core.locks import Busy, root_lock
        try:
            with root_lock({str(root)!r}, command="second run"):
                print("ACQUIRED")
        except Busy as err:
            print("BUSY:" + str(err))
    """)


def _holder(code_inside: str, lock_expr: str) -> subprocess.Popen:
    """A child process that takes a lock, prints READY and then runs ``code_inside`` (e.g. sleeps)."""
    code = textwrap.dedent(f"""
        import sys, time
        from dprelease.core.locks import file_lock, root_lock
        with {lock_expr}:
            print("READY", flush=True)
            {code_inside}
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "READY":  # pragma: no cover - only on failure
        proc.kill()
        raise AssertionError(f"holder did not start: {line!r} {proc.stderr.read()}")
    return proc


def test_busy_is_a_one_line_error():
    err = Busy("a\n  b\tc")
    assert isinstance(err, OneLineError) and isinstance(err, ValueError)
    assert str(err) == "a b c"


def test_root_lock_held_here_blocks_another_process(tmp_path):
    root = tmp_path / "proj"
    with root_lock(root, command="dprelease run --first"):
        info = json.loads((root / ROOT_LOCK).read_text(encoding="utf-8"))
        assert info["pid"] == os.getpid() and info["command"] == "dprelease run --first"
        res = _try_root_lock(root)
        assert res.returncode == 0, res.stderr
        out = res.stdout.strip()
        assert out.startswith("BUSY:"), out
        msg = out[len("BUSY:") :]
        assert "\n" not in msg
        assert f"pid {os.getpid()}" in msg
        assert "(dprelease run --first)" in msg
        assert str(root.resolve()) in msg and "--root" in msg
    # released (and the holder record emptied) once the block exits
    assert (root / ROOT_LOCK).read_text(encoding="utf-8") == ""
    res = _try_root_lock(root)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ACQUIRED"


def test_root_lock_creates_the_root_and_defaults_the_command_to_argv(tmp_path):
    root = tmp_path / "a" / "b"
    before = time.time()
    with root_lock(root):
        info = json.loads((root / ROOT_LOCK).read_text(encoding="utf-8"))
        assert info["command"] == " ".join(sys.argv)[:200]
        assert info["pid"] == os.getpid()
        assert before <= info["since"] <= time.time()  # taken in between (whatever the machine's load)


def test_root_lock_in_the_same_process_is_also_busy(tmp_path):
    # flock locks belong to the open file: a second open in the same process conflicts too
    with root_lock(tmp_path, command="outer"):
        with pytest.raises(Busy, match=r"pid \d+ \(outer\)"):
            with root_lock(tmp_path, command="inner"):
                pass  # pragma: no cover
    with root_lock(tmp_path, command="again"):  # and the failed attempt left nothing held
        pass


def test_root_lock_released_when_the_body_raises(tmp_path):
    with pytest.raises(RuntimeError):
        with root_lock(tmp_path, command="failing"):
            raise RuntimeError("boom")
    res = _try_root_lock(tmp_path)
    assert res.stdout.strip() == "ACQUIRED", res.stderr


def test_root_lock_of_a_sigkilled_holder_is_free_again(tmp_path):
    proc = _holder("time.sleep(60)", f"root_lock({str(tmp_path)!r}, command='doomed run')")
    try:
        with pytest.raises(Busy) as err:
            with root_lock(tmp_path, command="me"):
                pass  # pragma: no cover
        assert f"pid {proc.pid} (doomed run)" in str(err.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    # the dead holder's record is still in the file (no cleanup ran), but the kernel released the flock
    assert json.loads((tmp_path / ROOT_LOCK).read_text(encoding="utf-8"))["pid"] == proc.pid
    with root_lock(tmp_path, command="after the crash"):
        info = json.loads((tmp_path / ROOT_LOCK).read_text(encoding="utf-8"))
        assert info["pid"] == os.getpid() and info["command"] == "after the crash"


def test_file_lock_times_out_while_another_process_holds_it(tmp_path):
    path = tmp_path / "sub" / ".x.lock"
    proc = _holder("time.sleep(60)", f"file_lock({str(path)!r})")
    try:
        start = time.monotonic()
        with pytest.raises(Busy) as err:
            with file_lock(path, timeout_s=0.5):
                pass  # pragma: no cover
        assert time.monotonic() - start >= 0.5  # it waited its timeout (then gave up: the holder sleeps on)
        assert proc.poll() is None  # refused because the holder still held it
        assert str(path) in str(err.value) and "still locked by another process" in str(err.value)
        assert "\n" not in str(err.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()
    with file_lock(path, timeout_s=0.5):  # free once the holder is gone
        pass


def test_file_lock_waits_for_a_short_holder(tmp_path):
    path = tmp_path / ".y.lock"
    proc = _holder("time.sleep(0.4)", f"file_lock({str(path)!r})")
    try:
        with file_lock(path, timeout_s=TIMEOUT):  # taken once the holder lets go (Busy only if it never does)
            assert proc.wait(timeout=TIMEOUT) == 0  # ... which it did: it has ended
    finally:
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0


def test_file_lock_is_exclusive_between_sequential_users(tmp_path):
    path = tmp_path / "deep" / "dir" / ".z.lock"
    with file_lock(path, timeout_s=0.2):
        assert path.is_file()
        res = _run_child(f"""
            from dprelease.core.locks import Busy, file_lock
            try:
                with file_lock({str(path)!r}, timeout_s=0.2):
                    print("ACQUIRED")
            except Busy as err:
                print("BUSY:" + str(err))
        """)
        assert res.stdout.strip().startswith("BUSY:"), res.stderr
        assert "after 0 s" in res.stdout  # timeout formatted with no decimals
    with file_lock(path, timeout_s=0.2):
        pass
