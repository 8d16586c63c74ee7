"""Prefect's temporary API server dies with the run that started it, whatever ends that run.

Prefect starts its temporary server as a child process (``python -m uvicorn …``). If the run is
killed (SIGTERM, SIGKILL, OOM), nothing stops that child: servers pile up (~200 MB each). :func:`install`
makes Prefect launch the server through this module instead: ``python -m tasks.server_guard <pid>
<uvicorn args>`` runs uvicorn in-process plus a watcher thread that exits the server as soon as its
parent process is gone (checked every 0.5 s, so no signal from the dying parent is needed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

_installed = False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)  # the run that owned this server is gone


def install() -> None:
    """Route Prefect's temporary-server launch through this guard (idempotent)."""
    global _installed
    if _installed:
        return
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():  # a run against a server (a worker's flow run) starts no temporary one: nothing
        return  # to guard, and Prefect's server code (~4 s to import) is not loaded
    from prefect.server.api import server as srv

    original = srv.SubprocessASGIServer._run_uvicorn_command

    def guarded(self):
        real_popen = subprocess.Popen

        def popen(args, *a, **kw):
            args = list(args)
            if args[1:3] == ["-m", "uvicorn"]:
                args = [args[0], "-m", "tasks.server_guard", str(os.getpid()), *args[3:]]
            return real_popen(args, *a, **kw)

        srv.subprocess.Popen = popen
        try:
            return original(self)
        finally:
            srv.subprocess.Popen = real_popen

    srv.SubprocessASGIServer._run_uvicorn_command = guarded
    _installed = True


def start_early() -> threading.Thread | None:
    """Start Prefect's temporary server now, in a thread: its process imports, opens (on a new project: creates
    and migrates) its database and binds while this process prepares the run; the flow then finds it running.
    None where the run uses a server (``PREFECT_API_URL``): nothing to start. Join the thread before the flow's
    first API call (a second ``start`` while one is under way returns before the server answers); a start that
    failed here is simply tried again, and reported, by the flow's own."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return None
    install()

    def start() -> None:
        from prefect.server.api.server import SubprocessASGIServer

        try:
            SubprocessASGIServer().start()
        except Exception:  # noqa: BLE001 - the flow's own start tries again and reports it
            pass

    thread = threading.Thread(target=start, name="prefect-server-start", daemon=True)
    thread.start()
    return thread


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    sys.argv = ["uvicorn", *sys.argv[2:]]
    from uvicorn.main import main as uvicorn_main

    uvicorn_main()


if __name__ == "__main__":
    main()
