"""Screenshots of the MLflow UI, taken in headless Chromium, for a person to look at.

    python scripts/mlflow_screenshots.py [--experiment dprelease] [--run-id ID] [--out reports/ui]

Starts ``mlflow ui`` on 127.0.0.1 (a free port) over the project's ``mlflow.db``, with artifacts served
from its ``mlartifacts/`` (as ``make ui`` does), finds the experiment and the run (the newest one
unless ``--run-id``) through the REST API, saves ``runs_table.png``, ``run_page.png``,
``run_metrics.png`` and ``run_artifacts.png``, prints their paths and stops the server.
Needs Chromium on PATH (Debian: ``apt-get install -y chromium``).

Two MLflow 3.17 UI details shape the URLs: the UI opens every experiment on the GenAI overview unless
the URL says ``workflowType=machine_learning`` (the ``mlflow.experimentKind`` tag no longer decides),
and on a ``localhost``/``127.0.0.1`` address it opens an assistant panel over a quarter of the page.
So Chromium maps the made-up host name below to 127.0.0.1, and the server is told to accept it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL = "apt-get install -y chromium"
HOST = "mlflow-ui"  # resolved to 127.0.0.1 by Chromium only (see the docstring)
WIDTH, HEIGHT = 1600, 1000
QUERY = "?workflowType=machine_learning"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Screenshots of the MLflow UI (runs table, one run).")
    p.add_argument("--experiment", default="dprelease", help="experiment name (default: dprelease)")
    p.add_argument("--run-id", help="run to show (default: the experiment's newest run)")
    p.add_argument("--out", type=Path, default=Path("reports/ui"), help="output folder (default: reports/ui)")
    p.add_argument("--tracking-uri", default=f"sqlite:///{ROOT / 'mlflow.db'}",
                   help="backend store (default: the project's mlflow.db)")
    p.add_argument("--budget-ms", type=int, default=30000, help="Chromium virtual time budget per page")
    return p.parse_args(argv)


def store_uri(uri: str, root: Path = ROOT) -> str:
    """A relative ``sqlite:///file`` is anchored at the project root (as dprelease's tracking does)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix):].startswith("/"):
        return prefix + str((root / uri[len(prefix):]).resolve())
    return uri


def find_browser(which=shutil.which) -> str:
    for name in BROWSERS:
        if path := which(name):
            return path
    raise SystemExit(f"error: no Chromium on PATH (tried {', '.join(BROWSERS)}); install it: {INSTALL}")


def ui_urls(base: str, experiment_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    """Screenshot file name -> (URL, window height). The run page is taller, to show metrics and params."""
    run = f"{base}/#/experiments/{experiment_id}/runs/{run_id}"
    return {
        "runs_table.png": (f"{base}/#/experiments/{experiment_id}/runs{QUERY}&compareRunsMode=TABLE", HEIGHT),
        "run_page.png": (f"{run}{QUERY}", 1500),
        "run_metrics.png": (f"{run}/model-metrics{QUERY}", HEIGHT),
        "run_artifacts.png": (f"{run}/artifacts{QUERY}", HEIGHT),
    }


def chromium_command(browser: str, url: str, shot: Path, profile: Path, height: int, budget_ms: int) -> list[str]:
    return [browser, "--headless=new", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--host-resolver-rules=MAP {HOST} 127.0.0.1",
            f"--window-size={WIDTH},{height}", f"--virtual-time-budget={budget_ms}",
            "--run-all-compositor-stages-before-draw", f"--screenshot={shot}", url]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(uri: str, port: int, log) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
           "--artifacts-destination", str(ROOT / "mlartifacts"), "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1", "--allowed-hosts", f"{HOST}:{port},127.0.0.1:{port},localhost:{port}",
           "--cors-allowed-origins", f"http://{HOST}:{port}"]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    # its own process group: `mlflow ui` runs uvicorn as a child, and both must stop
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (its uvicorn child too), SIGKILL after 15 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the whole group is gone
        try:
            proc.wait(timeout=15)
            break
        except subprocess.TimeoutExpired:
            continue


def wait_ready(base: str, proc: subprocess.Popen, log, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    log.seek(0)
    sys.stderr.write("".join(log.readlines()[-20:]))  # the server's last words
    state = "did not answer" if proc.poll() is None else f"exited with code {proc.returncode}"
    raise SystemExit(f"error: mlflow ui {state} at {base} (its log is above)")


def api(base: str, path: str, params: dict | None = None, body: dict | None = None) -> dict:
    url = f"{base}/api/2.0/mlflow/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        why = json.loads(body).get("message", "") if body.startswith("{") else body[:200]
        raise SystemExit(f"error: MLflow API {path}: HTTP {e.code} {why}".rstrip()) from None


def find_run(base: str, experiment: str, run_id: str | None) -> tuple[str, str]:
    """(experiment id, run id): the given run (it must belong to the experiment), else the newest."""
    exp = api(base, "experiments/get-by-name", params={"experiment_name": experiment})["experiment"]
    exp_id = exp["experiment_id"]
    if run_id:
        info = api(base, "runs/get", params={"run_id": run_id})["run"]["info"]
        if info["experiment_id"] != exp_id:
            raise SystemExit(f"error: run {run_id} belongs to experiment {info['experiment_id']}, not {experiment}")
        return exp_id, run_id
    runs = api(base, "runs/search", body={"experiment_ids": [exp_id], "max_results": 1,
                                          "order_by": ["attributes.start_time DESC"]}).get("runs", [])
    if not runs:
        raise SystemExit(f"error: experiment {experiment} has no runs")
    return exp_id, runs[0]["info"]["run_id"]


def screenshot(browser: str, url: str, shot: Path, height: int, budget_ms: int) -> None:
    shot.unlink(missing_ok=True)  # never pass off an earlier run's picture as this one's
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no UI state from earlier visits
        cmd = chromium_command(browser, url, shot, Path(profile), height, budget_ms)
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
    if res.returncode != 0 or not shot.is_file():
        raise SystemExit(f"error: Chromium failed on {url}: {res.stderr.strip()[-300:]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    browser = find_browser()
    uri = store_uri(args.tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        raise SystemExit(f"error: no MLflow store at {uri} (run the pipeline first, e.g. make run)")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    api_base, ui_base = f"http://127.0.0.1:{port}", f"http://{HOST}:{port}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the server on kill too
    with tempfile.TemporaryFile("w+") as log:
        proc = start_server(uri, port, log)
        try:
            wait_ready(api_base, proc, log)
            exp_id, run_id = find_run(api_base, args.experiment, args.run_id)
            print(f"experiment {args.experiment} ({exp_id}), run {run_id}")
            for name, (url, height) in ui_urls(ui_base, exp_id, run_id).items():
                screenshot(browser, url, out / name, height, args.budget_ms)
                print(out / name)
        finally:
            stop_server(proc)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # main's `finally` has stopped the server
        print("interrupted", file=sys.stderr)
        sys.exit(130)
