"""``python -m flows.compare [--params params.yaml] [--set KEY=VALUE] [--no-track]`` (``make compare``): the plug-in
flow ``compare`` run by the generic graph runner (:mod:`flows.run`). SWAG-PPM vs non-private training vs DP-SGD on
one split, then the report. The arms that do not depend on the SWAG-PPM chain run beside it on the task runner."""

from __future__ import annotations

import sys

from prefect import flow

from flows.run import main as run_main
from flows.run import run_flow


@flow(name="swag-ppm-compare", log_prints=False, persist_result=False)
def compare_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    return run_flow("compare", params, root, track)


def main(argv: list[str] | None = None) -> int:
    return run_main(argv, name="compare", prefect_flow=compare_flow)


if __name__ == "__main__":
    sys.exit(main())
