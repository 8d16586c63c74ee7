"""NVDP flow (issue 11): token-state cache, every task's (variant, λ) grid, the attacker's probe, the membership
audit of the OSHA classifiers (the privacy-audit package's NVDP arm), the sanitizer release and the report, as cached stage tasks; one MLflow parent run with a child run per task × variant.

``python -m flows.nvdp [--params params.yaml] [--set nvdp.epochs=2] [--no-track]``  (``make nvdp``)

The token states are computed once per dataset (stage ``nvdp_states``) and reused by every cell; the task stages
run two at a time on a thread pool (one torch thread each, ``nvdp.torch_threads``), since this is a 2-core machine.
"""

from __future__ import annotations

import sys
import time

from dprelease import offline  # noqa: F401  (offline switches before transformers loads)
from prefect import flow, task
from prefect.cache_policies import NONE
from prefect.task_runners import ThreadPoolTaskRunner

from dprelease.config import Params
from dprelease.layout import Layout
from dprelease.nvdp.stages import TASKS
from flows import cli
from tasks.stages import run, submit


@task(persist_result=False, cache_policy=NONE)
def track_nvdp_task(params: dict, root: str) -> str:
    from dprelease.tracking_experiments import log_nvdp_run

    return log_nvdp_run(Params.model_validate(params), root)


@flow(name="nvdp", task_runner=ThreadPoolTaskRunner(max_workers=2), log_prints=False, persist_result=False)
def nvdp_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    p = Params.model_validate(params)
    out: dict = {"timings": {}}
    start = time.perf_counter()

    def timed(name: str) -> None:
        t = time.perf_counter()
        out[name] = run(name, p, root)
        out["timings"][name] = round(time.perf_counter() - t, 2)

    timed("nvdp_states")
    names = [f"nvdp_{t}" for t in TASKS if t in p.nvdp.tasks]
    futures = {name: submit(name, p, root) for name in names}
    for name, future in futures.items():
        out[name] = future.result()
    out["timings"]["tasks (two at a time)"] = round(time.perf_counter() - start - out["timings"]["nvdp_states"], 2)
    for name in ("nvdp_probe", "nvdp_membership", "audit_nvdp", "nvdp_sanitizer", "nvdp_report"):
        timed(name)
    if track:
        cli.tracked(out, lambda: track_nvdp_task(params, root))
    return out


def main(argv: list[str] | None = None) -> int:
    args = cli.parser(__doc__).parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(args, lambda p: None,
                                   lambda p: nvdp_flow(p.model_dump(mode="json"), args.root, not args.no_track))
    if code:
        return code
    report = Layout.from_params(params, args.root).reports / "nvdp" / "report.md"
    cli.print_report(report, result, time.perf_counter() - start, "task × variant")
    print("timings (s): " + ", ".join(f"{k} {v}" for k, v in result["timings"].items()))
    return cli.tracking_status(result, "NVDP report")


if __name__ == "__main__":
    sys.exit(main())
