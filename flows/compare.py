"""``python -m flows.compare [--params params.yaml] [--set KEY=VALUE] [--no-track]`` (``make compare``): the plug-in
flow ``compare`` run by the generic graph runner (:mod:`flows.run`). SWAG-PPM vs non-private training vs DP-SGD on
one split, then the report. The arms that do not depend on the SWAG-PPM chain run beside it on the task runner."""

from __future__ import annotations

import sys

from flows import cli
from flows.run import main as run_main
from flows.run import run_flow


def _compare_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    return run_flow("compare", params, root, track)


def __getattr__(name: str):
    if name == "compare_flow":  # the Prefect flow, built on first use (flows.cli.prefect_flow)
        return cli.prefect_flow(
            globals(), name, _compare_flow, name="swag-ppm-compare", log_prints=False, persist_result=False
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    return run_main(argv, name="compare", prefect_flow=lambda: __getattr__("compare_flow"))


if __name__ == "__main__":
    sys.exit(main())
