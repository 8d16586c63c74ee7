"""Stage ``canary_runs``: the one-run canary audit (docs/guarantees.md, L.4, R.3; Steinke, Nasr & Jagielski 2023;
Mahloujifar, Melis & Chaudhuri 2024).

Canaries (input-space and mislabelled narratives), each included by a secret coin, join the training split of a
sub-project in ``artifacts/audit/canary_run/``; every audited arm's pipeline runs there once, its released model
scores every canary, and both one-run bounds at 95 % are set against the arm's own claim. Planted bugs
(``Arm.planted``) must be convicted. An honest DP-SGD arm whose bound exceeds its accountant ε fails the stage (a bug
in the audit or the accounting). Membership stays private; only counts and bounds are written.

See docs/audit.md, "Notes from the code", `compare/mia/canary.py`."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from dprelease.compare.mia import onerun, workers
from dprelease.compare.mia.attack import arm_folder
from dprelease.compare.mia.population import audit_dir
from dprelease.compare.mia.scores import loss_scores
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import StageAccess
from dprelease.core.backends.base import load_features, save_features
from dprelease.core.config import Params, parse_params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.errors import OneLineError
from dprelease.core.io import atomic_dir, private_dir, read_json, write_json
from dprelease.core.privacy import secret
from dprelease.core.release.folder import load_release_model

SKIP = {"stratify", "featurize", "evaluate", "audit_replay", "select", "publish"}  # data given directly; no utility
# eval, no replay audit (of the release itself, not of a canary run), no card
SETS = {
    "input": ("input_canaries.safetensors", "input_member.npy"),
    "mislabelled": ("canaries.safetensors", "canary_member.npy"),
}
PLANTED_MARKER = "planted_bugs_allowed"  # read by a stage that plants a bug: only a canary run may plant one


class AuditError(OneLineError):
    """An audit result that contradicts a proven guarantee (a bug somewhere)."""


def gate_method(delta: float) -> str:
    """The bound fixed in advance for the gate and the sanity rule: Steinke et al.'s exact binomial test
    for a claim without δ; the f-DP test's Gaussian reading for an (ε, δ) claim (Steinke's δ term grows
    with 2mδ and leaves thousands of canaries no power)."""
    return "fdp" if delta > 0 else "steinke"


def _sub_params(params: Params, **extra) -> Params:
    """The canary run's params: the project's, its declared DP-SGD target included (never a measured ε)."""
    raw = params.model_dump(mode="json")
    overrides = {"artifacts": "artifacts", "release": "release", "force_release_path": False, **extra}
    return parse_params(raw, overrides)


def load_sets(lay: Layout) -> dict:
    """Canary set → (features, labels, membership); an empty set is left out."""
    pool = audit_dir(lay) / "pool"
    out = {}
    for kind, (feats, member) in SETS.items():
        if (pool / feats).is_file():
            x, y = load_features(pool / feats)
            if len(y):
                out[kind] = (x, y, np.load(pool / member))
    return out


def check_included(sets: dict) -> None:
    """A canary run needs at least one canary in it: when the secret coins left every set's included subset
    empty (probability 2^-m), the run would train on the plain split and audit nothing: a one-line error
    (no result is possible) rather than bounds with no canary behind them. A set with none included among
    others that have some is still audited (its bound is valid, only powerless)."""
    if not any(int(member.sum()) for _, _, member in sets.values()):
        total = sum(len(member) for _, _, member in sets.values())
        raise AuditError(
            f"canary_runs: none of the {total} canaries was drawn into the canary run (each is "
            "included with probability 1/2 by a secret coin): nothing to audit; re-draw the pool "
            "(audit_pool) with more privacy_audit.canaries"
        )


def _prepare(lay: Layout, sub: Path, sets: dict) -> int:
    """The sub-project's split: training features + every included canary; test and validation as they
    are. Returns the number of canaries added."""
    train, y_train = features(lay, "train")
    test, y_test = features(lay, "test")
    shutil.rmtree(sub, ignore_errors=True)
    private_dir(sub / "artifacts")
    secret.derive_child(lay.artifacts, sub / "artifacts", "canary_run")  # its draws and DP-SGD noise: secret too
    (sub / "artifacts" / PLANTED_MARKER).write_text("a canary run: planted bugs may run here\n", encoding="utf-8")
    xs, ys = [train], [y_train]
    for x, y, member in sets.values():
        inc = torch.from_numpy(np.flatnonzero(member))
        xs.append({k: v[inc] for k, v in x.items()})
        ys.append(y[inc])
    added = sum(len(y) for y in ys[1:])
    with atomic_dir(sub / "artifacts" / "features", private=True) as tmp:
        save_features(tmp / "train.safetensors", {k: torch.cat([x[k] for x in xs]) for k in train}, torch.cat(ys))
        save_features(tmp / "test.safetensors", test, y_test)
        for split in ("validation", "proxy_train", "proxy_validation", "public_rest"):  # acceptance; the public parts
            if (lay.features / f"{split}.safetensors").is_file():  # (the configuration the audited arm releases with)
                save_features(tmp / f"{split}.safetensors", *features(lay, split))
    with atomic_dir(sub / "artifacts" / "data", private=True) as tmp:
        for name in ("labels.json", "public.json", "sizes.json"):  # the public design and the internal sizes
            if (lay.data / name).is_file():
                write_json(tmp / name, read_json(lay.data / name))
    data = read_json(lay.metrics / "data.json")
    write_json(
        sub / "metrics" / "data.json", data | {"train_rows": data["train_rows"] + added, "rows": data["rows"] + added}
    )
    return added


def _audits(backend, model, sets: dict, claim: dict, a) -> dict:
    """Both bounds on every canary set against one claim {epsilon, delta}."""
    out = {}
    delta = claim["delta"] or 0.0
    for kind, (x, y, member) in sets.items():
        s = loss_scores(backend.predict_proba(model, x).numpy(), y.numpy())
        r = onerun.canary_audit(s, member, guess_grid=a.guess_grid, alpha=a.alpha, delta=delta)
        g = r[gate_method(delta)]
        r["gate"] = {
            "method": gate_method(delta),
            **g,
            "convicted": claim["epsilon"] is not None and g["epsilon_lower_bound"] > claim["epsilon"],
        }
        out[kind] = r
    return out


def _claim(manifest: dict) -> dict:
    g = manifest["guarantee"]
    return {"epsilon": g["epsilon"], "delta": g["delta"], "guarantee": g["kind"]}


def planted_claim(bug, manifest: dict) -> dict:
    """What a planted bug's model is audited against: its declared (ε, δ), else its model's own claim; its words."""
    epsilon, delta = bug.claim or (manifest["guarantee"]["epsilon"], manifest["guarantee"]["delta"])
    return {"epsilon": epsilon, "delta": delta, "guarantee": bug.guarantee}


def timed(params: Params) -> bool:
    """Whether ``canary_runs``' duration may be recorded: not when its canary run re-runs a data-dependent search,
    the re-weighting (stage ``reweight``, untimed) the release arm's model comes out of. Checked against the
    canary run's actual plan when it runs (:func:`plan`)."""
    known = plugins.arms()
    return not (params.ppm.reweighting and any(known[a].release for a in params.privacy_audit.arms))


