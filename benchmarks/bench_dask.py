"""Benchmark of the chunked posterior pass on Dask: throughput of round 2's 500-draw sensitivity pass on the
FULL data (``data.cap=1000000``: all 19,908 usable rows; the pass scores the train split), head backend.

Modes, each timed ``--repeats`` times (median printed):
  in-process — the default: ``posterior_pass`` with no mapper (the plain loop, torch's own thread count);
  in-process 1t — the same with one torch thread (what each Dask worker uses for its chunks);
  dask N     — the same pass as seeded chunk tasks (``ppm.draw_batch`` draws each) on Prefect's Dask task
               runner, a local cluster of N single-threaded worker processes (flows/runners.py), timed
               inside one flow run after a first, untimed pass (cluster start and worker imports are
               printed separately).
Every pass must give the in-process result bit for bit (checked on a digest of the arrays). Printed: the
medians, draws/s, the 2-vs-1-worker ratio, the per-draw cost per record (seconds, and core-seconds for the
workers) to project other data sizes, the coordinator's replay cost, and the load average (the machine may
be shared).

The scratch project (``--keep DIR`` to reuse it) gets the round-2 SWAG from one release flow run with
``data.cap=1000000 ppm.reweight=false`` (bench_release's runner, one thread; embeddings included, minutes).

    python benchmarks/bench_dask.py [--repeats 3] [--workers 1,2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from bench_release import run_flow, scratch_project  # noqa: E402

FULL = ["data.cap=1000000", "ppm.reweight=false"]


def _params(work: Path, workers: int | None = None):
    import yaml

    from dprelease.core.config import load_params

    sets = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in FULL)}
    if workers:
        sets |= {"dask.enabled": True, "dask.workers": workers}
    return load_params(work / "params.yaml", sets)


def _timed_pass(params, root: str) -> tuple[float, str]:
    """One sensitivity pass of round 2 → (seconds, digest of its arrays): public aggregates only."""
    import numpy as np

    from dprelease.contracts.layout import Layout
    from dprelease.mechanisms.swag_ppm.fit import release_censor
    from dprelease.mechanisms.swag_ppm.passes import posterior_pass

    lay = Layout.from_params(params, root)
    w = np.load(lay.weights(2) / "weights.npy")
    start = time.perf_counter()
    record_max, max_deltas = posterior_pass(params, lay, 2, w, "sensitivity", censor=release_censor(params))
    seconds = time.perf_counter() - start
    return seconds, hashlib.sha256(record_max.tobytes() + max_deltas.tobytes()).hexdigest()


def in_process(work: Path, repeats: int, threads: int | None = None) -> dict:
    """The default path (no mapper), at torch's thread count or at ``threads``."""
    import torch

    params = _params(work)
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        runs = [_timed_pass(params, str(work)) for _ in range(repeats)]
    finally:
        torch.set_num_threads(before)
    return {"times": [t for t, _ in runs], "digests": sorted({d for _, d in runs})}


def on_dask(work: Path, workers: int, repeats: int) -> dict:
    from prefect import flow
    from prefect.context import FlowRunContext

    from dprelease.core.config import Params
    from flows import runners

    @flow(name="bench-dask-pass", persist_result=False, log_prints=False)
    def passes(params: dict, root: str, repeats: int) -> dict:
        p = Params.model_validate(params)
        with runners.on_dask() as on:
            assert on, "not on a Dask task runner"
            start = time.perf_counter()
            FlowRunContext.get().task_runner.client  # the local cluster starts here (workers spawned)
            cluster = time.perf_counter() - start
            first = _timed_pass(p, root)  # workers import the code and load the inputs
            runs = [_timed_pass(p, root) for _ in range(repeats)]
        return {
            "cluster_start": cluster,
            "first": first[0],
            "times": [t for t, _ in runs],
            "digests": sorted({d for _, d in [first, *runs]}),
        }

    params = _params(work, workers)
    return passes.with_options(task_runner=runners.task_runner(params))(
        params.model_dump(mode="json"), str(work), repeats
    )


