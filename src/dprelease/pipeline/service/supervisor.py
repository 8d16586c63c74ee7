"""The processes ``make serve`` runs: a Prefect server on 127.0.0.1, its work pools and deployments (made by
a command the caller names), and one worker — started, health-checked and stopped by PID.

Everything is started as ``python -m …`` in its own process group (stopped as a whole) with this
project's Prefect home (``.prefect/``: the server's database too), offline. The PIDs, port and API URL are
kept in ``.prefect/serve/pids.json`` (each process's output in ``<name>.log`` beside it). Prefect is never
imported here: it runs as subprocesses, and its REST API is read with the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dprelease.core.errors import OneLineError
from dprelease.pipeline import prefect_home

HOST = "127.0.0.1"
STATE = Path(".prefect") / "serve"
PIDS = "pids.json"
FLOW, SCHEDULED, FULL = "retrain", "scheduled", "full-backend"  # the flow and its two deployments


class ServeError(OneLineError):
    """Serving cannot start (already serving, port in use, a process that did not come up)."""


def api_url(port: int) -> str:
    return f"http://{HOST}:{port}/api"


def env_for(root: Path, port: int, *, code: Path) -> dict:
    """The environment of everything ``serve`` starts: this project's Prefect home and server, offline;
    ``code`` (where ``flows/`` and ``tasks/`` live) on the Python path, with its ``src/`` when it has one
    (the package of this checkout, whichever one the environment has installed)."""
    path = [str(code)] + ([str(code / "src")] if (code / "src" / "dprelease").is_dir() else [])
    return os.environ | {
        "PREFECT_HOME": str((root / ".prefect").resolve()),
        "PREFECT_API_URL": api_url(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": os.environ.get("DPRELEASE_SERVE_UI", "true"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join(path),
    }


def spawn(root: Path, name: str, args: list[str], env: dict) -> int:
    """``python -m ARGS`` in ``root``, detached in its own process group, output to ``<name>.log``; its PID."""
    log = open(root / STATE / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(
        [sys.executable, "-m", *args], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )  # own process group: stopped as a whole
    log.close()  # the child has its own copy
    return proc.pid


def run_module(root: Path, port: int, args: list[str], *, code: Path) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in the serve environment, waited for (its output captured)."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=root, env=env_for(root, port, code=code), capture_output=True, text=True
    )


def healthy(port: int) -> bool:
    """Whether the Prefect API on ``port`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{api_url(port)}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:``port`` (a socket left in TIME_WAIT does not count:
    the server binds with SO_REUSEADDR as this probe does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def read_state(root: Path) -> dict:
    path = root / STATE / PIDS
    return json.loads(path.read_text()) if path.is_file() else {}


def write_state(root: Path, state: dict) -> None:
    path = root / STATE / PIDS
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (exited, not yet reaped by a parent other than this process) does not."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:  # no /proc (not Linux): signal 0 is all there is
        return True


def clean_stale(root: Path) -> bool:
    """Remove a PID file none of whose processes is alive (left by a crash or a reboot); True if removed."""
    path = root / STATE / PIDS
    if not path.is_file() or any(alive(pid) for pid in read_state(root).get("pids", {}).values()):
        return False
    path.unlink()
    return True


def start(
    root: Path,
    *,
    port: int,
    work_pool: str,
    deploy: list[str],
    code: Path,
    timeout_s: float = 120.0,
    before_worker: Callable[[], dict] | None = None,
) -> dict:
    """The server (waited for until healthy), then ``python -m DEPLOY`` against it (pools and deployments),
    then ``before_worker()`` (its result under ``"before_worker"``: ``make serve`` registers the current
    release there, so before any scheduled run can start), then one process worker of ``work_pool``.
    Returns the state written to ``pids.json`` (with timings). Refused in one line when already serving or
    when the port is taken; a failed step stops what started."""
    clean_stale(root)
    if read_state(root):
        raise ServeError(f"already serving ({root / STATE / PIDS}); run `make serve-stop`")
    if port_in_use(port):
        raise ServeError(f"port {port} on {HOST} is in use (service.port): stop what listens there or set another port")
    prefect_home.make_private(root / ".prefect", root / ".prefect" / "prefect.db")  # its database: operator-only
    (root / STATE).mkdir(parents=True, exist_ok=True)
    env = env_for(root, port, code=code)
    t0 = time.perf_counter()
    state = {"port": port, "url": api_url(port), "pids": {}}
    state["pids"]["server"] = spawn(
        root, "server", ["prefect", "server", "start", "--host", HOST, "--port", str(port)], env
    )
    write_state(root, state)
    while not healthy(port):
        if time.perf_counter() - t0 > timeout_s or not alive(state["pids"]["server"]):
            stop(root, model_server=False)
            raise ServeError(f"the Prefect server did not start (see {root / STATE / 'server.log'})")
        time.sleep(0.5)
    state["timings"] = {"server_start_s": round(time.perf_counter() - t0, 2)}
    t1 = time.perf_counter()
    done = run_module(root, port, deploy, code=code)
    if done.returncode:
        stop(root, model_server=False)
        raise ServeError(f"work pools / deployments: {' '.join((done.stderr or done.stdout).split())[-400:]}")
    state["timings"]["deploy_s"] = round(time.perf_counter() - t1, 2)
    if before_worker is not None:
        t2 = time.perf_counter()
        try:
            state["before_worker"] = before_worker()
        except BaseException:
            stop(root, model_server=False)
            raise
        state["timings"]["before_worker_s"] = round(time.perf_counter() - t2, 2)
    state["pids"]["worker"] = spawn(
        root, "worker", ["prefect", "worker", "start", "--pool", work_pool, "--type", "process"], env
    )
    write_state(root, state)
    return state


MODEL = "model.json"  # `make serve-model`'s scoring server records its pid here (pipeline/service/model_server.py)


def stop(root: Path, *, grace_s: float = 15.0, model_server: bool = True) -> list[int]:
    """SIGTERM every process group ``start`` made (worker first) and, with ``model_server``, the model server
    ``make serve-model`` started (its pid in :data:`MODEL`); SIGKILL what is left after ``grace_s``; the PID files
    are removed. Returns the PIDs that were alive."""
    state = read_state(root)
    groups = [state.get("pids", {}).get(k) for k in ("worker", "server")]
    groups = [pid for pid in groups if pid and alive(pid)]  # `start`'s children: each leads its own process group
    model, single = root / STATE / MODEL, []  # the model server runs in make's process group: itself only
    with contextlib.suppress(OSError, ValueError, AttributeError):
        pid = json.loads(model.read_text(encoding="utf-8")).get("pid") if model_server else None
        if isinstance(pid, int) and pid != os.getpid() and alive(pid):
            single.append(pid)
    pids = groups + single
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, sig) if pid in groups else os.kill(pid, sig)
        _wait_gone(pids, grace_s if sig == signal.SIGTERM else 10.0)  # gone once torn down (and reaped)
    (root / STATE / PIDS).unlink(missing_ok=True)
    if model_server:
        model.unlink(missing_ok=True)
    return pids


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Until none of ``pids`` is alive, at most ``timeout_s``; a child of this process is reaped on the way (a
    zombie still answers a signal)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        if not any(alive(pid) for pid in pids):
            return
        time.sleep(0.1)


def api(url: str, path: str, body: dict | None = None):
    """One call of the Prefect server's REST API (JSON in and out)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/{path}", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def flow_runs(url: str, deployment: str = SCHEDULED) -> list[dict]:
    """The runs of ``retrain/<deployment>``: name, state (type, name and message: why a run was cancelled),
    whether the scheduler made it, start and end."""
    dep = api(url, f"deployments/name/{FLOW}/{deployment}")
    runs = api(url, "flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [dep["id"]]}}, "limit": 200})
    return [
        {
            "id": r["id"],
            "name": r["name"],
            "state": r["state_type"],
            "state_name": r.get("state_name"),
            "message": (r.get("state") or {}).get("message"),
            "auto_scheduled": r["auto_scheduled"],
            "expected_start": r["expected_start_time"],
            "start": r["start_time"],
            "end": r["end_time"],
        }
        for r in runs
    ]


def run_counts(url: str) -> dict:
    """The scheduled deployment's runs by state (scheduled by the server's scheduler vs. triggered)."""
    counts: dict = {}
    for r in flow_runs(url):
        key = f"{r['state'].lower()}{'' if r['auto_scheduled'] else ' (triggered)'}"
        counts[key] = counts.get(key, 0) + 1
    return counts
