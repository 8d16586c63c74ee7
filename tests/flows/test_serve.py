"""``flows.serve`` end to end, offline: a Prefect server on 127.0.0.1 with its database in the project,
process work pools, the deployments and a worker. The real retrain deployment on a one-minute cron: the
server's scheduler creates its runs, the worker runs one to completion (named after its snapshot, its
progress in the run's logs, a Markdown artifact with ε, F1 and the gate decision), the server logs no
error; then ``serve trigger`` runs it by hand (an unchanged snapshot: Completed ``unchanged: …`` at once,
nothing new registered), and once more while the test holds the project root (Cancelled, the holder named);
everything is stopped by PID. With SQLAlchemy 2.1 under Prefect 3.8.8 the scheduler fails every loop and
no scheduled run ever appears: this test is what sees that. A stand-in retrain that outlasts the cron
shows that runs due meanwhile are cancelled with the reason, never queued."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from conftest import GATED, ROOT, SLICE_DATA, make_root, slice_raw

from dprelease.core.locks import root_lock
from dprelease.pipeline.service import supervisor as sv
from dprelease.pipeline.service.snapshots import snapshot_id
from dprelease.pipeline.service.supervisor import alive, api, flow_runs

EVERY_MINUTE = "* * * * *"
# How long a wait for the server, a run or a process may last before the test fails: generous, for a loaded 2-core
# machine (the cron's next minute, the worker's polling, a real retrain); each wait returns as soon as it happens.
WAIT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(root: Path, *args: str, timeout: float = 2 * WAIT_S) -> subprocess.CompletedProcess:
    env = os.environ | {"DPRELEASE_SERVE_UI": "false", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "flows.serve", *args, "--root", str(root)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_for(what, timeout: float, every: float = 2.0):
    """``what()`` once it is truthy, else None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(every)
    return None


