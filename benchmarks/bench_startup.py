"""Start-up time of the command-line entry points: the median wall seconds of N fresh subprocesses each.

    python benchmarks/bench_startup.py [-n 5] [--only SUBSTRING]

Timed: ``dprelease --help``, every subcommand's ``--help``, ``dprelease stage NAME`` up to the point the stage
would start (its :class:`dprelease.contracts.stage.Stage`, run function included, resolved by the registry; the stage is
not run), an unknown stage's one-line error, and ``python -m flows.<name> --help`` for every module of
``flows/`` with a command line. Nothing is written to the project: the stage commands run in a scratch folder
holding a copy of ``params.yaml``. A benchmark, not a test: no time limit is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHEAP_STAGES = ("secret", "stratify")  # privacy, data: the cheapest packages
SUBCOMMANDS = ("stage", "predict", "sanitize", "verify", "key", "dvc-yaml", "track", "secret")

# `dprelease stage NAME` up to the stage's start: the CLI's own path, with the registry's run_stage replaced by one
# that resolves the stage (what the real one does first) and returns without running it
UNTIL_START = (
    "import sys; import dprelease.pipeline.registry as r; "
    "r.run_stage = lambda name, params, root='.': {'resolved': r.get(params, name).run.__name__}; "
    "from dprelease.cli import main; sys.exit(main(['stage', sys.argv[1]]))"
)


def flow_modules() -> list[str]:
    """The modules of ``flows/`` with a command line (``if __name__ == "__main__"``)."""
    return sorted(
        p.stem
        for p in (ROOT / "flows").glob("*.py")
        if p.stem != "__init__" and '__name__ == "__main__"' in p.read_text(encoding="utf-8")
    )


def commands() -> dict[str, tuple[list[str], bool]]:
    """``{label: (argv, runs in the scratch folder)}``."""
    dp = str(BIN / "dprelease")
    out: dict[str, tuple[list[str], bool]] = {"dprelease --help": ([dp, "--help"], False)}
    out.update({f"dprelease {c} --help": ([dp, c, "--help"], False) for c in SUBCOMMANDS})
    out.update(
        {f"dprelease stage {n} (to start)": ([sys.executable, "-c", UNTIL_START, n], True) for n in CHEAP_STAGES}
    )
    out["dprelease stage no_such_stage (error)"] = ([dp, "stage", "no_such_stage"], True)
    out.update(
        {f"python -m flows.{m} --help": ([sys.executable, "-m", f"flows.{m}", "--help"], False) for m in flow_modules()}
    )
    return out


def time_once(argv: list[str], cwd: Path, env: dict) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode, (proc.stderr or proc.stdout).strip().splitlines()[-1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=5, help="runs per command (default: 5)")
    ap.add_argument("--only", default=None, help="time only the commands whose label contains this")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dprelease-startup-"))
    shutil.copy2(ROOT / "params.yaml", scratch / "params.yaml")
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PREFECT_HOME": str(scratch / ".prefect"),
        "OMP_NUM_THREADS": "1",
    }
    print(
        f"{'command':48s} {'median s':>9s} {'min s':>7s} {'max s':>7s}  exit  "
        f"(n={args.n}, python {sys.version.split()[0]})"
    )
    try:
        for label, (argv, in_scratch) in commands().items():
            if args.only and args.only not in label:
                continue
            runs = [time_once(argv, scratch if in_scratch else ROOT, env) for _ in range(args.n)]
            secs = [r[0] for r in runs]
            codes = sorted({r[1] for r in runs})
            print(
                f"{label:48s} {statistics.median(secs):9.2f} {min(secs):7.2f} {max(secs):7.2f}  "
                f"{','.join(map(str, codes))}",
                flush=True,
            )
            if codes != [0] and "error" not in label:
                print(f"    last line: {runs[-1][2]}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
