"""The serve supervisor (dprelease.pipeline.service.supervisor) with real processes, sockets and a stand-in HTTP API:
a stale PID file is cleaned, a live one refuses a second start, a port in use is a one-line error (nothing
started), stop ends whole process groups (SIGKILL after the grace for one that ignores SIGTERM), the health
check and the run counts read the API. The real Prefect server: tests/flows/test_serve.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dprelease.pipeline.service import supervisor as sv

CODE = Path(__file__).resolve().parents[3]
WAIT_S = 900  # how long a wait for a process may last before the test fails (each returns as soon as it happens)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def _start(root: Path, port: int) -> dict:
    return sv.start(root, port=port, work_pool="cpu", deploy=["flows.serve", "_deploy"], code=CODE, timeout_s=5)


def _state(root: Path, **pids: int) -> Path:
    (root / sv.STATE).mkdir(parents=True, exist_ok=True)
    sv.write_state(root, {"port": 1, "url": sv.api_url(1), "pids": pids})
    return root / sv.STATE / sv.PIDS


def test_alive_tells_a_running_process_from_an_ended_one():
    assert sv.alive(os.getpid()) and not sv.alive(_dead_pid())


def test_stale_pid_file_is_cleaned_and_a_live_one_kept(tmp_path):
    assert not sv.clean_stale(tmp_path)  # nothing to clean
    path = _state(tmp_path, server=_dead_pid(), worker=_dead_pid())
    assert sv.clean_stale(tmp_path) and not path.exists()
    _state(tmp_path, server=_dead_pid(), worker=os.getpid())  # one still runs: serving
    assert not sv.clean_stale(tmp_path) and path.exists()
    with pytest.raises(sv.ServeError, match=r"^already serving \(.*pids\.json\); run `make serve-stop`$"):
        _start(tmp_path, 1)
    assert sv.read_state(tmp_path)["pids"]["worker"] == os.getpid()  # left as it was


def test_port_in_use_is_one_line_and_starts_nothing(tmp_path):
    path = _state(tmp_path, server=_dead_pid())  # a crash's leftover
    with _listening() as busy:
        port = busy.getsockname()[1]
        assert sv.port_in_use(port)
        with pytest.raises(sv.ServeError) as err:
            _start(tmp_path, port)
    assert (
        str(err.value)
        == f"port {port} on 127.0.0.1 is in use (service.port): stop what listens there or set another port"
    )
    assert not path.exists() and not list((tmp_path / sv.STATE).glob("*.log"))  # stale file gone, nothing spawned
    assert not sv.port_in_use(port)  # free again once closed


def test_stop_ends_process_groups_and_kills_one_ignoring_sigterm(tmp_path):
    # ignores SIGTERM; says so once it is ready, and again if it ever sleeps its time out (it must not: stop kills it)
    (tmp_path / "stubborn.py").write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(600)\nprint('slept', flush=True)\n",
        encoding="utf-8",
    )
    (tmp_path / sv.STATE).mkdir(parents=True)
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    worker = sv.spawn(tmp_path, "worker", ["stubborn"], env)
    server = sv.spawn(tmp_path, "server", ["http.server", "--bind", "127.0.0.1", "0"], env)
    log = tmp_path / sv.STATE / "worker.log"
    deadline = time.monotonic() + WAIT_S
    while "ready" not in log.read_text() and time.monotonic() < deadline:  # its SIGTERM handler is set
        time.sleep(0.1)
    assert "ready" in log.read_text(), log.read_text()
    _state(tmp_path, server=server, worker=worker)
    try:
        assert sorted(sv.stop(tmp_path, grace_s=1.0)) == sorted([worker, server])
        assert not sv.alive(worker) and not sv.alive(server)  # gone when stop returns (the killed one reaped too)
        assert "slept" not in log.read_text()  # killed after the grace, not waited out
        assert _ended(worker) and _ended(server)
        assert not (tmp_path / sv.STATE / sv.PIDS).exists()
        assert sv.stop(tmp_path) == []  # nothing left to stop
    finally:
        for pid in (worker, server):  # never leave them behind, whatever failed
            if sv.alive(pid):
                os.killpg(pid, 9)


def _ended(pid: int, timeout: float = WAIT_S) -> bool:
    """Reap ``pid`` (a child of this test: a zombie would read as alive) once it exits; False if it runs on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:  # already reaped
            return True
        time.sleep(0.05)
    return False


