"""``python -m flows.nvdp [--params params.yaml] [--set KEY=VALUE] [--no-track]`` (``make nvdp``): the plug-in flow
``nvdp`` run by the generic graph runner (:mod:`flows.run`). NVDP with parameter clipping: token states once per
dataset, the task grids two at a time (one torch thread each), probe, membership audit, sanitizer release, report."""

from __future__ import annotations

import sys

from flows.run import main as run_main


def main(argv: list[str] | None = None) -> int:
    return run_main(argv, name="nvdp")


if __name__ == "__main__":
    sys.exit(main())
