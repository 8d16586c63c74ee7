"""SWAG-PPM's tuning flow (``make tune``, ``python -m flows.tune``): the cells, the non-private baseline and the
decision loop over (c, fine-tune epochs), declared on its plug-in (:class:`dprelease.contracts.mechanism.Search`).

search: start at (tune.start_c, tune.start_epochs); after each run apply the decision rules of :mod:`.tuning` to
        the fit verdict, ε and utility, until accept / stop / budget.
grid:   every (c, epochs) of tune.grid_c × tune.grid_epochs, the cells at once as the flow runs them.

Each cell is a whole release run in ``runs/tune/c<c>_ft<epochs>/``. The flow hands in the registry's functions
(``stages``, a :class:`dprelease.contracts.stage.StageAccess` whose ``run`` is the cached task: stages shared between
cells — split, embeddings, round 1 for equal epochs — come from the stage store) and how to run cells
(``cells``): nothing here imports the runtime above.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from dprelease.contracts.mechanism import TrackedRun
from dprelease.contracts.stage import StageAccess
from dprelease.core.config import Params, parse_params
from dprelease.core.io import read_json
from dprelease.core.privacy import secret
from dprelease.mechanisms.swag_ppm.tuning import Outcome, Requirements, Steps, choose, decide


def check(p: Params) -> None:
    """The requirements' one-line refusals, before anything runs."""
    Requirements(p.tune.target_epsilon, p.tune.max_drop_weighted, p.tune.max_drop_macro)


def cell_params(base: dict, c: float, epochs: int, data_path: str, *, signing_key: str | None = None) -> Params:
    """A cell's params; ``signing_key``: the project's key folder (a cell signs with the agency key, never
    with one of its own)."""
    backend = base["model"]["backend"]
    key = {"signing_key": signing_key} if signing_key else {}
    return parse_params(base, {"ppm.c": c, f"model.{backend}.finetune.epochs": epochs, "data.path": data_path} | key)


def cell_root(root: str | Path, c: float, epochs: int) -> Path:
    return Path(root) / "runs" / "tune" / f"c{c:g}_ft{epochs}"


def cell(base: dict, root: str, setting: tuple[float, int], *, stages: StageAccess) -> dict:
    """One SWAG-PPM run (all release stages) with c and FT epochs set (``setting``); returns its outcome."""
    from dprelease.core.release.signing import key_folder  # (torch, through the release checks): at run time only

    c, epochs = setting
    data_path = str((Path(root) / base["data"]["path"]).resolve())
    p = cell_params(base, c, epochs, data_path, signing_key=str(key_folder(parse_params(base), root).resolve()))
    where = cell_root(root, c, epochs)
    where.mkdir(parents=True, exist_ok=True)
    # every cell's randomness from one key derived from the project's (secret like it, reproducible by the
    # operator): cells that differ only in c share their round-1 fits, as they did when training was public
    secret.derive_child(Path(root) / parse_params(base).artifacts, where / p.artifacts, "tune")
    for s in stages.declared(p):  # declared once per cell, each declaration handed on
        if s.group == "release" and s.active(p):
            stages.run(s.name, p, where, stage=s)
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


def setup(p: Params, root: str, *, stages: StageAccess) -> tuple[Requirements, Steps, dict]:
    """The requirements, the search's steps and the non-private baseline (run once, from the project's key)."""
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
        stages.run(name, bp, base_root)
    return req, steps, read_json(base_root / "metrics/nonprivate.json")


def run(p: Params, root: str, mode: str, *, stages: StageAccess, cells: Callable[[list[tuple]], list[dict]]) -> dict:
    """The tuning run: ``mode`` search or grid; ``cells(settings)`` runs :func:`cell` for each (c, epochs) and
    returns their outcomes in order. Returns the result the report and MLflow record."""
    req, steps, baseline = setup(p, root, stages=stages)
    trail: list[dict] = []
    if mode == "search":
        history: list[Outcome] = []
        c, e = steps.start_c, steps.start_epochs
        while len(history) < p.tune.budget:
            o = Outcome(**cells([(c, e)])[0])
            history.append(o)
            d = decide(history, req, baseline, steps)
            trail.append({**o.as_dict(), "decision": d.action, "reason": d.reason})
            if d.action in ("accept", "stop"):
                break
            c, e = d.next_c, d.next_epochs
        else:
            trail[-1]["reason"] += f" (run budget {p.tune.budget} spent)"
        chosen = history[-1] if trail[-1]["decision"] == "accept" else None
    else:
        outcomes = [Outcome(**o) for o in cells([(c, e) for c in p.tune.grid_c for e in p.tune.grid_epochs])]
        chosen = choose(outcomes, req, baseline)
        trail = [o.as_dict() for o in outcomes]
    return {
        "mode": mode,
        "requirements": vars(req),
        "baseline": {k: baseline[k] for k in ("weighted_f1", "macro_f1")},
        "trail": trail,
        "chosen": chosen.as_dict() if chosen else None,
    }


def tracked(p: Params, root: str | Path, result: dict) -> TrackedRun:
    """The tuning run's MLflow record: a parent (the ``tune`` section, the baseline, the choice, the report's files)
    and one child per cell (c, epochs, verdict, decision, ε and F1; no ε logged where none is claimed).

    Args:
        p: the validated params.
        root: the project root (its ``reports/tune`` files are attached).
        result: what :func:`run` returned.

    Returns:
        The run as plain data, logged by the runtime."""
    children = [
        TrackedRun(
            name=f"c={row['c']:g} FT={row['epochs']}",
            params={"c": row["c"], "ft_epochs": row["epochs"], "step": i},
            tags={"verdict": row["verdict"], **({"decision": row["decision"]} if "decision" in row else {})},
            metrics={
                k: row[k]
                for k in ("epsilon", "weighted_f1", "macro_f1")
                if row.get(k) is not None and math.isfinite(row[k])
            },
        )
        for i, row in enumerate(result["trail"])
    ]
    chosen = result["chosen"]
    params = {f"tune.{k}": v for k, v in p.tune.model_dump().items()}
    if chosen:
        params |= {"chosen_c": chosen["c"], "chosen_epochs": chosen["epochs"]}
    out = Path(root) / "reports" / "tune"
    return TrackedRun(
        name=f"tune-{result['mode']}",
        params=params,
        metrics={f"baseline_{k}": v for k, v in result["baseline"].items()},
        artifacts=[(path, "tune") for path in sorted(out.glob(f"{result['mode']}*"))],
        children=children,
    )
