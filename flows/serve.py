"""Scheduled retrains on a real Prefect server: ``make serve`` / ``make serve-stop``.

``python -m flows.serve start``    Prefect server on 127.0.0.1:``service.port`` (database in ``.prefect/``),
                                   process work pools ``service.work_pool`` and ``service.gpu_pool``, the
                                   deployments, one worker for the CPU pool. PIDs in ``.prefect/serve/``.
``python -m flows.serve trigger``  run the scheduled deployment now (not waiting for cron) and wait for it.
``python -m flows.serve status``   what is running, and the scheduled deployment's runs by state.
``python -m flows.serve stop``     stop the worker(s) and the server, by PID.

Deployments (both run ``flows/retrain.py:retrain_flow`` from this project's folder):
``retrain/scheduled`` on cron ``service.cron`` — on the GPU pool when ``model.backend: full``, else on
the CPU pool; ``retrain/full-backend`` (no schedule) on the GPU pool with ``model.backend: full``. A GPU
machine joins by starting a worker of the GPU pool against this server (README, "Running it as a service").
Each deployment runs one retrain at a time (a run due while another runs waits for it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from dprelease.config import load_params

SCHEDULED, FULL = "scheduled", "full-backend"
STATE = Path(".prefect") / "serve"
CODE = Path(__file__).resolve().parents[1]  # where flows/ and tasks/ live (the data root may be elsewhere)


def env_for(root: Path, port: int) -> dict:
    """The environment of everything ``serve`` starts: this project's Prefect home and server, offline."""
    return os.environ | {"PREFECT_HOME": str((root / ".prefect").resolve()), "PREFECT_API_URL": api_url(port),
                         "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_UI_ENABLED": os.environ.get("DPRELEASE_SERVE_UI", "true"),
                         "PREFECT_LOGGING_LEVEL": "WARNING", "PYTHONPATH": str(CODE)}


def api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def _spawn(root: Path, name: str, args: list[str], env: dict) -> int:
    log = open(root / STATE / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # own process group: stopped as a whole
    return proc.pid


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url(port)}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def read_state(root: Path) -> dict:
    path = root / STATE / "pids.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def start(root: Path, params_file: str, timeout_s: float = 120.0) -> dict:
    p = load_params(root / params_file)
    port = p.service.port
    if any(alive(pid) for pid in read_state(root).get("pids", {}).values()):
        raise SystemExit(f"dprelease: error: already serving ({root / STATE / 'pids.json'}); run `make serve-stop`")
    (root / STATE).mkdir(parents=True, exist_ok=True)
    env = env_for(root, port)
    t0 = time.perf_counter()
    state = {"port": port, "url": api_url(port), "pids": {}}
    state["pids"]["server"] = _spawn(root, "server", ["prefect", "server", "start", "--host", "127.0.0.1",
                                                      "--port", str(port)], env)
    _write(root, state)
    while not _healthy(port):
        if time.perf_counter() - t0 > timeout_s or not alive(state["pids"]["server"]):
            stop(root)
            raise SystemExit(f"dprelease: error: the Prefect server did not start (see {root / STATE / 'server.log'})")
        time.sleep(0.5)
    state["timings"] = {"server_start_s": round(time.perf_counter() - t0, 2)}
    t1 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flows.serve", "_deploy", "--params", params_file], cwd=root, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        stop(root)
        raise SystemExit(f"dprelease: error: work pools / deployments: {' '.join((done.stderr or done.stdout).split())[-400:]}")
    state["timings"]["deploy_s"] = round(time.perf_counter() - t1, 2)
    state["pids"]["worker"] = _spawn(root, "worker", ["prefect", "worker", "start", "--pool", p.service.work_pool,
                                                      "--type", "process"], env)
    _write(root, state)
    return state


def _write(root: Path, state: dict) -> None:
    path = root / STATE / "pids.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def deploy(root: Path, params_file: str) -> None:
    """The work pools and both deployments (run inside ``start``, against the server it started)."""
    from flows.retrain import retrain_flow

    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    p = load_params(root / params_file)
    template = ProcessWorker.get_default_base_job_template()
    with get_client(sync_client=True) as client:  # the process work pools (replaced if they exist)
        for pool in dict.fromkeys((p.service.work_pool, p.service.gpu_pool)):
            client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template),
                                    overwrite=True)
    source = retrain_flow.from_source(source=str(CODE), entrypoint="flows/retrain.py:retrain_flow")
    common = {"root": str(root.resolve()), "params_file": params_file}
    scheduled_pool = p.service.gpu_pool if p.model.backend == "full" else p.service.work_pool
    one_at_a_time = {"concurrency_limit": 1, "print_next_steps": False}  # retrains of one root never overlap
    source.deploy(name=SCHEDULED, work_pool_name=scheduled_pool, parameters=common, schedule=_schedule(p),
                  description="Retrain on the current extract (service.snapshot).", **one_at_a_time)
    source.deploy(name=FULL, work_pool_name=p.service.gpu_pool, parameters=common | {"overrides": {"model.backend": "full"}},
                  description="Retrain with the full-transformer backend, on a GPU worker.", **one_at_a_time)


