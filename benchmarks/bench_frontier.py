"""The frontier's cost on this machine: each source stage of `make frontier` run in a fresh process, with its wall
seconds, the torch threads it was given and its peak memory, plus the machine's load when it started.

Reads the current project's artifacts (`make run` first: the SWAG-PPM source reads the release's round). It
re-runs the stages (their outputs are rewritten: the same key gives the same points).

    python benchmarks/bench_frontier.py [--stages frontier_ncm frontier_dpsgd ...] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

STAGES = ("frontier_nonprivate", "frontier_ncm", "frontier_dpsgd", "frontier_swag_ppm", "frontier_report")


def run(stage: str, threads: int) -> tuple[float, float, int]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dprelease.cli", "stage", stage], env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode:
        raise SystemExit(f"{stage} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}")
    return seconds, max(peak, before) / 1024, done.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES, help="the stages to time (default: all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch/BLAS threads per stage")
    a = ap.parse_args(argv)
    print(f"cores {os.cpu_count()}, threads per stage {a.threads}, load average at start "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    total = 0.0
    for stage in a.stages:
        seconds, peak_mb, _ = run(stage, a.threads)
        total += seconds
        print(f"{stage:<22} {seconds:8.1f} s   peak RSS ≤ {peak_mb:7.0f} MB")
    print(f"{'total':<22} {total:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
