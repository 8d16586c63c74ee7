"""The frontier's cost on this machine: the seconds of each source's stage of `make frontier`, and the total.

The sources are those `make frontier` runs (the params file's ``frontier.sources``, or every package that declares
``FRONTIER``: nonprivate, swag_ppm, dpsgd, ncm, linear_ppm) or ``--sources``; each one's stage and then
``frontier_report`` run one after another as ``dprelease stage NAME``, each in a fresh process (stages a cached
flow would skip are re-run), with its wall seconds, the peak memory so far and the total, plus the machine's
load when it started.

Reads the current project's artifacts (`make run` first: the SWAG-PPM source reads the release's round). It
re-runs the stages (their outputs are rewritten: the same key gives the same points). The figures are this
machine's at this load; nothing here is a test.

    python benchmarks/bench_frontier.py [--sources dpsgd ncm ... | all] [--no-report] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

REPORT = "frontier_report"


def stages() -> tuple[dict[str, str], list[str]]:
    """(``{source: stage}`` of every package that declares frontier points, in the registry's order; the sources
    `make frontier` runs with the default params file: ``frontier.sources``, or every one)."""
    from dprelease.compare.frontier.report import sources
    from dprelease.contracts import plugins
    from dprelease.core.config import load_params

    return plugins.frontier_sources(), list(sources(load_params()))


def run(stage: str, threads: int) -> tuple[float, float]:
    """(wall seconds, peak RSS of the children so far in MB) of ``dprelease stage STAGE`` in a fresh process."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dprelease.cli", "stage", stage], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{stage} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}")
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    known, configured = stages()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sources",
        nargs="+",
        default=configured,
        choices=["all", *known],
        help=f"the frontier sources whose stages to time, or all (default: the params' frontier.sources "
        f"or every one: {' '.join(configured)})",
    )
    ap.add_argument("--no-report", action="store_true", help=f"leave out {REPORT} (it reads every source's points)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch/BLAS threads per stage")
    a = ap.parse_args(argv)
    chosen = list(known) if "all" in a.sources else [s for s in known if s in a.sources]
    names = [known[s] for s in chosen] + ([] if a.no_report else [REPORT])
    print(
        f"cores {os.cpu_count()}, threads per stage {a.threads}, load average at start "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    total = 0.0
    for stage in names:
        seconds, peak_mb = run(stage, a.threads)
        total += seconds
        print(f"{stage:<22} {seconds:8.1f} s   peak RSS ≤ {peak_mb:7.0f} MB", flush=True)
    print(f"{'total':<22} {total:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
