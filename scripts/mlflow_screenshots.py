"""Screenshots of the MLflow UI, taken in headless Chromium, for a person to look at.

    python scripts/mlflow_screenshots.py [--experiment dprelease] [--run-id ID] [--out reports/ui]

Starts ``mlflow ui --app-name dprelease`` on 127.0.0.1 (a free port) over the project's ``mlflow.db``,
with artifacts served from its ``mlartifacts/`` (as ``make ui`` does), finds the experiment and the run
(the newest one unless ``--run-id``) and the newest registered model version through the REST API, saves
``runs_table.png``, ``run_page.png``, ``run_metrics.png``, ``run_artifacts.png``, ``registry.png`` and
``model_version.png``, prints their paths and the runs table's visible metric columns, and stops the
server. Needs Chromium on PATH (Debian: ``apt-get install -y chromium``).

Every page is opened as a first-time visitor would (a fresh browser profile, the plain URL): what it shows
is what ``--app-name dprelease`` (src/dprelease/pipeline/mlflow_app.py) sets up — the model-training view, no
assistant panel, the headline figures as runs-table columns — not something the URL asks for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
WIDTH, HEIGHT = 1600, 1000
CHROMIUM_FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--no-sandbox",
    "--hide-scrollbars",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Screenshots of the MLflow UI (runs table, one run, the registry).")
    p.add_argument("--experiment", default="dprelease", help="experiment name (default: dprelease)")
    p.add_argument("--run-id", help="run to show (default: the experiment's newest run)")
    p.add_argument("--out", type=Path, default=Path("reports/ui"), help="output folder (default: reports/ui)")
    p.add_argument(
        "--tracking-uri",
        default=f"sqlite:///{ROOT / 'mlflow.db'}",
        help="backend store (default: the project's mlflow.db)",
    )
    p.add_argument("--budget-ms", type=int, default=30000, help="Chromium virtual time budget per page")
    return p.parse_args(argv)


def store_uri(uri: str, root: Path = ROOT) -> str:
    """A relative ``sqlite:///file`` is anchored at the project root (as dprelease's tracking does)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix) :].startswith("/"):
        return prefix + str((root / uri[len(prefix) :]).resolve())
    return uri


def find_browser(which=shutil.which) -> str:
    for name in BROWSERS:
        if path := which(name):
            return path
    raise SystemExit(f"error: no Chromium on PATH (tried {', '.join(BROWSERS)}); install it: {INSTALL}")


def ui_urls(
    base: str, experiment_id: str, run_id: str, model: tuple[str, str] | None = None
) -> dict[str, tuple[str, int]]:
    """Screenshot file name -> (URL, window height): plain URLs, as a person would type or follow them. The
    run and version pages are taller, to show metrics, params and tags."""
    run = f"{base}/#/experiments/{experiment_id}/runs/{run_id}"
    urls = {
        "runs_table.png": (f"{base}/#/experiments/{experiment_id}/runs", HEIGHT),
        "run_page.png": (run, 1500),
        "run_metrics.png": (f"{run}/model-metrics", HEIGHT),
        "run_artifacts.png": (f"{run}/artifacts", HEIGHT),
    }
    if model:
        name, version = (urllib.parse.quote(part, safe="") for part in model)
        urls |= {
            "registry.png": (f"{base}/#/models/{name}", HEIGHT),
            "model_version.png": (f"{base}/#/models/{name}/versions/{version}", 1500),
        }
    return urls


def chromium_command(
    browser: str, url: str, out: Path, profile: Path, height: int, budget_ms: int, dump_dom: bool = False
) -> list[str]:
    """A headless Chromium call: a screenshot into ``out``, or (``dump_dom``) the rendered page on stdout."""
    what = ["--dump-dom"] if dump_dom else [f"--screenshot={out}"]
    return [
        browser,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{height}",
        f"--virtual-time-budget={budget_ms}",
        "--run-all-compositor-stages-before-draw",
        *what,
        url,
    ]


COLUMN_HEADER = re.compile(
    r'role="columnheader"[^>]*col-id="metrics\.`([^`]+)`"[^>]*style="left: (\d+)px; width: (\d+)px;'
)


def visible_metric_columns(dom: str, within_px: int = 800) -> list[str]:
    """The metric columns the runs table renders in its first ``within_px`` pixels, left to right (the table
    renders only the columns in view: what is listed here is on screen)."""
    cols = {name: int(left) for name, left, width in COLUMN_HEADER.findall(dom) if int(left) + int(width) <= within_px}
    return sorted(cols, key=cols.get)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(uri: str, port: int, log) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--app-name",
        "dprelease",
        "--artifacts-destination",
        str(ROOT / "mlartifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
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
    runs = api(
        base,
        "runs/search",
        body={"experiment_ids": [exp_id], "max_results": 1, "order_by": ["attributes.start_time DESC"]},
    ).get("runs", [])
    if not runs:
        raise SystemExit(f"error: experiment {experiment} has no runs")
    return exp_id, runs[0]["info"]["run_id"]


def latest_model_version(base: str) -> tuple[str, str] | None:
    """(name, version) of the newest version of the first registered model, or None when none is registered."""
    models = api(base, "registered-models/search", params={"max_results": 1}).get("registered_models", [])
    if not models:
        return None
    versions = api(base, "model-versions/search", params={"filter": f"name='{models[0]['name']}'"})
    numbers = [int(v["version"]) for v in versions.get("model_versions", [])]
    return (models[0]["name"], str(max(numbers))) if numbers else None


def screenshot(browser: str, url: str, shot: Path, height: int, budget_ms: int) -> None:
    shot.unlink(missing_ok=True)  # never pass off an earlier run's picture as this one's
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no UI state from earlier visits
        cmd = chromium_command(browser, url, shot, Path(profile), height, budget_ms)
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
    if res.returncode != 0 or not shot.is_file():
        raise SystemExit(f"error: Chromium failed on {url}: {res.stderr.strip()[-300:]}")


def rendered(browser: str, url: str, budget_ms: int, height: int = HEIGHT) -> str:
    """The page as Chromium renders it for a first-time visitor (a fresh profile): its DOM after scripts ran."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = chromium_command(
            browser, url, Path(profile) / "unused.png", Path(profile), height, budget_ms, dump_dom=True
        )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
    if res.returncode != 0 or "<html" not in res.stdout:
        raise SystemExit(f"error: Chromium failed on {url}: {res.stderr.strip()[-300:]}")
    return res.stdout


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    browser = find_browser()
    uri = store_uri(args.tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file():
        raise SystemExit(f"error: no MLflow store at {uri} (run the pipeline first, e.g. make run)")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the server on kill too
    with tempfile.TemporaryFile("w+") as log:
        proc = start_server(uri, port, log)
        try:
            wait_ready(base, proc, log)
            exp_id, run_id = find_run(base, args.experiment, args.run_id)
            model = latest_model_version(base)
            print(
                f"experiment {args.experiment} ({exp_id}), run {run_id}, "
                + (f"model {model[0]} version {model[1]}" if model else "no registered model (no registry pages)")
            )
            urls = ui_urls(base, exp_id, run_id, model)
            columns = visible_metric_columns(rendered(browser, urls["runs_table.png"][0], args.budget_ms))
            print(f"runs table, first open: metric columns in view: {', '.join(columns) or 'none'}")
            for name, (url, height) in urls.items():
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
