"""Tuning flow: the practical guide's implementation algorithm over (c, fine-tune epochs).

``python -m flows.tune [--mode search|grid] [--set tune.target_epsilon=8] [--no-track]``

search: start at (tune.start_c, tune.start_epochs); after each run apply the decision rules of
        ``dprelease.mechanisms.swag_ppm.tuning`` to the fit verdict, ε and utility, until accept / stop / budget.
grid:   every (c, epochs) of tune.grid_c × tune.grid_epochs, cells concurrently on the task runner (a
        pool of tune.workers threads; with dask.enabled, the Dask cluster: one cell per worker process,
        its posterior passes in that worker). In search mode with dask.enabled the cells run in the flow
        and their posterior passes' seeded chunks on the cluster (flows/runners.py).
Each run lives in ``runs/tune/c<c>_ft<epochs>/``; stages shared between runs (split, embeddings,
round 1 for equal epochs) are restored from the stage store instead of recomputed.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from dprelease.core import offline  # noqa: F401  (offline switches before transformers loads)
from dprelease.core.config import Params, parse_params
from dprelease.core.io import read_json
from dprelease.core.privacy import secret
from dprelease.mechanisms.swag_ppm.tuning import Outcome, Requirements, Steps, choose, decide
from dprelease.pipeline import registry
from flows import cli, runners


def cell_params(base: dict, c: float, epochs: int, data_path: str, *, signing_key: str | None = None) -> Params:
    """A cell's params; ``signing_key``: the project's key folder (a cell signs with the agency key, never
    with one of its own)."""
    backend = base["model"]["backend"]
    key = {"signing_key": signing_key} if signing_key else {}
    return parse_params(base, {"ppm.c": c, f"model.{backend}.finetune.epochs": epochs, "data.path": data_path} | key)


def cell_root(root: str, c: float, epochs: int) -> Path:
    return Path(root) / "runs" / "tune" / f"c{c:g}_ft{epochs}"


def _cell(base: dict, root: str, c: float, epochs: int) -> dict:
    """One SWAG-PPM run (all release stages) with c and FT epochs set; returns its outcome (``cell_task``)."""
    from dprelease.core.release.signing import key_folder  # (torch, through the release checks): at run time only
    from tasks.stages import run

    data_path = str((Path(root) / base["data"]["path"]).resolve())
    p = cell_params(base, c, epochs, data_path, signing_key=str(key_folder(parse_params(base), root).resolve()))
    where = cell_root(root, c, epochs)
    where.mkdir(parents=True, exist_ok=True)
    # every cell's randomness from one key derived from the project's (secret like it, reproducible by the
    # operator): cells that differ only in c share their round-1 fits, as they did when training was public
    secret.derive_child(Path(root) / parse_params(base).artifacts, where / p.artifacts, "tune")
    for spec in registry.group(p, "release"):
        run(spec.name, p, where)
    rel, ev = read_json(where / "metrics/swag_ppm_draw.json"), read_json(where / "metrics/evaluation.json")
    eps = rel["guarantee"]["epsilon"]  # None: an uncertified sampler (no ε) meets no ε target
    return Outcome(
        c=c,
        epochs=epochs,
        epsilon=math.inf if eps is None else eps,
        weighted_f1=ev["weighted_f1_mean"],
        macro_f1=ev["macro_f1_mean"],
        verdict=ev["verdict"],
    ).as_dict()


def _setup(p: Params, root: str) -> tuple[Requirements, Steps, dict]:
    from tasks.stages import run

    t = p.tune
    req = Requirements(t.target_epsilon, t.max_drop_weighted, t.max_drop_macro)
    steps = Steps(
        start_c=t.start_c,
        start_epochs=t.start_epochs,
        c_step=t.c_step,
        epoch_step=t.epoch_step,
        c_min=t.c_min,
        max_epochs=t.max_epochs,
    )
    base_root = Path(root) / "runs" / "tune" / "baseline"
    base_root.mkdir(parents=True, exist_ok=True)
    secret.init(Path(root) / p.artifacts)  # the project's key, from which each cell's is derived
    bp = parse_params(p.model_dump(mode="json"), {"data.path": str((Path(root) / p.data.path).resolve())})
    # the baseline's roles and training from the key every cell derives (stratify's roles are keyed)
    secret.derive_child(Path(root) / p.artifacts, base_root / bp.artifacts, "tune")
    for name in ("stratify", "featurize", "nonprivate"):
        run(name, bp, base_root)
    return req, steps, read_json(base_root / "metrics/nonprivate.json")


def _tune_flow(params: dict, root: str = ".", mode: str = "search", track: bool = True) -> dict:
    from dprelease.compare.reports.tune import write_tune_report

    cell_task = __getattr__("cell_task")
    p = Params.model_validate(params)
    with runners.on_dask():  # on a Dask runner: grid cells on workers, search cells' pass chunks on the cluster
        req, steps, baseline = _setup(p, root)
        trail: list[dict] = []
        if mode == "search":
            history: list[Outcome] = []
            c, e = steps.start_c, steps.start_epochs
            while len(history) < p.tune.budget:
                o = Outcome(**cell_task(params, root, c, e))
                history.append(o)
                d = decide(history, req, baseline, steps)
                trail.append({**o.as_dict(), "decision": d.action, "reason": d.reason})
                if d.action in ("accept", "stop"):
                    break
                c, e = d.next_c, d.next_epochs
            else:
                trail[-1]["reason"] += f" (run budget {p.tune.budget} spent)"
            outcomes = history
            chosen = history[-1] if trail[-1]["decision"] == "accept" else None
        else:
            futures = [cell_task.submit(params, root, c, e) for c in p.tune.grid_c for e in p.tune.grid_epochs]
            outcomes = [Outcome(**f.result()) for f in futures]
            chosen = choose(outcomes, req, baseline)
            trail = [o.as_dict() for o in outcomes]
    result = {
        "mode": mode,
        "requirements": vars(req),
        "baseline": {k: baseline[k] for k in ("weighted_f1", "macro_f1")},
        "trail": trail,
        "chosen": chosen.as_dict() if chosen else None,
    }
    write_tune_report(p, root, result)
    if track:
        from dprelease.pipeline.tracking_experiments import log_tune_run

        cli.tracked(result, lambda: log_tune_run(p, root, result))
    return result


def __getattr__(name: str):
    """``tune_flow`` and ``cell_task``, Prefect's flow and task, built on first use (:func:`flows.cli.prefect_flow`)."""
    if name == "cell_task":
        if name not in globals():
            from prefect import task
            from prefect.cache_policies import NONE

            globals()[name] = task(persist_result=False, cache_policy=NONE, task_run_name="cell c={c} FT={epochs}")(
                _cell
            )
        return globals()[name]
    if name == "tune_flow":
        from prefect.task_runners import ThreadPoolTaskRunner

        return cli.prefect_flow(
            globals(),
            name,
            _tune_flow,
            name="swag-ppm-tune",
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
        help="search: the diagnostic-driven search (default); grid: every (c, epochs) cell",
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()

    def check(p: Params) -> None:
        Requirements(p.tune.target_epsilon, p.tune.max_drop_weighted, p.tune.max_drop_macro)

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
