"""Benchmark of the default release flow (`make run`) on the bundled OSHA data, head backend.

Runs the flow three times in a scratch copy of the project inputs, each as a fresh process:
  1. cold     — empty artifacts and Prefect cache (includes computing the encoder embeddings);
  2. embedded — embeddings (and the split) cached, every PPM stage recomputed;
  3. no-op    — nothing changed (every stage a cache hit).
Prints wall time, peak RSS of the flow process and the per-stage times the flow records.

    python benchmarks/bench_release.py [--draws 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_flow(work: Path, extra: list[str]) -> tuple[float, float, dict]:
    env = os.environ | {"PREFECT_HOME": str(work / ".prefect"), "PYTHONPATH": str(ROOT)}
    log = work / "flow.log"
    start = time.perf_counter()
    with open(log, "w") as out:  # a file, not a pipe: the child never blocks on a full pipe
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.release", "--root", str(work), *extra],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)  # peak RSS of the flow process itself
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"flow failed:\n{log.read_text()[-3000:]}")
    timings_path = work / "metrics" / "timings.json"
    return wall, usage.ru_maxrss / 1024, json.loads(timings_path.read_text())


def scratch_project(keep: str | None, prefix: str) -> Path:
    """A work folder (``keep`` or a new temporary one) holding copies of params.yaml and the bundled data."""
    work = Path(keep or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "params.yaml", work / "params.yaml")
    shutil.copytree(ROOT / "data", work / "data", dirs_exist_ok=True)
    return work


def reset_to_embeddings(work: Path) -> None:
    """Keep the split and embeddings; drop everything downstream, stage store included (recompute, not restore)."""
    for sub in (work / "artifacts").iterdir():
        if sub.name not in {"data", "features", ".stamps"}:
            shutil.rmtree(sub)
    for stamp in (work / "artifacts" / ".stamps").glob("*.json"):
        if stamp.stem not in {"stratify", "featurize"}:
            stamp.unlink()
    shutil.rmtree(work / ".prefect" / "stage-store", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=None, help="override ppm.draws (default: params.yaml)")
    ap.add_argument("--keep", default=None, help="work directory to keep (default: a temporary one)")
    args = ap.parse_args()
    work = scratch_project(args.keep, "dprelease-bench-")
    extra = ["--set", f"ppm.draws={args.draws}"] if args.draws else []
    rows = []
    rows.append(("cold", *run_flow(work, extra)))
    reset_to_embeddings(work)
    rows.append(("embedded", *run_flow(work, extra)))
    rows.append(("no-op", *run_flow(work, extra)))

    print(f"{'run':<10}{'wall s':>9}{'peak RSS MB':>13}  stages (s)")
    for name, wall, rss, timings in rows:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in timings["stages"])
        print(f"{name:<10}{wall:>9.1f}{rss:>13.0f}  flow {timings['flow_seconds']:.1f}: {stages}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
