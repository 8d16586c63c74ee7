"""Cold-cache wall time of the comparison flow or the 3 × 3 tuning grid on the bundled data (head backend).

Each run uses a scratch copy of the project inputs and an empty Prefect home and stage store, so
nothing is reused from earlier runs; stages shared *within* the run (between arms or grid cells) are.

    python benchmarks/bench_flows.py compare|tune-grid [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "compare": ["-m", "flows.compare", "--no-track"],
    "tune-grid": ["-m", "flows.tune", "--mode", "grid", "--no-track"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("flow", choices=sorted(COMMANDS), help="the flow to time")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary folder)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix=f"dprelease-{args.flow}-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "params.yaml", work / "params.yaml")
    shutil.copytree(ROOT / "data", work / "data", dirs_exist_ok=True)
    env = os.environ | {"PREFECT_HOME": str(work / ".prefect"), "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *COMMANDS[args.flow], "--root", str(work)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{args.flow} failed:\n{proc.stderr[-3000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report = [line for line in proc.stdout.splitlines() if line.startswith("|") or line.startswith("Chosen")]
    print("\n".join(report))
    print(f"\n{args.flow}: cold wall {wall:.1f} s ({wall / 60:.1f} min), peak RSS {peak:.0f} MB")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
