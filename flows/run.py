"""The one generic flow: run a plug-in's flow (a :class:`dprelease.contracts.mechanism.FlowSpec`) from the stage graph.

``python -m flows.run NAME [--params params.yaml] [--set KEY=VALUE] [--no-track]``  (``make flow FLOW=NAME``;
``python -m flows.run --list`` names them). The plan — which stages, in which order, which may run at once —
comes from the stages' declared deps and outs (:mod:`dprelease.pipeline.plan`); every stage is the same cached
Prefect task as everywhere else (:mod:`tasks.stages`), so finished stages are reused. :func:`run_plan` is
the one timed stage loop every flow uses.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from dprelease.contracts import parallel
from dprelease.contracts.layout import Layout
from dprelease.contracts.mechanism import FlowSpec
from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.config import Params
from dprelease.pipeline import plan as pipeline
from dprelease.pipeline import registry
from flows import cli, runners


def plan_of(spec: FlowSpec, params: Params) -> pipeline.Plan:
    """The flow's plan, every plug-in's ``declare`` called once: the planned stages' declarations travel with it
    (``plan.stages``) to the runner, the tasks and the summary, and ``plan.owners`` says whose each one is."""
    declared = registry.declared(params)
    plan = pipeline.plan(
        registry.stages(params, declared), params, groups=spec.groups, targets=spec.targets, then=spec.then
    )
    owners = {  # publish is the core's, whichever release's package it follows
        s.name: registry.PUBLISH_PACKAGE if s.name == registry.PUBLISH else package
        for package, ss in declared.items()
        for s in ss
        if s.name in plan.stages
    }
    return replace(plan, owners=owners)


def run_plan(plan: pipeline.Plan, params: Params, root: str, out: dict, *, workers: int = 1) -> dict:
    """Run the planned stages: one after another (``workers`` 1), or each as soon as the stages it waits on are
    done, ``workers`` at a time on the flow's task runner (on Dask, stages with posterior passes run in the
    flow process meanwhile: :func:`in_flow_process`). Each stage's summary goes to ``out[name]`` and its
    seconds (from start to finish; with workers > 1, from submission) to ``out["timings"]``, unless the stage
    is untimed (:func:`flows.cli.record_time`)."""
    from tasks.stages import run as run_stage_task
    from tasks.stages import submit

    timings = out.setdefault("timings", {})
    if workers <= 1:
        for i, name in enumerate(plan.order, 1):
            print(f"[{i}/{len(plan.order)}] {name} …", flush=True)  # progress: a long stage is visible
            start = time.perf_counter()
            out[name] = run_stage_task(name, params, root, stage=plan.stages.get(name))
            _done(
                name, cli.record_time(timings, params, name, time.perf_counter() - start, stage=plan.stages.get(name))
            )
        return out
    inline = in_flow_process(plan, params)
    pending, running, done = list(plan.order), {}, set()

    def submit_ready() -> None:
        for name in list(pending):
            if len(running) >= workers:
                return
            if name not in inline and plan.waits[name] <= done:
                running[submit(name, params, root, stage=plan.stages.get(name))] = (name, time.perf_counter())
                pending.remove(name)

    while True:
        submit_ready()
        ready = next((n for n in pending if n in inline and plan.waits[n] <= done), None)
        if ready is not None:  # here, while the submitted stages run on the task runner
            pending.remove(ready)
            start = time.perf_counter()
            out[ready] = run_stage_task(ready, params, root, stage=plan.stages.get(ready))
            _done(
                ready,
                cli.record_time(timings, params, ready, time.perf_counter() - start, stage=plan.stages.get(ready)),
            )
            done.add(ready)
            continue
        if not running:
            break
        from prefect.futures import as_completed

        future = next(as_completed(list(running)))
        name, start = running.pop(future)
        out[name] = future.result()
        _done(name, cli.record_time(timings, params, name, time.perf_counter() - start, stage=plan.stages.get(name)))
        done.add(name)
    if pending:  # pragma: no cover - a plan is a DAG, so everything becomes ready
        raise RuntimeError(f"stages never became ready: {pending}")
    return out


def _done(name: str, seconds: float) -> None:
    """A finished stage's progress line: cached (its outputs current, restored from the stage store or as
    ``dvc.lock`` records them) or run; an untimed stage's duration is never shown (it depends on the data)."""
    from tasks.stages import HOW

    how = {"current": "cached", "store": "restored from the stage store", "dvc.lock": "as dvc.lock records it"}
    what = how.get(HOW.get(name, ""), "done")
    print(f"      {name} {what}" + (f" ({seconds:.1f} s)" if seconds else ""), flush=True)


def in_flow_process(plan: pipeline.Plan, params: Params) -> set[str]:
    """Stages that run in the flow process rather than as submitted tasks: with a chunk mapper installed
    (a Dask runner, :func:`flows.runners.on_dask`), every stage whose code reaches :mod:`dprelease.contracts.parallel`,
    so its posterior-pass chunks spread over the cluster (inside a worker they would run as one task)."""
    if not parallel.active():
        return set()
    by_name = plan.stages or {s.name: s for s in registry.stages(params)}
    return {n for n in plan.order if {".", "contracts/parallel.py"} & set(by_name[n].code)}