def replay_seconds(work: Path) -> float:
    """The coordinator's share of a mapped pass: the generator states of every chunk (normals only)."""
    import torch

    from dprelease.contracts.layout import Layout
    from dprelease.mechanisms.swag_ppm.swag import SwagMoments, chunk_states

    params = _params(work)
    moments = SwagMoments.load(Layout.from_params(params, work).swag(2) / "moments.safetensors")
    start = time.perf_counter()
    list(chunk_states(moments, params.ppm.draws, params.ppm.draw_batch, torch.Generator().manual_seed(0)))
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per worker count")
    ap.add_argument("--workers", default="1,2", help="Dask worker counts to time")
    ap.add_argument("--keep", default=None, help="work directory to keep (and reuse: the setup run is skipped)")
    args = ap.parse_args()
    work = scratch_project(args.keep, "dprelease-bench-dask-")
    os.environ["PREFECT_HOME"] = str(work / ".prefect")  # before Prefect loads: never the project's home
    if not (work / "artifacts" / "round2" / "sensitivity" / "max_deltas.npy").is_file():
        print("setup: release flow on the full data (embeddings, rounds 1-2), single-threaded ...", flush=True)
        before = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = "1"  # untimed; robust on a shared machine (the flow's child only)
        try:
            wall, _, _ = run_flow(work, [x for s in FULL for x in ("--set", s)] + ["--no-track"])
        finally:
            os.environ.pop("OMP_NUM_THREADS") if before is None else os.environ.update(OMP_NUM_THREADS=before)
        print(f"setup: {wall:.0f} s", flush=True)

    import torch

    from dprelease.core.io import read_json

    data = read_json(work / "metrics" / "data.json")
    params = _params(work)
    draws, n = params.ppm.draws, data["train_rows"]
    load_before = os.getloadavg()
    rows = {"in-process": in_process(work, args.repeats), "in-process 1t": in_process(work, args.repeats, 1)}
    for w in (int(x) for x in args.workers.split(",")):
        rows[f"dask {w}"] = on_dask(work, w, args.repeats)
    replay = replay_seconds(work)
    load_after = os.getloadavg()

    reference = rows["in-process"]["digests"]
    print(
        f"\nposterior pass of round 2: {draws} draws in chunks of {params.ppm.draw_batch}, {n} train records "
        f"({data['rows']} rows, {data['classes']} classes); flow-process torch threads: {torch.get_num_threads()}; "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print(
        f"{'mode':<15}{'median s':>10}{'draws/s':>10}{'s/draw/record':>15}{'core-s/draw/rec':>17}"
        f"  bit-identical  runs (s)"
    )
    medians = {}
    for name, row in rows.items():
        med = medians[name] = statistics.median(row["times"])
        cores = int(name.split()[1]) if name.startswith("dask") else 1
        same = row["digests"] == reference and len(reference) == 1
        runs = ", ".join(f"{t:.1f}" for t in row["times"])
        print(
            f"{name:<15}{med:>10.2f}{draws / med:>10.1f}{med / (draws * n):>15.3e}"
            f"{med * cores / (draws * n):>17.3e}  {'yes' if same else 'NO':<13}  {runs}"
        )
        if "cluster_start" in row:
            print(
                f"{'':<15}cluster start {row['cluster_start']:.1f} s (workers up; they import the code with "
                f"their first task), first pass {row['first']:.1f} s"
            )
    if "dask 1" in medians and "dask 2" in medians:
        print(f"\nthroughput 2 workers / 1 worker: {medians['dask 1'] / medians['dask 2']:.2f}x  (target >= 1.6x)")
    if "dask 2" in medians:
        print(f"throughput 2 workers / in-process: {medians['in-process'] / medians['dask 2']:.2f}x")
    print(f"coordinator replay of the chunk states (normals only): {replay:.2f} s per pass")
    print(
        "projection: pass seconds ~ (s/draw/record of a mode) x draws x records, plus the replay and, once per "
        "flow run, the cluster start"
    )
    (work / "bench_dask.json").write_text(
        json.dumps({"rows": rows, "replay_s": replay, "train_rows": n, "draws": draws}, indent=2), encoding="utf-8"
    )
    print(f"figures: {work / 'bench_dask.json'}")
    if not all(r["digests"] == reference for r in rows.values()) or len(reference) != 1:
        sys.exit("a pass differed from the in-process result")


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    main()
