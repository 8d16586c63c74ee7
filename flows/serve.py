"""Scheduled retrains on a real Prefect server: ``make serve`` / ``make serve-stop``.

``python -m flows.serve start [--cron "CRON"]``  (``make serve CRON="…"``) Prefect server on 127.0.0.1:``service.port`` (database in ``.prefect/``),
                                   process work pools ``service.work_pool`` and ``service.gpu_pool``, the
                                   deployments, the current release registered, one worker for the CPU
                                   pool. PIDs in ``.prefect/serve/``.
``python -m flows.serve trigger``  run the scheduled deployment now (not waiting for cron) and wait for it.
``python -m flows.serve status``   what is running, and the scheduled deployment's runs by state.
``python -m flows.serve stop``     stop the worker(s), the server and ``make serve-model``'s model server, by PID.

Deployments (both run ``flows/retrain.py:retrain_flow`` from this project's folder):
``retrain/scheduled`` on cron ``--cron`` if given, else ``service.cron`` (params.yaml is not edited) — on the GPU pool when ``model.backend: full``, else on
the CPU pool; ``retrain/full-backend`` (no schedule) on the GPU pool with ``model.backend: full``. A GPU
machine joins by starting a worker of the GPU pool against this server (README, "Running it as a service").
Each deployment runs one retrain at a time: a run due while another of the same deployment runs ends
Cancelled at once, with the message "Deployment concurrency limit reached." (Prefect's deployment
concurrency limit 1 with the CANCEL_NEW collision strategy), instead of waiting in
``AwaitingConcurrencySlot`` to re-run the same snapshot; a deployment run that finds the project root
held by another run (the other deployment, a command-line retrain) ends Cancelled too, its message naming
the holder (flows/retrain.py).

Before the worker starts (so before any scheduled run can), the project's current release folder
(``release``, from ``make run``) is registered in the MLflow registry as a retrain's release is — figures
as tags, the ledger, the gates (``dprelease.pipeline.service.promotion.register_current``) — once: a second
``make serve`` adds no version of the same release. No release folder: nothing is registered, one line
says so.

The processes are started, health-checked and stopped by ``dprelease.pipeline.service.supervisor``; this module
holds the Prefect side (pools, deployments, a triggered run) and the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from pathlib import Path

from dprelease.core.config import load_params
from dprelease.core.errors import ConfigError, OneLineError
from dprelease.pipeline.service import supervisor as sv
from dprelease.pipeline.service.supervisor import FULL, SCHEDULED, STATE

CODE = Path(__file__).resolve().parents[1]  # where flows/ and tasks/ live (the data root may be elsewhere)
EXIT_ERROR = 2  # one line on stderr (flows.cli.EXIT_ERROR; not imported here: it loads Prefect)
ENTRYPOINT = "flows/retrain.py:retrain_flow"  # what both deployments run (relative to CODE)


def start(root: Path, params_file: str, timeout_s: float = 120.0, cron: str | None = None) -> dict:
    """The server, the pools and deployments (``_deploy``, in the serve environment; ``cron``: the schedule instead
    of ``service.cron``), the current release registered (:func:`register_current`), and a CPU worker."""
    p = load_params(root / params_file)
    return sv.start(
        root,
        port=p.service.port,
        work_pool=p.service.work_pool,
        code=CODE,
        timeout_s=timeout_s,
        deploy=["flows.serve", "_deploy", "--params", params_file, *(["--cron", cron] if cron else [])],
        before_worker=lambda: register_current(root, params_file),
    )


def register_current(root: Path, params_file: str) -> dict:
    """The project's release folder registered (or found registered), as
    :func:`dprelease.pipeline.service.promotion.register_current`; a failure is reported, not raised (serving goes
    on: the first retrain registers a version). Returns ``{"line": what to print}`` (and ``"warning"``)."""
    from dprelease.core import offline

    offline.apply()  # before MLflow, torch or transformers load here
    try:
        from dprelease.pipeline.service.promotion import register_current as register

        out = register(load_params(root / params_file), root)
    except Exception as err:  # noqa: BLE001 - anything MLflow or a bad release raises: one line, serving goes on
        why = " ".join(str(err).split())[:300] or type(err).__name__
        return {"line": f"registry: the current release was not registered ({why})", "warning": True}
    if "skipped" in out:
        return {"line": f"registry: nothing registered ({out['skipped']})"}
    reg = out["registry"]
    eps = "no ε" if reg.get("epsilon") is None else f"ε={reg['epsilon']:.4g}"
    what = (
        f"the current release is already version {reg['version']}, nothing registered"
        if reg["decision"].startswith("unchanged")
        else f"the current release is version {reg['version']}"
    )
    return {
        "line": f"registry: {what} ({reg.get('guarantee')}, {eps}, weighted F1 {reg['utility']:.4f}) → "
        f"{reg['decision']}",
        "version": reg["version"],
    }


def concurrency():
    """One run per deployment at a time; a run due while one runs is cancelled, not queued."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def deploy(root: Path, params_file: str, entrypoint: str = ENTRYPOINT, cron: str | None = None) -> None:
    """The work pools and both deployments of ``entrypoint`` (run inside ``start``, against the server it
    started; another entrypoint is for tests: a stand-in flow named ``retrain``)."""
    from prefect import Flow, get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    p = load_params(root / params_file)
    template = ProcessWorker.get_default_base_job_template()
    with get_client(sync_client=True) as client:  # the process work pools (replaced if they exist)
        for pool in dict.fromkeys((p.service.work_pool, p.service.gpu_pool)):
            client.create_work_pool(
                WorkPoolCreate(name=pool, type="process", base_job_template=template), overwrite=True
            )
    source = Flow.from_source(source=str(CODE), entrypoint=entrypoint)
    common = {"root": str(root.resolve()), "params_file": params_file}
    scheduled_pool = p.service.gpu_pool if p.model.backend == "full" else p.service.work_pool
    one_at_a_time = {"concurrency_limit": concurrency(), "print_next_steps": False}  # never queued behind a run
    source.deploy(
        name=SCHEDULED,
        work_pool_name=scheduled_pool,
        parameters=common,
        schedule=_schedule(p, cron),
        description="Retrain on the current extract (service.snapshot).",
        **one_at_a_time,
    )
    source.deploy(
        name=FULL,
        work_pool_name=p.service.gpu_pool,
        parameters=common | {"overrides": {"model.backend": "full"}},
        description="Retrain with the full-transformer backend, on a GPU worker.",
        **one_at_a_time,
    )


