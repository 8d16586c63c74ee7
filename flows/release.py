"""The release flow: the registry's ``release`` stages as cached Prefect tasks (the declared mechanism,
``released.mechanism``, published; SWAG-PPM's chain measured beside it), then one MLflow run. ``python -m flows.release [--params params.yaml] [--set ppm.c=0.8] [--no-track] [--new-key]``.
Before anything runs, the randomness and agency keys are compared with those dvc.lock and the existing release
were made with (dprelease.core.privacy.key_guard): another key is refused in one line unless ``--new-key`` (a new release).
With ``dask.enabled`` the posterior passes run their seeded chunks on a Dask cluster (flows/runners.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.config import Params
from dprelease.core.io import write_json
from dprelease.pipeline import plan as pipeline
from dprelease.pipeline import registry
from flows import cli, runners
from flows.run import run_plan
from tasks import dvc_record


def _release_flow(params: dict, root: str = ".", track: bool = True) -> dict:
    from tasks.stages import track_task

    p = Params.model_validate(params)
    out: dict = {"timings": {}}
    with runners.on_dask():  # on a Dask runner: posterior passes in chunks on the cluster
        # in a DVC project every stage of dvc.yaml, in its order (all recorded); else the release flow's plan
        planned = dvc_record.pipeline(p, "release", root)  # every plug-in declared once, handed on to the runner
        plan = pipeline.Plan(order=[s.name for s in planned], waits={}, stages={s.name: s for s in planned})
        run_plan(plan, p, root, out)
    skipped = dvc_record.unrecorded(p, [n for n in out if n != "timings"], root)
    if skipped:  # e.g. --set: outputs that are not what dvc.yaml with params.yaml describes stay out of dvc.lock
        name, why = next(iter(skipped.items()))
        print(f"dprelease: note: {len(skipped)} stage(s) not recorded in dvc.lock ({name}: {why})", file=sys.stderr)
    if track:
        cli.tracked(out, lambda: track_task(params, root, None, out["timings"]))
        if out.get("mlflow_run_id"):
            dvc_record.record("track", p, root)  # the MLflow run, as `dprelease track` under dvc repro
    return out


def __getattr__(name: str):
    if name == "release_flow":  # the Prefect flow, built on first use (flows.cli.prefect_flow)
        return cli.prefect_flow(
            globals(), name, _release_flow, name="dprelease-release", log_prints=False, persist_result=False
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _keys(args):
    """The cheap check before Prefect starts: the keys are those the recorded release was made with."""

    def check(p: Params) -> None:
        from dprelease.core.privacy import key_guard
        from dprelease.pipeline import registry

        registry.refuse_inert(p, cli.parse_overrides(args.set))  # a --set the release's own choice replaces: one line
        registry.release_spec(p)  # released.mechanism names a mechanism that releases (one line, nothing run)

        for line in key_guard.check(p, args.root, new_key=args.new_key):
            print(line, file=sys.stderr)
        if args.new_key:  # make both keys now: every stage that re-checks them finds the replacement recorded
            from dprelease.core.privacy import secret
            from dprelease.core.release.signing import ensure_key, key_folder

            secret.init(Path(args.root) / p.artifacts)
            ensure_key(key_folder(p, args.root))

    return check


def main(argv: list[str] | None = None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument(
        "--new-key",
        action="store_true",
        help="make the release even if the randomness or agency key differs from (or is missing where) "
        "dvc.lock or the existing release recorded one: a new release, the replaced key recorded in "
        "the key folder's history.json",
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()
    code, params, result = cli.run(
        args,
        _keys(args),
        lambda p: __getattr__("release_flow").with_options(task_runner=runners.task_runner(p))(
            p.model_dump(mode="json"), args.root, not args.no_track
        ),
    )
    if code:
        return code
    wall = time.perf_counter() - start  # the flow's wall time: what the operator waited (printed, never recorded)
    # what is recorded (metrics/timings.json, MLflow): the timed stages' sum only when an untimed stage ran (a
    # duration that grows with selection's tries or re-weighting's refits is not covered by ε and never published)
    untimed = any(not s.timed for s in registry.group(params, "release"))
    seconds = sum(result["timings"].values()) if untimed else wall
    write_json(
        Path(args.root) / "metrics" / "timings.json",
        {"flow_seconds": round(seconds, 2), "stages": list(result["timings"].items())},
    )
    from flows.summary import print_summary  # the release's figures (and what they import): once it is written

    print_summary(params, args.root, result, wall)
    return cli.tracking_status(result, "release")


if __name__ == "__main__":
    sys.exit(main())
