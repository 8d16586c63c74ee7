"""``flows.serve`` end to end, offline: a Prefect server on 127.0.0.1 with its database in the project,
process work pools, the deployments, a worker; one run of the scheduled deployment triggered (not waiting
for cron) and finished; everything stopped by PID."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, make_root, slice_raw
from flows.serve import alive

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = os.environ | {"DPRELEASE_SERVE_UI": "false", "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "flows.serve", *args, "--root", str(root)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_serve_deploy_trigger_and_stop(tmp_path):
    root = make_root(tmp_path)
    shutil.copyfile(ROOT / "prefect.toml", root / "prefect.toml")
    raw = slice_raw(service={"port": _free_port(), "audit": False, "cron": "0 3 * * 1"})
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    started = _serve(root, "start")
    state = json.loads((root / ".prefect" / "serve" / "pids.json").read_text()) if started.returncode == 0 else {}
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        assert "serving: Prefect API http://127.0.0.1:" in started.stdout
        assert (root / ".prefect" / "prefect.db").is_file()                      # its database is in the project
        env = os.environ | {"PREFECT_API_URL": state["url"], "PREFECT_HOME": str(root / ".prefect")}
        inspect = subprocess.run([sys.executable, "-m", "prefect", "deployment", "inspect", "retrain/scheduled"],
                                 cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert "0 3 * * 1" in inspect.stdout and "'cpu'" in inspect.stdout, inspect.stdout[-2000:]  # cron, pool
        run = _serve(root, "trigger", "--timeout", "240")
        assert run.returncode == 0, run.stdout[-1000:] + run.stderr[-2000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["state"] == "COMPLETED", result
        retrain = json.loads(next((root / "runs" / "retrain").glob("*/metrics/retrain.json")).read_text())
        assert retrain["registry"]["version"] == "1" and retrain["registry"]["promoted"]
    finally:
        stopped = _serve(root, "stop", timeout=60)
    assert stopped.returncode == 0
    assert state and not any(alive(pid) for pid in state["pids"].values())
    assert not (root / ".prefect" / "serve" / "pids.json").exists()
