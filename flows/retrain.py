"""Retrain flow: a new extract in, a registered (and perhaps promoted) version out.

``python -m flows.retrain SNAPSHOT [--set …] [--no-track]`` retrains on one extract (the bundled CSV
format or OSHA's original one); ``python -m flows.retrain --simulate`` cuts ``data.path`` into the growing
``EventDate`` windows of ``service.windows`` and retrains on each in turn (the cadence of new extracts).

Each retrain: copies the snapshot into ``data/snapshots/`` and versions it with DVC (``dvc add``; pushed
to DVC's default remote when the clone has one, ``make dvc-remote``); runs
the release stages in ``runs/retrain/<snapshot id>/`` (stages shared with earlier runs come from the stage
store, so an unchanged snapshot takes seconds); audits the released arm (``service.audit``); logs the run
to MLflow with the release as a pyfunc model; registers a version with its figures as tags, adds it to the
private privacy ledger, and moves the ``production`` alias only if every gate passes. The stages run in
a subflow on the task runner params ask for (``dask.enabled``: posterior-pass chunks on a Dask cluster).
The deployment that ``make serve`` schedules runs this same flow.

Before any of that, the retrain compares the snapshot's sha256, the release stages' code and the params
they read (``dprelease.pipeline.service.fingerprint``) with the tags of the ``production`` (else the newest)
version: when they are the same (and that version was audited, if ``service.audit``), the retrain ends
at once, Completed with the message ``unchanged: …``, and registers nothing (nothing is copied, versioned
or run). A deployment run that finds the project root held by another run (the other deployment, a
command line retrain) ends Cancelled, its message naming the holder; a run of the same deployment never
starts while one runs (``make serve`` deploys with Prefect's CANCEL_NEW concurrency strategy).

In Prefect each run is named ``retrain <snapshot id>``; its progress (snapshot, each stage's seconds,
the registry outcome) is logged to the run (the UI's Logs tab; the console too), and it leaves a
Markdown artifact ``retrain-summary`` with the headline figures (ε, its interval, ε lower bound of the
audit, F1) and the gate decision.

This module holds the Prefect flows and the command line only; the logic is in ``dprelease.pipeline.service``:
``snapshots`` (windows, DVC), ``retrain`` (the run folder and its reports), ``promotion`` (registry, ledger,
gates).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from pathlib import Path

from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.config import Params, load_params, parse_params
from dprelease.core.config import params_file as default_params_file
from dprelease.core.errors import ConfigError, OneLineError
from flows import cli

# Prefect, torch and the service are imported inside the functions that use them: ``--help`` imports none of them


def __getattr__(name: str):
    """The Prefect flows, built on first use (:func:`flows.cli.prefect_flow`): the deployments' entrypoint
    ``flows/retrain.py:retrain_flow`` finds them."""
    if name in FLOWS:
        fn, options = FLOWS[name]
        return cli.prefect_flow(globals(), name, fn, **options)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ARTIFACT_KEY = "retrain-summary"
# a child of Prefect's run logger: its records go to the current run's logs (and Prefect's console handler);
# its own level, as prefect.toml keeps Prefect's loggers at WARNING
PROGRESS = logging.getLogger("prefect.flow_runs.dprelease")
PROGRESS.setLevel(logging.INFO)


def progress(message: str) -> None:
    """One progress line, logged to the running flow run (call inside a flow or task only)."""
    PROGRESS.info(message)


def _snapshot_path(top: Path, p: Params, snapshot: str | None) -> Path:
    from dprelease.pipeline.service.snapshots import snapshot_path

    return snapshot_path(top, snapshot, default=p.service.snapshot or p.data.path)


def run_name() -> str:
    """``retrain <snapshot id>``: the Prefect run's name, from its parameters (before the flow body runs)."""
    from prefect.runtime import flow_run

    from dprelease.core.privacy import secret
    from dprelease.pipeline.service.snapshots import snapshot_id

    args = flow_run.parameters
    try:
        top = Path(args.get("root") or ".").resolve()
        p = load_params(top / (args.get("params_file") or default_params_file()), args.get("overrides"))
        path = _snapshot_path(top, p, args.get("snapshot"))
        if not (secret.key_dir(top / p.artifacts) / "key").is_file():  # no key yet: the first run makes it
            return f"retrain {path.name.split('.')[0]}"
        return f"retrain {snapshot_id(path, artifacts=top / p.artifacts)}"
    except Exception:  # noqa: BLE001 - the flow body reports the problem itself, in one line
        return "retrain (snapshot or params unreadable)"


def pipeline_run_name() -> str:
    from prefect.runtime import flow_run

    return f"stages {Path(flow_run.parameters.get('where', '?')).name}"


