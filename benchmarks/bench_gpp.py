"""Wall time and peak memory of `make gpp` (issue 12) from a COLD start in a scratch copy of the project:
the OSHA split and MiniLM embeddings, both datasets' baselines, sweeps, noise tuning, the distributed runs
on Flower (≥ 5 clients), the sanitizer release and the report. Default params. Prints the report's
tables, the per-stage times and the federated run's engine overhead apart from its training time.

    python benchmarks/bench_gpp.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_release import scratch_project  # noqa: E402

TARGET_S, TARGET_MB = 20 * 60, 6 * 1024
PEAK = {"tree": 0}


def _sample_tree(pid: int) -> None:
    """Peak of the summed RSS of the flow and all its descendants, sampled twice a second (needs psutil)."""
    try:
        import psutil
    except ImportError:
        return
    try:
        root = psutil.Process(pid)
        while root.is_running():
            total = 0
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            PEAK["tree"] = max(PEAK["tree"], total)
            time.sleep(0.5)
    except psutil.Error:
        return


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary folder)")
    args = ap.parse_args()
    work = scratch_project(args.keep, "dprelease-gpp-")
    env = os.environ | {"PREFECT_HOME": str(work / ".prefect"), "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    log = work / "flow.log"
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.gpp", "--root", str(work), "--no-track"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        sampler = threading.Thread(target=_sample_tree, args=(proc.pid,), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"flows.gpp failed:\n{log.read_text()[-3000:]}")
    text = log.read_text()
    print("\n".join(line for line in text.splitlines() if line.startswith(("|", "##", "per stage"))))
    for name in ("gpp_digits", "gpp_osha"):
        m = json.loads((work / "metrics" / f"{name}.json").read_text())
        print(f"\n{name}: centralized experiments {m['centralized_s']} s")
        for setting, c in m.get("communication", {}).items():
            if isinstance(c, dict) and "wall_s" in c:
                print(
                    f"  {setting}: {c['clients']} clients, {c['rounds']} rounds, wall {c['wall_s']} s = engine "
                    f"overhead {c['engine_overhead_s']} s + training {c['train_s']} s; bytes/round up "
                    f"{c['bytes_up_per_round']:,} down {c['bytes_down_per_round']:,} vs FedAvg "
                    f"{c['fedavg_bytes_per_round']:,}"
                )
    tree = f", whole process tree (Ray workers included) {PEAK['tree'] / 2**20:.0f} MB" if PEAK["tree"] else ""
    print(
        f"\nmake gpp (cold): wall {wall:.1f} s ({wall / 60:.1f} min), peak RSS {usage.ru_maxrss / 1024:.0f} MB{tree} "
        f"(target: ≤ {TARGET_S // 60} min, ≤ {TARGET_MB / 1024:.0f} GB); 2-core machine shared with other jobs"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