def plan(
    params: Params, sp: Params, arm_names: list[str], *, access: StageAccess
) -> tuple[list[str], dict[str, set[str]]]:
    """The canary run's stages among every stage declaration (``access``: the registry's): those the audited
    arms' training stages need (their plan), less the ones whose outputs :func:`_prepare` gives directly; in order,
    each with the stages it waits on."""
    stages = access.declared(sp)
    known = plugins.arms()
    p = access.plan(stages, sp, targets=tuple(dict.fromkeys(known[a].stage for a in arm_names)))
    order = [n for n in p.order if n not in SKIP]
    by_name = {s.name: s for s in stages}
    if timed(params) and not all(by_name[n].timed for n in order):  # the declared flag must hold
        raise AuditError(
            "canary_runs is declared timed but its canary run runs an untimed stage "
            f"({', '.join(n for n in order if not by_name[n].timed)}): mia.canary.timed is out of date"
        )
    return order, {n: p.waits[n] - SKIP for n in order}


def planted(params: Params) -> list[tuple]:
    """The declared bugs the canary run plants (none unless ``privacy_audit.planted_bugs``): (arm, bug) pairs in
    :data:`dprelease.contracts.packages.PACKAGES` order."""
    if not params.privacy_audit.planted_bugs:
        return []
    return [(arm, bug) for arm in plugins.arms().values() for bug in arm.planted]