def _retrain_flow(
    snapshot: str | None = None,
    root: str = ".",
    params_file: str | None = None,
    overrides: dict | None = None,
    track: bool = True,
) -> dict:
    """Retrain on ``snapshot`` (default ``service.snapshot``, else ``data.path``). Parameters are public
    (Prefect stores them): paths and public settings only."""
    from prefect.runtime import deployment
    from prefect.states import Completed

    from dprelease.core.locks import Busy, root_lock

    top = Path(root).resolve()
    p = load_params(top / (params_file or default_params_file()), overrides)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(root_lock(top, "retrain"))
        except Busy as err:
            if deployment.id is None:  # the command line: exit 2 with the one line, as before
                raise
            why = f"skipped: {cli.one_line(err)}"  # a deployment run: ends Cancelled, saying whom it met
            PROGRESS.warning(why)
            _end_cancelled(why[:1000])
        out = _retrain(p, top, _snapshot_path(top, p, snapshot), track)
    summary_artifact(out)
    return Completed(message=out["message"], data=out) if out.get("unchanged") else out


def _end_cancelled(why: str) -> None:
    """End this deployment run Cancelled with ``why``, and stop it. A flow that *returns* a Cancelled state
    makes Prefect's engine raise ``CancelledRun`` after the fact and log it as an unexpected ERROR in the
    worker's log; so the run's final state is set through the API and the engine is stopped with ``Abort``,
    which it ends quietly (exit 0) without touching that state."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import Abort
    from prefect.runtime import flow_run
    from prefect.states import Cancelled

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run.id, Cancelled(message=why), force=True)
    raise Abort(why)


def _unchanged(p: Params, top: Path, snapshot: Path) -> tuple[dict, dict | None]:
    """(the fingerprint of what this retrain would make, the registry summary of the production or newest
    version made from exactly that, or None). Reads and hashes only: nothing is copied or run."""
    from dprelease.core.privacy import secret
    from dprelease.core.release import signing
    from dprelease.pipeline.service import retrain as svc
    from dprelease.pipeline.service.fingerprint import fingerprint
    from dprelease.pipeline.service.promotion import unchanged
    from dprelease.pipeline.service.snapshots import snapshot_rel

    if not snapshot.is_file():
        raise ConfigError(f"snapshot not found: {snapshot}")
    secret.init(top / p.artifacts)  # what the run does first (the key's id is in the fingerprint and the id) ...
    rel = snapshot_rel(snapshot, artifacts=top / p.artifacts)
    signing.ensure_key(signing.key_folder(p, top))  # ... and before it signs (the public key is a stage input)
    fp = fingerprint(svc.run_params(p, rel), svc.run_folder(top, rel), snapshot, top / p.artifacts)
    return fp, unchanged(p, top, fp)


def _retrain(p: Params, top: Path, snapshot: Path, track: bool) -> dict:
    from dprelease.core.headline import headline
    from dprelease.pipeline.service import retrain as svc
    from dprelease.pipeline.service import snapshots
    from dprelease.pipeline.service.promotion import register_release
    from flows import runners

    start, fp, checked = time.perf_counter(), None, {}
    if track:
        fp, same = _unchanged(p, top, snapshot)
        checked["check"] = seconds = round(time.perf_counter() - start, 2)
        if same is not None:
            name = snapshots.snapshot_rel(snapshot, artifacts=top / p.artifacts).name
            message = (
                f"unchanged: snapshot {name}, the release stages' code and params are those of version "
                f"{same['version']} ({same['decision'].removeprefix('unchanged, already ')}); nothing "
                f"registered, nothing run ({seconds:.1f} s)"
            )
            progress(message)
            return {
                "snapshot": name,
                "unchanged": True,
                "message": message,
                "registry": same,
                "timings": checked,
                "seconds": seconds,
            }
    start = time.perf_counter()
    from dprelease.core.privacy import secret

    secret.init(top / p.artifacts)  # the snapshot's id is keyed (the run's secret stage would make the key anyway)
    rel = snapshots.version_snapshot(top, snapshot, artifacts=top / p.artifacts)
    out: dict = {"snapshot": rel.name, "timings": checked | {"snapshot": round(time.perf_counter() - start, 2)}}
    if pushed := snapshots.push_snapshot(top, rel, warn=PROGRESS.warning):
        out["dvc_remote"] = pushed
    progress(
        f"snapshot {rel.name} versioned with DVC ({out['timings']['snapshot']:.1f} s)"
        + (f", pushed to remote {pushed}" if pushed else "")
    )
    where, rp = svc.prepare_run(p, top, rel)
    run_pipeline = __getattr__("pipeline_flow").with_options(
        task_runner=runners.task_runner(p)
    )  # threads, or Dask (dask.*)
    arm, timings = run_pipeline(rp.model_dump(mode="json"), str(where), p.service.audit)
    out["timings"] |= timings
    out["run_folder"] = str(where.relative_to(top))
    if track:
        t = time.perf_counter()
        out |= register_release(
            p,
            rp,
            top,
            where,
            arm,
            snapshot_file=top / rel,
            timings=out["timings"],
            fingerprint=fp,
            audited=p.service.audit,
        )
        out["timings"]["register"] = round(time.perf_counter() - t, 2)
        progress(svc.registry_line(out["registry"], out["timings"]["register"]))
    else:
        out["figures"] = headline(where / "metrics")
    out["seconds"] = round(sum(out["timings"].values()), 2)  # timed stages only (no data-dependent search)
    svc.write_report(where, out)
    return out


def summary_artifact(out: dict) -> None:
    """The run's Markdown artifact (key ``retrain-summary``): headline figures and the gate decision."""
    from prefect.artifacts import create_markdown_artifact

    from dprelease.pipeline.service import retrain as svc

    create_markdown_artifact(
        svc.summary_markdown(out), key=ARTIFACT_KEY, description=f"ε, F1 and the gate decision of {out['snapshot']}"
    )