def _schedule(p):
    from prefect.schedules import Cron

    return Cron(p.service.cron, timezone=p.service.timezone)


def trigger(timeout_s: float) -> dict:
    """Run the scheduled deployment now and wait for its final state (run inside the serve environment)."""
    from prefect.deployments import run_deployment

    t0 = time.perf_counter()
    run = run_deployment(f"retrain/{SCHEDULED}", timeout=timeout_s)
    return {"flow_run": str(run.id), "state": run.state.type.value if run.state else "UNKNOWN",
            "seconds": round(time.perf_counter() - t0, 2)}


def api(url: str, path: str, body: dict | None = None):
    """One call of the Prefect server's REST API (JSON in and out)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/{path}", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def flow_runs(url: str, deployment: str = SCHEDULED) -> list[dict]:
    """The runs of ``retrain/<deployment>``: name, state, whether the scheduler made it, start and end."""
    dep = api(url, f"deployments/name/retrain/{deployment}")
    runs = api(url, "flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [dep["id"]]}}, "limit": 200})
    return [{"id": r["id"], "name": r["name"], "state": r["state_type"], "auto_scheduled": r["auto_scheduled"],
             "expected_start": r["expected_start_time"], "start": r["start_time"], "end": r["end_time"]}
            for r in runs]


def run_counts(url: str) -> dict:
    """The scheduled deployment's runs by state (scheduled by the server's scheduler vs. triggered)."""
    counts: dict = {}
    for r in flow_runs(url):
        key = f"{r['state'].lower()}{'' if r['auto_scheduled'] else ' (triggered)'}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def stop(root: Path, grace_s: float = 15.0) -> list[int]:
    """SIGTERM every process group ``start`` made (worker first), SIGKILL what is left after ``grace_s``."""
    state = read_state(root)
    pids = [state.get("pids", {}).get(k) for k in ("worker", "server")]
    pids = [pid for pid in pids if pid and alive(pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    (root / STATE / "pids.json").unlink(missing_ok=True)
    return pids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["start", "stop", "status", "trigger", "_deploy", "_trigger"],
                    help="start | stop | status | trigger (the _ ones are internal)")
    ap.add_argument("--root", default=".", help="the project folder served (default: .)")
    ap.add_argument("--params", default="params.yaml", help="the params file, relative to --root (default: params.yaml)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="trigger: seconds to wait for the run")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    if args.command == "_deploy":  # internal: run with the serve environment (before Prefect is imported)
        deploy(root, args.params)
    elif args.command == "_trigger":
        print(json.dumps(trigger(args.timeout)))
    elif args.command == "start":
        state = start(root, args.params)
        print(f"serving: Prefect API {state['url']} (server {state['timings']['server_start_s']} s, pools + deployments "
              f"{state['timings']['deploy_s']} s); worker pid {state['pids']['worker']}; logs in {STATE}/")
    elif args.command == "stop":
        print(f"stopped: {stop(root) or 'nothing was running'}")
    elif args.command == "status":
        state = read_state(root)
        if not state:
            print("not serving")
            return 0
        print(json.dumps({k: (v, alive(v)) for k, v in state.get("pids", {}).items()}))
        with contextlib.suppress(OSError, ValueError, KeyError):
            print(f"retrain/{SCHEDULED} runs by state: {json.dumps(run_counts(state['url']))}")
    else:
        state = read_state(root)
        if not state:
            raise SystemExit("dprelease: error: not serving; run `make serve` first")
        result = subprocess.run([sys.executable, "-m", "flows.serve", "_trigger", "--timeout", str(args.timeout)],
                                cwd=root, env=env_for(root, state["port"]), capture_output=True, text=True)
        lines = result.stdout.strip().splitlines()
        print(lines[-1] if result.returncode == 0 and lines else f"dprelease: error: {result.stderr.strip()[-400:]}")
        return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