def _trigger(root: Path) -> dict:
    """``serve trigger``'s result; tried again when the one-minute cron's own run was running at that moment
    (the triggered run is then cancelled by the deployment's concurrency limit: what the limit is for)."""
    for _ in range(3):
        run = _serve(root, "trigger", "--timeout", str(WAIT_S))
        assert run.returncode == 0, run.stdout[-1000:] + run.stderr[-2000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        if out["message"] != "Deployment concurrency limit reached.":
            return out
    return out


# Prefect's own server, not this project: on a loaded machine its SQLite store can miss a worker's heartbeat
# write; the server logs it with the database's traceback and carries on (the next heartbeat succeeds)
PREFECT_TRANSIENT = "Worker channel heartbeat persistence failed"


def _log_problems(path: Path) -> list[str]:
    """ERROR and Traceback lines of a log, less Prefect's transient heartbeat error and the traceback under it."""
    problems, transient = [], False
    for line in path.read_text(errors="replace").splitlines():
        if PREFECT_TRANSIENT in line:
            transient = True
            continue
        if line[:2].isdigit() and line[2:3] == ":":  # a new timestamped record ends the transient one
            transient = False
        if not transient and ("ERROR" in line or "Traceback" in line):
            problems.append(line)
    return problems


def test_start_on_a_busy_port_is_one_line_exit_2(tmp_path):
    root = make_root(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        raw = slice_raw(service={"port": port})
        (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        started = _serve(root, "start")
    assert started.returncode == 2 and started.stdout == ""
    assert started.stderr == (
        f"dprelease: error: port {port} on 127.0.0.1 is in use (service.port): "
        "stop what listens there or set another port\n"
    )
    assert not (root / ".prefect" / "serve" / "pids.json").exists()
    assert _serve(root, "trigger").stderr == "dprelease: error: not serving; run `make serve` first\n"


@pytest.mark.slow
def test_scheduled_retrain_fires_completes_and_reports(tmp_path):
    root = make_root(tmp_path)
    shutil.copyfile(ROOT / "prefect.toml", root / "prefect.toml")
    raw = slice_raw(**GATED, service={"port": _free_port(), "audit": False, "cron": EVERY_MINUTE})
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    t0 = time.monotonic()
    started = _serve(root, "start")
    state = json.loads((root / ".prefect" / "serve" / "pids.json").read_text()) if started.returncode == 0 else {}
    logs = root / ".prefect" / "serve"
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        assert "serving: Prefect API http://127.0.0.1:" in started.stdout
        # no release folder yet: `make serve` says so (a release is registered: tests/pipeline/service/test_register_current.py)
        assert "registry: nothing registered (no release in release/ (`make run` makes one))" in started.stdout
        assert (root / ".prefect" / "prefect.db").is_file()  # its database is in the project
        url = state["url"]
        dep = api(url, "deployments/name/retrain/scheduled")
        assert [s["schedule"]["cron"] for s in dep["schedules"]] == [EVERY_MINUTE] and dep["work_pool_name"] == "cpu"

        # the server's scheduler (not this test) creates the runs of the cron
        scheduled = _wait_for(lambda: [r for r in flow_runs(url) if r["auto_scheduled"]], timeout=WAIT_S)
        assert scheduled, f"no scheduled run after {WAIT_S} s; server log: {_log_problems(logs / 'server.log')[-5:]}"
        # ... and the worker runs the first one due to completion
        done = _wait_for(
            lambda: [r for r in flow_runs(url) if r["auto_scheduled"] and r["state"] == "COMPLETED"], timeout=WAIT_S
        )
        assert done, f"no scheduled run completed: {[(r['name'], r['state']) for r in flow_runs(url)]}"
        run_id = done[0]["id"]
        assert (
            done[0]["name"] == f"retrain {snapshot_id(root / SLICE_DATA, artifacts=root / 'artifacts')}"
        )  # named after its snapshot
        fired_s = time.monotonic() - t0

        # its progress lines are the run's Prefect logs
        def messages():
            got = api(url, "logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})
            got = [entry["message"] for entry in got]
            return got if any(m.startswith("registry: version") for m in got) else None

        lines = _wait_for(messages, timeout=WAIT_S)
        assert lines, "the run logged no registry line"
        assert any("versioned with DVC" in m for m in lines)
        assert any(m.startswith("registry: version 1 → promoted") for m in lines), lines
        # the pipeline subflow logs one line per stage
        every = api(url, "logs/filter", {"limit": 200})
        assert any(
            e["message"].startswith("stage draw: ") and e["name"] == "prefect.flow_runs.dprelease" for e in every
        )

        # a Markdown artifact with ε, F1 and the gate decision
        arts = api(url, "artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
        assert [a["key"] for a in arts] == ["retrain-summary"] and arts[0]["type"] == "markdown"
        text = arts[0]["data"]
        retrain = json.loads(next((root / "runs" / "retrain").glob("*/metrics/retrain.json")).read_text())
        reg = retrain["registry"]
        assert reg["version"] == "1" and reg["promoted"]
        assert f"| ε | {reg['figures']['epsilon']:.4g} |" in text
        assert f"| weighted F1 (released model) | {reg['figures']['weighted_f1']:.4g} |" in text
        assert "| gate decision | promoted |" in text

        # the operator's view of it, and a run triggered by hand: an unchanged snapshot ends at once, registers nothing
        status = _serve(root, "status")
        assert "completed" in status.stdout, status.stdout
        run = _trigger(root)
        assert run["state"] == "COMPLETED" and run["message"].startswith("unchanged: snapshot "), run
        assert "are those of version 1 (promoted); nothing registered, nothing run" in run["message"], run

        # a deployment run that finds the root held by another run (here: this test) ends Cancelled, naming it
        with root_lock(root, "a command-line retrain"):
            run = _trigger(root)
        assert run["state"] == "CANCELLED" and run["message"].startswith(
            f"skipped: {root.resolve()} is in use by another dprelease run: pid {os.getpid()} (a command-line retrain)"
        ), run
        assert _log_problems(logs / "server.log") == []  # the scheduler never failed
        assert _log_problems(logs / "worker.log") == []
    finally:
        stopped = _serve(root, "stop")
    assert stopped.returncode == 0
    assert state and not any(alive(pid) for pid in state["pids"].values())
    assert not (root / ".prefect" / "serve" / "pids.json").exists()
    print(f"first scheduled run completed {fired_s:.0f} s after `serve start` began")


STAND_IN = "tests/flows/stand_in_retrain.py:retrain_flow"  # a "retrain" that holds while <root>/hold exists
LIMIT = "Deployment concurrency limit reached."  # the message of a run Prefect's CANCEL_NEW strategy cancels


@pytest.mark.slow
def test_a_run_due_while_one_runs_is_cancelled_not_queued(tmp_path, monkeypatch):
    """The deployments as `make serve` makes them (flows.serve _deploy), with a stand-in retrain that
    outlasts the one-minute cron: while it runs, a run triggered by hand (`serve trigger`) and the cron's
    own next run end Cancelled with the reason; no run waits in AwaitingConcurrencySlot or piles up late;
    the held run then completes."""
    monkeypatch.setenv("DPRELEASE_SERVE_UI", "false")
    root = make_root(tmp_path)
    shutil.copyfile(ROOT / "prefect.toml", root / "prefect.toml")
    port = _free_port()
    raw = slice_raw(service={"port": port, "audit": False, "cron": EVERY_MINUTE})
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    (root / "hold").touch()
    state = {}
    try:
        state = sv.start(
            root,
            port=port,
            work_pool="cpu",
            code=ROOT,
            timeout_s=WAIT_S,
            deploy=["flows.serve", "_deploy", "--params", "params.yaml", "--entrypoint", STAND_IN],
        )
        url = state["url"]
        for name in ("scheduled", "full-backend"):
            dep = api(url, f"deployments/name/retrain/{name}")
            assert dep["global_concurrency_limit"]["limit"] == 1, dep
            assert dep["concurrency_options"]["collision_strategy"] == "CANCEL_NEW", dep
        dep = api(url, "deployments/name/retrain/scheduled")
        api(url, f"deployments/{dep['id']}/create_flow_run", {})  # a run due now (or the cron's, if first)
        held = _wait_for(lambda: [r for r in flow_runs(url) if r["state"] == "RUNNING"], timeout=WAIT_S)
        assert held and len(held) == 1, [(r["state"], r["state_name"]) for r in flow_runs(url)]

        # `make serve-trigger` while it runs: the new run is cancelled at once, and says why
        t0 = time.monotonic()
        done = sv.run_module(root, port, ["flows.serve", "_trigger", "--timeout", str(WAIT_S)], code=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        triggered = json.loads(done.stdout.strip().splitlines()[-1])
        assert (triggered["state"], triggered["message"]) == ("CANCELLED", LIMIT), triggered
        print(f"triggered run cancelled after {time.monotonic() - t0:.0f} s")

        # the cron's own run, due at the next minute, too
        cron = _wait_for(
            lambda: [
                r
                for r in flow_runs(url)
                if r["auto_scheduled"] and r["state"] == "CANCELLED" and r["id"] != held[0]["id"]
            ],
            timeout=WAIT_S,
        )
        assert cron and cron[0]["message"] == LIMIT, cron

        runs = flow_runs(url)
        now = time.time()
        assert [r["id"] for r in runs if r["state"] in ("RUNNING", "PENDING")] == [held[0]["id"]]  # only the held one
        assert not [r for r in runs if r["state_name"] == "AwaitingConcurrencySlot"]  # no queue ...
        overdue = [
            r
            for r in runs
            if r["state"] == "SCHEDULED" and datetime.fromisoformat(r["expected_start"]).timestamp() < now - 30
        ]
        assert not overdue, overdue  # ... nothing late
        assert all(r["message"] == LIMIT for r in runs if r["state"] == "CANCELLED")

        (root / "hold").unlink()  # the held "retrain" ends
        finished = _wait_for(
            lambda: [r for r in flow_runs(url) if r["id"] == held[0]["id"] and r["state"] == "COMPLETED"],
            timeout=WAIT_S,
        )
        assert finished, [(r["id"], r["state"]) for r in flow_runs(url)]
        logs = root / ".prefect" / "serve"
        assert _log_problems(logs / "server.log") == [] and _log_problems(logs / "worker.log") == []
    finally:
        (root / "hold").unlink(missing_ok=True)
        stopped = sv.stop(root)
    assert state and sorted(stopped) == sorted(state["pids"].values())
    assert all(_reaped(pid) for pid in stopped)  # children of this test: reaped, not zombies


def _reaped(pid: int, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            return True
        time.sleep(0.1)
    return False