class _API(BaseHTTPRequestHandler):
    """A stand-in for the few Prefect REST routes the supervisor reads."""

    RUNS = [
        {"id": "r1", "name": "retrain a", "state_type": "COMPLETED", "auto_scheduled": True},
        {"id": "r2", "name": "retrain b", "state_type": "COMPLETED", "auto_scheduled": False},
        {"id": "r3", "name": "retrain c", "state_type": "SCHEDULED", "auto_scheduled": True},
        {
            "id": "r4",
            "name": "retrain d",
            "state_type": "CANCELLED",
            "state_name": "Cancelled",
            "state": {"message": "Deployment concurrency limit reached."},
            "auto_scheduled": True,
        },
    ]
    seen: list = []

    def _json(self, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/api/health":
            self._json(True)
        elif self.path == f"/api/deployments/name/{sv.FLOW}/{sv.SCHEDULED}":
            self._json({"id": "dep-1"})
        else:
            self.send_error(404)

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        times = {"expected_start_time": None, "start_time": None, "end_time": None}
        self._json([r | times for r in self.RUNS] if self.path == "/api/flow_runs/filter" else [])

    def log_message(self, *args):  # quiet
        pass


def test_health_and_run_counts_read_the_api():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _API)
    port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        assert sv.healthy(port)
        runs = sv.flow_runs(sv.api_url(port))
        assert [r["name"] for r in runs] == ["retrain a", "retrain b", "retrain c", "retrain d"]
        assert runs[3]["message"] == "Deployment concurrency limit reached." and runs[0]["message"] is None
        assert _API.seen[-1] == (
            "/api/flow_runs/filter",
            {"flow_runs": {"deployment_id": {"any_": ["dep-1"]}}, "limit": 200},
        )
        assert sv.run_counts(sv.api_url(port)) == {
            "completed": 1,
            "completed (triggered)": 1,
            "scheduled": 1,
            "cancelled": 1,
        }
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not sv.healthy(port)  # nothing answers now


def test_env_points_prefect_at_this_project(tmp_path):
    env = sv.env_for(tmp_path, 4321, code=CODE)
    assert env["PREFECT_HOME"] == str((tmp_path / ".prefect").resolve())
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:4321/api"
    assert env["PYTHONPATH"] == f"{CODE}{os.pathsep}{CODE / 'src'}"  # flows/, tasks/ and this package
    assert sv.env_for(tmp_path, 1, code=tmp_path)["PYTHONPATH"] == str(tmp_path)  # no src/: the installed one
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


def test_before_worker_runs_after_the_deployments_and_before_the_worker(tmp_path, monkeypatch):
    """``make serve`` registers the current release there: no scheduled run can start before it is done.
    A failure in it stops what started."""
    order = []
    monkeypatch.setattr(sv, "port_in_use", lambda port: False)
    monkeypatch.setattr(sv, "healthy", lambda port: True)
    monkeypatch.setattr(sv, "spawn", lambda root, name, args, env: order.append(name) or os.getpid())
    monkeypatch.setattr(
        sv,
        "run_module",
        lambda root, port, args, code: order.append("deploy") or subprocess.CompletedProcess(args, 0, "", ""),
    )
    state = sv.start(
        tmp_path,
        port=1,
        work_pool="cpu",
        deploy=["x"],
        code=CODE,
        before_worker=lambda: order.append("register") or {"line": "registry: version 1"},
    )
    assert order == ["server", "deploy", "register", "worker"]
    assert state["before_worker"] == {"line": "registry: version 1"} and "before_worker_s" in state["timings"]
    assert sv.read_state(tmp_path)["before_worker"] == {"line": "registry: version 1"}

    (tmp_path / sv.STATE / sv.PIDS).unlink()
    order.clear()
    stopped = []
    monkeypatch.setattr(sv, "stop", lambda root, **kw: stopped.append(root) or [])  # kw: model_server=False

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        sv.start(tmp_path, port=1, work_pool="cpu", deploy=["x"], code=CODE, before_worker=broken)
    assert order == ["server", "deploy"] and stopped == [tmp_path]  # no worker; the server stopped
