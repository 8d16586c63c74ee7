"""Benchmark of the retrain service on the bundled data cut into ``service.windows`` (head backend).

In a scratch project (fresh Prefect home, the privacy audit off so that the retrain is comparable with
``make run``), each as a fresh process:
  1. a retrain on each growing window in turn (new data: split, embeddings and every PPM stage computed);
  2. ``make run`` (``flows.release``) on the middle window's rows in a second scratch project: what a
     retrain on a new window is compared with;
  3. a retrain on an unchanged snapshot (every stage cached, nothing new registered);
  4. the scheduling overhead of ``flows.serve``: server start, work pools + deployments, and one triggered
     run of the scheduled deployment on an unchanged snapshot (worker pick-up and flow-run start-up are
     the difference between the triggered run's wall time and the retrain's own time).

    python benchmarks/bench_retrain.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_release import run_flow  # noqa: E402

from dprelease.pipeline.service.snapshots import cut_windows  # noqa: E402


def project(work: Path, port: int | None = None) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["service"]["audit"] = False
    if port:
        raw["service"]["port"] = port
    (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    shutil.copytree(ROOT / "data", work / "data", dirs_exist_ok=True, ignore=shutil.ignore_patterns("snapshots"))
    shutil.copy2(ROOT / "prefect.toml", work / "prefect.toml")
    return work


def env(work: Path) -> dict:
    return os.environ | {
        "PREFECT_HOME": str(work / ".prefect"),
        "PYTHONPATH": str(ROOT),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }


def timed(cmd: list[str], work: Path, name: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", *cmd, "--root", str(work)], cwd=ROOT, env=env(work), capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{name} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return wall, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="work folder to keep (default: a temporary one)")
    args = ap.parse_args()
    base = Path(args.keep or tempfile.mkdtemp(prefix="dprelease-bench-retrain-"))
    work = project(base / "service", port=free_port())
    raw = yaml.safe_load((work / "params.yaml").read_text())
    windows = cut_windows(work / raw["data"]["path"], raw["service"]["windows"], work / "windows")
    rows = {}
    for w in windows:
        wall, line = timed(["flows.retrain", str(w)], work, f"retrain {w.name}")
        rows[w.name] = wall
        print(f"retrain (new window) {w.name}: {wall:.1f} s — {line}")
    middle = windows[len(windows) // 2]
    release = project(base / "release")
    shutil.copy2(middle, release / "data" / middle.name)
    wall, _, _ = run_flow(release, ["--set", f"data.path=data/{middle.name}"])
    print(
        f"make run on {middle.name}: {wall:.1f} s  (retrain on it: {rows[middle.name]:.1f} s, "
        f"ratio {rows[middle.name] / wall:.2f})"
    )
    wall, line = timed(["flows.retrain", str(windows[-1])], work, "unchanged retrain")
    print(f"retrain (unchanged snapshot): {wall:.1f} s — {line}")

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flows.serve", "start", "--root", str(work)],
        cwd=ROOT,
        env=env(work) | {"DPRELEASE_SERVE_UI": "false"},
        capture_output=True,
        text=True,
    )
    serve_wall = time.perf_counter() - start
    try:
        if done.returncode:
            sys.exit(f"serve failed: {done.stderr[-2000:]}")
        state = json.loads((work / ".prefect" / "serve" / "pids.json").read_text())
        # the scheduled deployment reads data.path: make it the last window (unchanged, all cached)
        raw["data"]["path"] = str(Path("windows") / windows[-1].name)
        (work / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        wall, line = timed(["flows.serve", "trigger", "--timeout", "900"], work, "trigger")
        retrain_s = json.loads(line)
        own = json.loads(
            next(
                (work / "runs" / "retrain").glob(f"{windows[-1].name.split('.')[0]}*/metrics/retrain.json")
            ).read_text()
        )["seconds"]
        print(
            f"serve start: {serve_wall:.1f} s (server {state['timings']['server_start_s']} s, pools + deployments "
            f"{state['timings']['deploy_s']} s)"
        )
        print(
            f"triggered run: {wall:.1f} s wall ({retrain_s['seconds']} s until the flow run finished; the retrain "
            f"itself {own:.1f} s; worker pick-up + flow-run start-up {retrain_s['seconds'] - own:.1f} s)"
        )
    finally:
        subprocess.run(
            [sys.executable, "-m", "flows.serve", "stop", "--root", str(work)],
            cwd=ROOT,
            env=env(work),
            capture_output=True,
            text=True,
        )
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
