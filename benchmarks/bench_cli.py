"""Wall time of the command-line entry points that compute nothing: the median of N fresh processes each.

    python benchmarks/bench_cli.py [-n 5] [--release release] [--key agency.pub]

Timed: ``dprelease --help``, ``dprelease verify --help`` and, when a release folder exists (``--release``, default
the project's ``release/``), ``dprelease verify --release DIR --key KEY`` (``--key``, default ``agency.pub`` or the
file ``DPRELEASE_AGENCY_KEY`` names; without a key the refusal is what is timed, and the line says so). Each
line also names the heavy packages (torch, sklearn, transformers) the command imported, from one more run with
``python -X importtime``. Paths are the caller's (run it from the project folder). Nothing is written. A
benchmark that prints figures, not a test: no time limit is asserted anywhere (the imports themselves are
tests/test_cli_imports.py's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DPRELEASE = Path(sys.executable).parent / "dprelease"
HEAVY = ("torch", "sklearn", "transformers")
KEY_ENV = "DPRELEASE_AGENCY_KEY"


def time_once(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode


def heavy_imports(argv: list[str]) -> list[str]:
    """The heavy top-level packages ``argv`` (a ``dprelease`` command line) imports, read from ``-X importtime``."""
    code = "import sys; from dprelease.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv[1:]], capture_output=True, text=True)
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def commands(release: Path, key: str | None) -> dict[str, list[str]]:
    out = {
        "dprelease --help": [str(DPRELEASE), "--help"],
        "dprelease verify --help": [str(DPRELEASE), "verify", "--help"],
    }
    if (release / "release.json").is_file():
        argv = [str(DPRELEASE), "verify", "--release", str(release)] + (["--key", key] if key else [])
        out[f"dprelease verify --release {release}" + (f" --key {key}" if key else " (no key: refused)")] = argv
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=5, help="runs per command (default: 5)")
    ap.add_argument("--release", default="release", help="the release folder verified (default: release)")
    ap.add_argument(
        "--key",
        default=None,
        help="the agency's public key (default: agency.pub when it exists, else $DPRELEASE_AGENCY_KEY)",
    )
    args = ap.parse_args()
    release = Path(args.release)
    key = args.key or ("agency.pub" if Path("agency.pub").is_file() else os.environ.get(KEY_ENV))
    print(
        f"{'command':72s} {'median s':>9s} {'min s':>7s} {'max s':>7s}  exit  heavy imports  "
        f"(n={args.n}, python {sys.version.split()[0]})"
    )
    for label, argv in commands(release, key).items():
        runs = [time_once(argv) for _ in range(args.n)]
        secs = [r[0] for r in runs]
        codes = ",".join(str(c) for c in sorted({r[1] for r in runs}))
        heavy = ", ".join(heavy_imports(argv)) or "none"
        print(
            f"{label:72s} {statistics.median(secs):9.2f} {min(secs):7.2f} {max(secs):7.2f}  {codes:>4s}  {heavy}",
            flush=True,
        )
    if not (release / "release.json").is_file():
        print(
            f"no release folder at {release} (no release.json): `dprelease verify` on a release not timed "
            "(`make run` makes one; --release DIR names another)"
        )


if __name__ == "__main__":
    main()