def preflight(spec: FlowSpec, params: Params, root: str, *, plan: pipeline.Plan | None = None) -> pipeline.Plan:
    """The flow's own rule, then the check of every plug-in one of whose stages is planned (before Prefect);
    returns the plan (``plan``: one already made with these params)."""
    if spec.check is not None:
        spec.check(params)
    plan = plan if plan is not None else plan_of(spec, params)
    for package in dict.fromkeys(plan.owners[n] for n in plan.order):
        m = registry.plugin(package)
        if m.check is not None:
            m.check(params, root)
    return plan


def _graph_flow(name: str, params: dict, root: str = ".", track: bool = True) -> dict:
    return run_flow(name, params, root, track)


def __getattr__(name: str):
    if name == "graph_flow":  # the generic Prefect flow, built on first use (flows.cli.prefect_flow)
        return cli.prefect_flow(
            globals(), name, _graph_flow, name="dprelease-flow", log_prints=False, persist_result=False
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_flow(name: str, params: dict, root: str = ".", track: bool = True) -> dict:
    """The body of a plug-in flow (inside a Prefect flow run): plan, run, track."""
    spec = registry.flows()[name]
    p = Params.model_validate(params)
    out: dict = {"timings": {}}
    with runners.on_dask():  # on a Dask runner: concurrent stages on workers, pass chunks on the cluster
        run_plan(plan_of(spec, p), p, root, out, workers=spec.workers)
    if track and spec.track is not None:
        cli.tracked(out, lambda: track_flow(spec, p, root, out["timings"]))
    return out


def track_flow(spec: FlowSpec, params: Params, root: str, timings: dict) -> str:
    if callable(spec.track):  # a plug-in's record as plain data
        from dprelease.pipeline.tracking_experiments import log_tracked

        return log_tracked(params, root, spec.track(params, root, timings))
    from dprelease.pipeline import tracking, tracking_experiments

    shared = {
        "pipeline": lambda: tracking.log_pipeline_run(params, root, None, timings=timings),
        "compare": lambda: tracking_experiments.log_compare_run(params, root),
    }
    return shared[spec.track]()


def main(argv: list[str] | None = None, name: str | None = None, prefect_flow=None) -> int:
    """``prefect_flow``: a function returning a flow module's own ``@flow`` (params, root, track), to run instead
    of the generic one (called once the arguments and params are checked: Prefect loads only then)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    known = registry.flow_help()  # {name: (title, doc)} from the plug-in index: no plug-in imported yet
    if name is None:
        if not argv or argv[0] in ("-h", "--help", "--list"):
            print(__doc__.strip() + "\n\nflows:\n" + "\n".join(f"  {n:10s} {doc}" for n, (_, doc) in known.items()))
            return 0 if argv else cli.EXIT_ERROR
        name, argv = argv[0], argv[1:]
    if name not in known:  # not in the plug-in index (a flow just added?): every plug-in decides
        known = {n: (f.title, f.doc) for n, f in registry.flows().items()}
    if name not in known:
        print(f"dprelease: error: unknown flow {name!r} (flows: {', '.join(known)})", file=sys.stderr)
        return cli.EXIT_ERROR
    title, doc = known[name]
    args = cli.parser(f"{title}: {doc}").parse_args(argv)
    spec = registry.flows()[name]  # every plug-in: the plan may take stages of any package
    if spec.search is not None:  # its own loop, not a plan (the tune flow)
        print(f"dprelease: error: flow {name!r} runs as `python -m flows.{name}`", file=sys.stderr)
        return cli.EXIT_ERROR
    start = time.perf_counter()

    def go(p: Params) -> dict:
        raw, track = p.model_dump(mode="json"), not args.no_track
        if prefect_flow is not None:
            return prefect_flow().with_options(task_runner=runners.task_runner(p))(raw, args.root, track)
        generic = __getattr__("graph_flow")
        runner = runners.task_runner(p)
        return generic.with_options(name=spec.title, task_runner=runner)(spec.name, raw, args.root, track)

    planned: dict = {}  # the plan preflight made, for the summary (its stages' declarations)

    def check(p: Params) -> None:
        planned["plan"] = preflight(spec, p, args.root)

    code, params, result = cli.run(args, check, go)
    if code:
        return code
    if spec.report:
        report = Layout.from_params(params, args.root).reports / spec.report
        cli.print_report(report, result, time.perf_counter() - start, spec.children)
    from flows.summary import release_blocks

    plan = planned.get("plan") or plan_of(spec, params)
    for line in release_blocks(params, args.root, plan.order, plan.stages):  # every release folder it signed
        print(line)
    print("per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in result["timings"].items()))
    return cli.tracking_status(result, f"{spec.name} report")


if __name__ == "__main__":
    sys.exit(main())
