"""Seconds, CPU threads and peak memory of every audit stage: ``make audit``'s and the scheduled retrain's.

In a scratch project (params.yaml and the bundled data copied; its own Prefect home, so its own stage store and
audit cache): the release and the comparison arms are computed first (``flows.compare``, not timed; or copied
from ``--from DIR``, a project folder that holds them), then every audit stage runs COLD, each in a fresh
process (``dprelease stage``'s code path, no stage store), in plan order:

1. ``make audit``'s stages (``flows.audit``'s plan after the release stages: the audited arms, the replay
   audit, the population pool, the LiRA references, membership inference, the canary runs, the report);
2. the retrain's audit (``flows/retrain.py``: the released arm only, no planted bug, no replay audit) in a
   second copy with an EMPTY audit cache — what a retrain on a new snapshot pays — and (``--warm``) once more
   with the audit cache of step 1 (a retrain whose population pool is unchanged: another key, another root).

Per stage: wall seconds, the stage process's torch threads, the audit's worker processes (one torch thread
each; ``-`` where the stage runs in its own process only), and peak memory: the stage process's ``ru_maxrss``,
the largest worker's and all of them together (sampled from /proc). Stages declared untimed (their duration grows with a data-dependent search) print no seconds,
and neither does a total that contains them. Only timings, thread counts and memory are printed: no score,
no canary, no per-record figure.

    python benchmarks/bench_audit.py [--keep DIR] [--from DIR] [--skip STAGE ...] [--warm] [--only make|retrain]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_release import scratch_project  # noqa: E402

MARK = "BENCH-AUDIT-STAGE "
COPIED = ("params.yaml", "data", "artifacts", "metrics", "reports", "release", "plots")


def _env(work: Path, home: Path) -> dict:  # the stage processes run this checkout's code
    return os.environ | {"PREFECT_HOME": str(home), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}


def child(root: str, stage: str, overrides: str) -> None:
    """One stage in this process; prints one JSON line (threads, workers, peak RSS: no stage output)."""
    import resource

    import torch

    from dprelease.core import offline  # noqa: F401
    from dprelease.core.config import load_params, parse_params
    from dprelease.pipeline import registry

    p = load_params(Path(root) / "params.yaml")
    if overrides:
        p = parse_params(p.model_dump(mode="json"), json.loads(overrides))
    threads = torch.get_num_threads()
    peak = _TreePeak()
    start = time.perf_counter()
    registry.run_stage(stage, p, root)
    seconds = time.perf_counter() - start
    peak.stop()
    try:  # the audit's process pool (absent before issue 34: everything ran in the stage process)
        from dprelease.compare.mia import workers

        used = workers.used()
    except ImportError:
        used = None
    timed = registry.get(p, stage).timed
    print(
        MARK
        + json.dumps(
            {
                "stage": stage,
                "seconds": seconds if timed else None,  # untimed: never printed
                "torch_threads": threads,
                "workers": used,
                "timed": timed,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "worker_rss_mb": peak.worker / 1024,
                "tree_rss_mb": peak.total / 1024,
            }
        )
    )


class _TreePeak:
    """Peak resident memory of this process's descendants (the workers): the largest one and all of them with
    this process, sampled from /proc every 0.2 s (a forked child's ru_maxrss counts its parent's pages)."""

    def __init__(self) -> None:
        import threading

        self.worker = self.total = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _rss_kb(pid: str) -> int:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def _sample(self) -> None:
        me, parent = str(os.getpid()), {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    parent[d] = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]
                except (OSError, IndexError):
                    pass
        tree, grew = {me}, True
        while grew:
            new = {p for p, pp in parent.items() if pp in tree and p not in tree}
            tree |= new
            grew = bool(new)
        kids = [self._rss_kb(p) for p in tree - {me}]
        self.worker = max([self.worker, *kids])
        self.total = max(self.total, self._rss_kb(me) + sum(kids))

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self._sample()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def run_stage(work: Path, home: Path, stage: str, overrides: dict) -> dict:
    log = work / f"stage-{stage}.log"  # the stage's own output (progress bars) and the child's line
    start = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, __file__, "--child", stage, "--root", str(work), "--overrides", json.dumps(overrides)],
            cwd=ROOT,
            env=_env(work, home),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wall = time.perf_counter() - start
    text = log.read_text()
    if done.returncode:
        sys.exit(f"stage {stage} failed:\n{text[-3000:]}")
    row = json.loads(next(line for line in text.splitlines() if line.startswith(MARK))[len(MARK) :])
    return row | {"process_wall": wall}


def load(root: Path):
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT))
    from dprelease.core import offline  # noqa: F401
    from dprelease.core.config import load_params, parse_params
    from dprelease.mechanisms.swag_ppm.record import RELEASED_ARM
    from dprelease.pipeline import registry
    from flows.audit import audit_stages
    from flows.run import plan_of

    p = load_params(root / "params.yaml")
    warmed = set(plan_of(registry.flows()["compare"], p).order)  # computed by the warm-up (make compare)
    make = [n for n in audit_stages(p) if n not in warmed]
    rnd = json.loads((root / "metrics" / "swag_ppm_draw.json").read_text())["round"]
    retrain = {"privacy_audit.arms": [RELEASED_ARM[rnd]], "privacy_audit.planted_bugs": False}
    rp = parse_params(p.model_dump(mode="json"), retrain)
    return make, [n for n in audit_stages(rp) if n != "audit_replay"], retrain


def table(title: str, rows: list[dict], load_avg: tuple) -> str:
    lines = [
        f"\n## {title} (load average before: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}; "
        f"{os.cpu_count()} cores)",
        "| stage | seconds | torch threads (stage process) | worker processes × threads | peak RSS MB "
        "(stage process ru_maxrss / largest worker / all together) |",
        "|---|---|---|---|---|",
    ]
    total, hidden = 0.0, False
    for r in rows:
        secs = f"{r['seconds']:.1f}" if r["timed"] else "untimed"
        total += r["process_wall"] if r["timed"] else 0.0
        hidden |= not r["timed"]
        workers = f"{r['workers']} × 1" if r["workers"] else "-"
        together = r.get("tree_rss_mb", r["rss_mb"])
        lines.append(
            f"| {r['stage']} | {secs} | {r['torch_threads']} | {workers} | "
            f"{r['rss_mb']:.0f} / {r['worker_rss_mb']:.0f} / {together:.0f} |"
        )
    lines.append(
        f"| total (processes, imports included) | {'–' if hidden else f'{total:.1f}'} | | | "
        f"{max(r.get('tree_rss_mb', r['rss_mb']) for r in rows):.0f} |"
    )
    return "\n".join(lines)


def copy_project(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for name in COPIED:
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, symlinks=True)
        elif (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    return dst


def series(title: str, work: Path, home: Path, names: list[str], overrides: dict, skip: set[str]) -> str:
    avg = os.getloadavg()
    rows = []
    for name in names:
        if name in skip:
            continue
        rows.append(run_stage(work, home, name, overrides))
        r = rows[-1]
        print(f"  {title}: {name} {r['seconds']:.1f} s" if r["timed"] else f"  {title}: {name} done", flush=True)
    text = table(title, rows, avg)
    print(text, flush=True)  # each series as soon as it is done
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary folder)")
    ap.add_argument(
        "--from",
        dest="source",
        default=None,
        help="copy the release and the comparison arms from this project folder (no warm-up)",
    )
    ap.add_argument("--skip", nargs="*", default=[], help="stages to leave out (e.g. audit_replay)")
    ap.add_argument(
        "--only",
        choices=("make", "retrain"),
        default=None,
        help="only make audit's stages, or only the scheduled retrain's audit (default: both)",
    )
    ap.add_argument("--warm", action="store_true", help="also the retrain's audit with the audit cache of step 1")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--overrides", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.root, args.child, args.overrides)
    base = Path(args.keep) if args.keep else Path(__import__("tempfile").mkdtemp(prefix="dprelease-audit-"))
    base.mkdir(parents=True, exist_ok=True)
    warm = base / "warm"
    if args.source:
        copy_project(Path(args.source), warm)
    elif not (warm / "metrics" / "swag_ppm_draw.json").is_file():
        scratch_project(str(warm), "")
        start = time.perf_counter()
        with open(base / "warmup.log", "w") as out:
            done = subprocess.run(
                [sys.executable, "-m", "flows.compare", "--root", str(warm), "--no-track"],
                cwd=ROOT,
                env=_env(warm, base / "warmup-prefect"),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if done.returncode:
            sys.exit(f"warm-up failed:\n{(base / 'warmup.log').read_text()[-3000:]}")
        print(f"warm-up (release + comparison arms, not counted): {time.perf_counter() - start:.1f} s")
    make, retrain, overrides = load(warm)
    skip = set(args.skip)
    out = [
        f"# bench_audit ({ROOT}) {time.strftime('%Y-%m-%d %H:%M:%S')}; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    ]
    if args.only != "retrain":
        work = copy_project(warm, base / "make-audit")
        out.append(series("make audit's stages, cold", work, base / "prefect-make", make, {}, skip))
    if args.only != "make":
        work = copy_project(warm, base / "retrain-cold")
        out.append(
            series(
                "retrain's audit, new snapshot (empty audit cache)",
                work,
                base / "prefect-retrain",
                retrain,
                overrides,
                skip,
            )
        )
        if args.warm:
            work = copy_project(warm, base / "retrain-warm")
            out.append(
                series(
                    "retrain's audit, audit cache of make audit's run",
                    work,
                    base / "prefect-make",
                    retrain,
                    overrides,
                    skip,
                )
            )
    print("\n".join(out[:1]) + "\n(the tables above, in order)")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
