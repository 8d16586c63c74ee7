"""The tuning flow: a plug-in's search over its settings (the flow named ``tune``; SWAG-PPM's, over c and the
fine-tune epochs: its rules and cells are in its package, :class:`dprelease.contracts.mechanism.Search`).

``python -m flows.tune [--mode search|grid] [--set tune.target_epsilon=8] [--no-track]``

This module holds Prefect, Dask and the arguments only: each cell is a Prefect task (``cell_task``); the
cells of a grid run concurrently on the task runner (a pool of tune.workers threads; with dask.enabled, the
Dask cluster: one cell per worker process, its posterior passes in that worker); a search's cells run one after
another in the flow, their posterior passes' seeded chunks on the cluster with dask.enabled (flows/runners.py).
Stages shared between cells are restored from the stage store instead of recomputed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dprelease.contracts.stage import StageAccess
from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.config import Params
from dprelease.pipeline import registry
from flows import cli, runners

FLOW = "tune"


def _spec():
    return registry.flows()[FLOW]  # every plug-in: the one declaring the flow named tune


def _access() -> StageAccess:
    """The registry's functions for the search, its ``run`` the cached Prefect task (the stage store)."""
    from dprelease.pipeline.plan import plan
    from tasks.stages import run

    return StageAccess(run=run, declared=registry.stages, plan=plan)


def _cell(base: dict, root: str, setting: list) -> dict:
    """One cell of the search (``cell_task``): the plug-in's, with the registry's functions handed in."""
    return _spec().search.cell(base, root, tuple(setting), stages=_access())


def _tune_flow(params: dict, root: str = ".", mode: str = "search", track: bool = True) -> dict:
    from dprelease.compare.reports.tune import write_tune_report

    cell_task = __getattr__("cell_task")
    p = Params.model_validate(params)

    def cells(settings: list[tuple]) -> list[dict]:
        if len(settings) == 1:  # a search's next cell: here, in the flow
            return [cell_task(params, root, list(settings[0]))]
        futures = [cell_task.submit(params, root, list(s)) for s in settings]
        return [f.result() for f in futures]

    with runners.on_dask():  # on a Dask runner: grid cells on workers, search cells' pass chunks on the cluster
        result = _spec().search.run(p, root, mode, stages=_access(), cells=cells)
    write_tune_report(p, root, result)
    record = _spec().search.track
    if track and record is not None:
        from dprelease.pipeline.tracking_experiments import log_tracked

        cli.tracked(result, lambda: log_tracked(p, root, record(p, root, result)))
    return result


def __getattr__(name: str):
    """``tune_flow`` and ``cell_task``, Prefect's flow and task, built on first use (:func:`flows.cli.prefect_flow`)."""
    if name == "cell_task":
        if name not in globals():
            from prefect import task
            from prefect.cache_policies import NONE

            globals()[name] = task(persist_result=False, cache_policy=NONE, task_run_name="cell {setting}")(_cell)
        return globals()[name]
    if name == "tune_flow":
        from prefect.task_runners import ThreadPoolTaskRunner

        return cli.prefect_flow(
            globals(),
            name,
            _tune_flow,
            name=_spec().title,
            log_prints=False,
            persist_result=False,
            task_runner=ThreadPoolTaskRunner(max_workers=2),
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument(
        "--mode",
        choices=("search", "grid"),
        default="search",
        help="search: the diagnostic-driven search (default); grid: every cell of the declared grid",
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()

    def check(p: Params) -> None:
        spec = _spec()
        if spec.check is not None:
            spec.check(p)

    def go(p: Params) -> dict:
        runner = runners.task_runner(p, threads=p.tune.workers)
        return __getattr__("tune_flow").with_options(task_runner=runner)(
            p.model_dump(mode="json"), args.root, args.mode, not args.no_track
        )

    code, _, result = cli.run(args, check, go)
    if code:
        return code
    report = Path(args.root) / "reports" / "tune" / f"{args.mode}.md"
    cli.print_report(report, result, time.perf_counter() - start, "tuning run")
    return cli.tracking_status(result, "tuning report")


if __name__ == "__main__":
    sys.exit(main())