def _pipeline_flow(params: dict, where: str, audit: bool) -> tuple[str, dict]:
    """The release stages in the run folder, then (``audit``) the privacy audit of the released arm; on a
    Dask task runner the posterior passes run their seeded chunks on the cluster. Returns (arm, timings)."""
    from dprelease.pipeline import registry
    from dprelease.pipeline.service import retrain as svc
    from flows import runners
    from flows.audit import audit_stages
    from tasks.stages import run

    rp, timings = Params.model_validate(params), {}

    def timed(name: str, params: Params) -> None:
        t = time.perf_counter()
        run(name, params, where)
        if cli.record_time(timings, params, name, time.perf_counter() - t):
            progress(f"stage {name}: {timings[name]:.1f} s")
        else:
            progress(f"stage {name}: done")  # a data-dependent search: its duration is never reported

    with runners.on_dask():
        for spec in registry.group(rp, "release"):
            timed(spec.name, rp)
        what, arm = svc.released(where)
        progress(
            f"released {what}"
            + (
                f" ({arm}); auditing it"
                if audit and arm
                else "; no audit (service.audit: false)"
                if not audit
                else "; no audit arm runs it as released"
            )
        )
        if audit and arm:
            # the released arm only; the planted bugs are the audit's own self-test (make audit), not a retrain's
            ap = parse_params(params, {"privacy_audit.arms": [arm], "privacy_audit.planted_bugs": False})
            # not the replay audit: its 2(k + 1) re-fits of the release take ~20 minutes on the default data, more
            # than a retrain's schedule allows (run it with `make audit-replay` on the promoted release)
            for name in [n for n in audit_stages(ap) if n != "audit_replay"]:
                timed(name, ap)
    return arm, timings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshot", nargs="?", help="the extract to retrain on (default: service.snapshot or data.path)")
    ap.add_argument("--simulate", action="store_true", help="retrain on each EventDate window of data.path")
    ap.add_argument(
        "--params",
        default=default_params_file(),
        help="the params file, relative to --root (default: $DPRELEASE_PARAMS or params.yaml)",
    )
    ap.add_argument("--root", default=".", help="the project folder (default: .)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a param, e.g. --set service.audit=false (repeatable)",
    )
    ap.add_argument("--no-track", action="store_true", help="skip MLflow and the registry")
    ap.add_argument("--ledger", action="store_true", help="print the privacy ledger's per-version figures and stop")
    args = ap.parse_args(argv)
    offline.quiet()
    from dprelease.pipeline.service import retrain as svc
    from dprelease.pipeline.service.ledger import Ledger, report_table
    from dprelease.pipeline.service.snapshots import cut_windows

    try:
        if args.ledger:
            p = load_params(Path(args.root) / args.params, cli.parse_overrides(args.set))
            print(report_table(Ledger(Path(args.root) / p.artifacts / "ledger").report()))
            return 0
        overrides = cli.parse_overrides(args.set)
        p = load_params(Path(args.root) / args.params, overrides)
        snapshots = [args.snapshot]
        if args.simulate:
            snapshots = [
                str(f)
                for f in cut_windows(
                    Path(args.root) / p.data.path, p.service.windows, Path(args.root) / "runs" / "windows"
                )
            ]
        for snap in snapshots:
            print(
                svc.result_line(__getattr__("retrain_flow")(snap, args.root, args.params, overrides, not args.no_track))
            )
    except (OneLineError, ValueError, FileNotFoundError) as err:
        print(f"dprelease: error: {cli.one_line(err)}", file=sys.stderr)
        return cli.EXIT_ERROR
    return 0


FLOWS = {
    "retrain_flow": (
        _retrain_flow,
        {"name": "retrain", "flow_run_name": run_name, "log_prints": False, "persist_result": False},
    ),
    "pipeline_flow": (
        _pipeline_flow,
        {"name": "retrain-pipeline", "flow_run_name": pipeline_run_name, "log_prints": False, "persist_result": False},
    ),
}


if __name__ == "__main__":
    sys.exit(main())