def extra_arms(params: Params) -> list[str]:
    """The arms the canary run trains for a planted bug only: those whose bug audits the canary run's own model."""
    arms = params.privacy_audit.arms
    return list(dict.fromkeys(a.name for a, bug in planted(params) if not bug.overrides and a.name not in arms))


def _run_job(job: tuple) -> dict:
    runner, name, raw, root = job
    return runner(name, Params.model_validate(raw), root)


def _prepare_planted(lay: Layout, sub: Path, key: str) -> Path:
    """A sibling root for a planted bug that re-runs its arm's stage: the canary run's inputs and the same derived
    key (so its run is the one it would be in the canary run itself), without replacing the honest arm."""
    root = sub / "planted" / key
    private_dir(root / "artifacts")
    secret.derive_child(lay.artifacts, root / "artifacts", "canary_run")
    (root / "artifacts" / PLANTED_MARKER).write_text("a canary run: planted bugs may run here\n", encoding="utf-8")
    for rel in ("artifacts/features", "artifacts/data", "metrics"):
        shutil.copytree(sub / rel, root / rel)
    return root


def canary_runs(params: Params, root: str | Path = ".", *, stages: StageAccess) -> dict:
    """The canary run (module docstring); ``stages``: the registry's, handed over at the call (runs_stages)."""
    lay, a = Layout.from_params(params, root), params.privacy_audit
    sub = audit_dir(lay) / "canary_run"
    sets = load_sets(lay)
    check_included(sets)
    sp = _sub_params(params)
    added = _prepare(lay, sub, sets)
    arms = list(a.arms)
    order, waits = plan(params, sp, arms + extra_arms(params), access=stages)
    raw = sp.model_dump(mode="json")
    jobs = {name: (stages.run, name, raw, str(sub)) for name in order}
    bugs = []  # (bug, the model folder it audits)
    for arm, bug in planted(params):
        if not bug.overrides:
            bugs.append((bug, sub / arm_folder(sp, arm.name)))
            continue
        bp, home = _sub_params(params, **dict(bug.overrides)), _prepare_planted(lay, sub, bug.key)
        jobs[f"planted:{bug.key}"] = (stages.run, arm.stage, bp.model_dump(mode="json"), str(home))
        bugs.append((bug, home / arm_folder(bp, arm.name)))
    backend = backend_for(params, lay)
    workers.run_graph(_run_job, jobs, waits, workers=workers.count(len(jobs), backend.device))
    out = {
        "canary_sets": {k: {"canaries": len(v[2]), "included": int(v[2].sum())} for k, v in sets.items()},
        "added_to_training": added,
        "guess_grid": list(a.guess_grid),
        "alpha": a.alpha,
        "arms": {},
        "planted": {},
    }

    def audit(folder: Path, claim=_claim) -> dict:
        manifest, _, model = load_release_model(folder, backend.device)
        c = claim(manifest)
        return {**c, "audits": _audits(backend, model, sets, c, a)}

    for arm in arms:
        r = audit(sub / arm_folder(sp, arm))
        if r["guarantee"] == "dp_accountant":
            for kind, d in r["audits"].items():
                if d["gate"]["convicted"]:
                    raise AuditError(
                        f"canary audit ({kind}): {arm} ε_LB {d['gate']['epsilon_lower_bound']:.3f} exceeds "
                        f"its accountant ε {r['epsilon']:.3f}: a bug in the audit or in the accounting"
                    )
        out["arms"][arm] = r
    for bug, folder in bugs:
        out["planted"][bug.key] = audit(folder, lambda manifest, bug=bug: planted_claim(bug, manifest))
    write_json(lay.metrics / "audit_canary.json", out)
    return {
        name: {k: round(d["gate"]["epsilon_lower_bound"], 3) for k, d in r["audits"].items()}
        for name, r in {**out["arms"], **out["planted"]}.items()
    }