def _schedule(p, cron: str | None = None):
    from prefect.schedules import Cron

    return Cron(cron or p.service.cron, timezone=p.service.timezone)


CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?LW#-]+$")


def check_cron(cron: str) -> str:
    """A cron string of five fields (minute hour day month weekday) or a ``@daily``-style name, else a one-line
    error (Prefect validates it fully when it deploys)."""
    fields = cron.split()
    if (len(fields) == 1 and fields[0] in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly")) or (
        len(fields) == 5 and all(CRON_FIELD.match(f) for f in fields)
    ):
        return " ".join(fields)
    raise ConfigError(
        f'--cron {cron!r}: not a cron schedule (five fields: minute hour day month weekday, e.g. "0 3 * * 1")'
    )


def trigger(timeout_s: float) -> dict:
    """Run the scheduled deployment now and wait for its final state and message (run inside the serve
    environment): ``Cancelled`` with the reason when a run of it is already running; ``Completed`` with
    ``unchanged: …`` when nothing changed since the registered version."""
    from prefect.deployments import run_deployment

    t0 = time.perf_counter()
    run = run_deployment(f"{sv.FLOW}/{SCHEDULED}", timeout=timeout_s)
    return {
        "flow_run": str(run.id),
        "state": run.state.type.value if run.state else "UNKNOWN",
        "message": run.state.message if run.state else None,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "command",
        choices=["start", "stop", "status", "trigger", "_deploy", "_trigger"],
        help="start | stop | status | trigger (the _ ones are internal)",
    )
    ap.add_argument("--root", default=".", help="the project folder served (default: .)")
    ap.add_argument(
        "--params", default="params.yaml", help="the params file, relative to --root (default: params.yaml)"
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="trigger: seconds to wait for the run")
    ap.add_argument(
        "--cron",
        default=None,
        help='start: the scheduled retrain\'s cron (e.g. "0 3 * * 1"; '
        "`make serve CRON=...`) instead of service.cron; params.yaml unchanged",
    )
    ap.add_argument("--entrypoint", default=ENTRYPOINT, help=argparse.SUPPRESS)  # _deploy: a test's stand-in flow
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    if args.command == "_deploy":  # internal: run with the serve environment (before Prefect is imported)
        deploy(root, args.params, args.entrypoint, args.cron)
    elif args.command == "_trigger":
        print(json.dumps(trigger(args.timeout)))
    elif args.command == "start":
        try:
            state = start(root, args.params, cron=check_cron(args.cron) if args.cron else None)
        except OneLineError as err:
            print(f"dprelease: error: {err}", file=sys.stderr)
            return EXIT_ERROR
        registered = state.get("before_worker") or {}
        if registered.get("line"):
            print(
                f"{'dprelease: warning: ' if registered.get('warning') else ''}{registered['line']}",
                file=sys.stderr if registered.get("warning") else sys.stdout,
            )
        print(
            f"serving: Prefect API {state['url']} (server {state['timings']['server_start_s']} s, pools + deployments "
            f"{state['timings']['deploy_s']} s); worker pid {state['pids']['worker']}; logs in {STATE}/"
        )
    elif args.command == "stop":
        print(f"stopped: {sv.stop(root) or 'nothing was running'}")
    elif args.command == "status":
        state = sv.read_state(root)
        if not state:
            print("not serving")
            return 0
        print(json.dumps({k: (v, sv.alive(v)) for k, v in state.get("pids", {}).items()}))
        with contextlib.suppress(OSError, ValueError, KeyError):
            print(f"retrain/{SCHEDULED} runs by state: {json.dumps(sv.run_counts(state['url']))}")
    else:
        state = sv.read_state(root)
        if not state:
            print("dprelease: error: not serving; run `make serve` first", file=sys.stderr)
            return EXIT_ERROR
        result = sv.run_module(
            root, state["port"], ["flows.serve", "_trigger", "--timeout", str(args.timeout)], code=CODE
        )
        lines = result.stdout.strip().splitlines()
        print(lines[-1] if result.returncode == 0 and lines else f"dprelease: error: {result.stderr.strip()[-400:]}")
        return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
