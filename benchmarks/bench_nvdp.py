"""NVDP pipeline benchmark: every ``nvdp`` stage in execution order, in-process, from a cold cache (a fresh
temporary project root holding copies of the OSHA file and the GLUE files), printing each stage's wall time and
the process's peak RSS. The task stages run two at a time, as ``make nvdp`` runs them.

    python benchmarks/bench_nvdp.py [--set nvdp.epochs=2] [--keep DIR]

Timings on a shared machine include the other jobs' load; say so when quoting them.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dprelease.core.config import load_params
from dprelease.pipeline import registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a param (repeatable)")
    ap.add_argument("--keep", help="run in this (new) folder and keep it")
    args = ap.parse_args(argv)
    from flows.cli import parse_overrides

    params = load_params(ROOT / "params.yaml", parse_overrides(args.set))
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-nvdp-"))
    (root / Path(params.data.path).parent).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / params.data.path, root / params.data.path)
    shutil.copytree(ROOT / params.nvdp.glue_dir, root / params.nvdp.glue_dir, dirs_exist_ok=True)
    times: dict[str, float] = {}

    def run(name: str) -> None:
        t = time.perf_counter()
        registry.run_stage(name, params, root)
        times[name] = time.perf_counter() - t
        print(f"{name:16s} {times[name]:8.1f} s   peak RSS {peak_rss_gb():.2f} GB", flush=True)

    start = time.perf_counter()
    names = [s.name for s in registry.group(params, "nvdp")]
    run("nvdp_states")
    tasks = [n for n in names if n not in ("nvdp_states", "nvdp_probe", "nvdp_sanitizer", "nvdp_report")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run, tasks))
    for name in ("nvdp_probe", "nvdp_sanitizer", "nvdp_report"):
        run(name)
    print(f"{'total':16s} {time.perf_counter() - start:8.1f} s   peak RSS {peak_rss_gb():.2f} GB")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
