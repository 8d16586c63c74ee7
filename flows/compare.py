"""Comparison flow: non-private, SWAG-PPM (round 2, the release, the spec-scale and censored variants)
and DP-SGD on one split, then the report.

``python -m flows.compare [--params params.yaml] [--set dpsgd.target_epsilon=4] [--no-track]``

Stages are the same cached tasks as the release flow, so a finished release is reused. The arms that
do not depend on the SWAG-PPM chain (non-private; DP-SGD when its target ε is given) run concurrently
with it on the task runner: a thread pool, or with ``dask.enabled`` a Dask cluster, which then also runs
the posterior passes' seeded chunks (flows/runners.py).
"""

from __future__ import annotations

import sys
import time

from dprelease import offline  # noqa: F401  (offline switches before transformers loads)
from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from dprelease import registry
from dprelease.dpsgd.stages import check_dpsgd, preview_train_size
from dprelease.config import ConfigError, Params
from dprelease.layout import Layout
from flows import cli, runners
from tasks.stages import run, submit

PRE = ("stratify", "featurize")


def check_arms(params: Params) -> None:
    if "swag_ppm_reweighted" in params.compare.arms and not params.ppm.reweight:
        raise ConfigError("compare.arms: swag_ppm_reweighted needs ppm.reweight: true")


@flow(name="swag-ppm-compare", task_runner=ThreadPoolTaskRunner(max_workers=2), log_prints=False,
      persist_result=False)
def compare_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    p = Params.model_validate(params)
    arms = set(p.compare.arms)
    out: dict = {"timings": {}}

    def timed(name: str) -> None:
        start = time.perf_counter()
        out[name] = run(name, p, root)
        cli.record_time(out["timings"], p, name, time.perf_counter() - start)

    with runners.on_dask():  # on a Dask runner: side arms on workers, pass chunks on the cluster
        for name in PRE:
            timed(name)
        if "dpsgd" in arms:  # batch vs data size, δ range: fail before any training
            check_dpsgd(p, Layout.from_params(p, root))
        side = []
        if "nonprivate" in arms:
            side.append(submit("nonprivate", p, root))
        dp_now = "dpsgd" in arms and p.dpsgd.target_epsilon is not None
        if dp_now:
            side += [submit("dpsgd", p, root), submit("dpsgd_sweep", p, root)]
        variants = [a for a in ("swag_ppm", "swag_ppm_uncalibrated", "swag_ppm_censored") if a in arms]
        needs_ppm = arms & {"swag_ppm_reweighted", *variants} or ("dpsgd" in arms and not dp_now)
        if needs_ppm:
            for spec in registry.group(p, "release"):
                if spec.name not in PRE:
                    timed(spec.name)
        for arm in variants:
            timed(arm)
        if "dpsgd" in arms and not dp_now:
            side += [submit("dpsgd", p, root), submit("dpsgd_sweep", p, root)]
        for future in side:
            future.result()
        timed("compare_report")
    timed("publish")  # the model card now shows the non-private comparison
    if track:
        from tasks.stages import track_compare_task

        cli.tracked(out, lambda: track_compare_task(params, root))
    return out


def _check(params: Params, root: str) -> None:
    check_arms(params)
    if "dpsgd" in params.compare.arms:  # batch vs data size, δ range: before any Prefect start-up
        check_dpsgd(params, n=preview_train_size(params, root))


def main(argv: list[str] | None = None) -> int:
    args = cli.parser(__doc__).parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(args, lambda p: _check(p, args.root),
                                   lambda p: compare_flow.with_options(task_runner=runners.task_runner(p))(
                                       p.model_dump(mode="json"), args.root, not args.no_track))
    if code:
        return code
    report = Layout.from_params(params, args.root).reports / "compare" / "report.md"
    cli.print_report(report, result, time.perf_counter() - start, "arm")
    return cli.tracking_status(result, "comparison report")


if __name__ == "__main__":
    sys.exit(main())
