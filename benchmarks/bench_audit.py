"""Wall time and peak memory of `make audit` (the privacy-audit flow) from a WARM cache: the release,
its embeddings and the comparison arms are computed first (not timed), then the audit flow runs with
every audit stage cold (population pool embedding, LiRA references, membership inference on every
arm, one canary run per arm, report). Head backend, default params.

    python benchmarks/bench_audit.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_release import scratch_project  # noqa: E402


def _run(args: list[str], work: Path, env: dict) -> tuple[float, float, str]:
    log = work / "flow.log"
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, *args, "--root", str(work), "--no-track"], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{' '.join(args)} failed:\n{log.read_text()[-3000:]}")
    return wall, usage.ru_maxrss / 1024, log.read_text()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary folder)")
    args = ap.parse_args()
    work = scratch_project(args.keep, "dprelease-audit-")
    env = os.environ | {"PREFECT_HOME": str(work / ".prefect"), "PYTHONPATH": str(ROOT)}
    warm, _, _ = _run(["-m", "flows.compare"], work, env)
    wall, peak, out = _run(["-m", "flows.audit"], work, env)
    print("\n".join(line for line in out.splitlines() if line.startswith("|")))
    print(f"\nwarm-up (release + comparison arms, not counted): {warm:.1f} s")
    print(f"make audit from a warm cache: wall {wall:.1f} s ({wall / 60:.1f} min), peak RSS {peak:.0f} MB "
          "(target: ≤ 10 min, ≤ 4 GB)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
