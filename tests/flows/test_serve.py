"""``flows.serve`` end to end, offline: a Prefect server on 127.0.0.1 with its database in the project,
process work pools, the deployments and a worker. The real retrain deployment on a one-minute cron: the
server's scheduler creates its runs, the worker runs one to completion (named after its snapshot, its
progress in the run's logs, a Markdown artifact with ε, F1 and the gate decision), the server logs no
error; then ``serve trigger`` runs it by hand (an unchanged snapshot: nothing new registered); everything
is stopped by PID. With SQLAlchemy 2.1 under Prefect 3.8.8 the scheduler fails every loop and no
scheduled run ever appears: this test is what sees that."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import GATED, ROOT, SLICE_DATA, make_root, slice_raw
from dprelease.service.snapshots import snapshot_id
from dprelease.service.supervisor import alive, api, flow_runs

EVERY_MINUTE = "* * * * *"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = os.environ | {"DPRELEASE_SERVE_UI": "false", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "flows.serve", *args, "--root", str(root)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _wait_for(what, timeout: float, every: float = 2.0):
    """``what()`` once it is truthy, else None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(every)
    return None


def _log_problems(path: Path) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if "ERROR" in line or "Traceback" in line]


def test_start_on_a_busy_port_is_one_line_exit_2(tmp_path):
    root = make_root(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        raw = slice_raw(service={"port": port})
        (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        started = _serve(root, "start", timeout=60)
    assert started.returncode == 2 and started.stdout == ""
    assert started.stderr == (f"dprelease: error: port {port} on 127.0.0.1 is in use (service.port): "
                              "stop what listens there or set another port\n")
    assert not (root / ".prefect" / "serve" / "pids.json").exists()
    assert _serve(root, "trigger", timeout=60).stderr == "dprelease: error: not serving; run `make serve` first\n"


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
        assert (root / ".prefect" / "prefect.db").is_file()                      # its database is in the project
        url = state["url"]
        dep = api(url, "deployments/name/retrain/scheduled")
        assert [s["schedule"]["cron"] for s in dep["schedules"]] == [EVERY_MINUTE] and dep["work_pool_name"] == "cpu"

        # the server's scheduler (not this test) creates the runs of the cron
        scheduled = _wait_for(lambda: [r for r in flow_runs(url) if r["auto_scheduled"]], timeout=60)
        assert scheduled, f"no scheduled run after 60 s; server log: {_log_problems(logs / 'server.log')[-5:]}"
        # ... and the worker runs the first one due to completion
        done = _wait_for(lambda: [r for r in flow_runs(url) if r["auto_scheduled"] and r["state"] == "COMPLETED"],
                         timeout=150)
        assert done, f"no scheduled run completed: {[(r['name'], r['state']) for r in flow_runs(url)]}"
        run_id = done[0]["id"]
        assert done[0]["name"] == f"retrain {snapshot_id(root / SLICE_DATA)}"      # named after its snapshot
        fired_s = time.monotonic() - t0

        # its progress lines are the run's Prefect logs
        def messages():
            got = api(url, "logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})
            got = [entry["message"] for entry in got]
            return got if any(m.startswith("registry: version") for m in got) else None

        lines = _wait_for(messages, timeout=30)
        assert lines, "the run logged no registry line"
        assert any("versioned with DVC" in m for m in lines)
        assert any(m.startswith("registry: version 1 → promoted") for m in lines), lines
        # the pipeline subflow logs one line per stage
        every = api(url, "logs/filter", {"limit": 200})
        assert any(e["message"].startswith("stage draw: ") and e["name"] == "prefect.flow_runs.dprelease"
                   for e in every)

        # a Markdown artifact with ε, F1 and the gate decision
        arts = api(url, "artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
        assert [a["key"] for a in arts] == ["retrain-summary"] and arts[0]["type"] == "markdown"
        text = arts[0]["data"]
        retrain = json.loads(next((root / "runs" / "retrain").glob("*/metrics/retrain.json")).read_text())
        reg = retrain["registry"]
        assert reg["version"] == "1" and reg["promoted"]
        assert f"| ε | {reg['figures']['epsilon']:.4g} |" in text
        assert f"| weighted F1 (released draw) | {reg['figures']['weighted_f1']:.4g} |" in text
        assert "| gate decision | promoted |" in text

        # the operator's view of it, and a run triggered by hand: an unchanged snapshot registers nothing
        status = _serve(root, "status", timeout=60)
        assert "completed" in status.stdout, status.stdout
        run = _serve(root, "trigger", "--timeout", "240")
        assert run.returncode == 0, run.stdout[-1000:] + run.stderr[-2000:]
        assert json.loads(run.stdout.strip().splitlines()[-1])["state"] == "COMPLETED"
        assert _log_problems(logs / "server.log") == []                          # the scheduler never failed
        assert _log_problems(logs / "worker.log") == []
    finally:
        stopped = _serve(root, "stop", timeout=60)
    assert stopped.returncode == 0
    assert state and not any(alive(pid) for pid in state["pids"].values())
    assert not (root / ".prefect" / "serve" / "pids.json").exists()
    print(f"first scheduled run completed {fired_s:.0f} s after `serve start` began")
