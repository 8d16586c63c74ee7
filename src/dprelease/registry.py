"""The one stage registry. Every stage of every mechanism is declared once, in its package's
``stages`` module; this module gathers them, in execution order, for the three consumers:
``dprelease stage NAME`` (:func:`run_stage`), the Prefect tasks (``tasks/stages.py``) and the
generated ``dvc.yaml`` (:func:`dvc_yaml`: the release pipeline; kept in sync by a test).

The stages come from the plug-ins (:mod:`dprelease.plugins`): adding a mechanism changes nothing here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from . import plugins
from .cache import code_files
from .config import Params
from .errors import ReleaseError
from .io import make_private_within, private_dir
from .mechanism import FlowSpec, Mechanism
from .stage import Runner, Stage

MECHANISMS: list[Mechanism] = [importlib.import_module(f"{package}.plugin").PLUGIN for package in plugins.PACKAGES]
PACKAGE_ROOT = "src/dprelease"


def stages(params: Params) -> list[Stage]:
    """Every stage, in execution order (stages a run does not need included: DVC runs them all)."""
    out = [s for m in MECHANISMS for s in m.declare(params)]
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise RuntimeError(f"stage declared twice: {sorted({n for n in names if names.count(n) > 1})}")
    return out


def get(params: Params, name: str) -> Stage:
    for s in stages(params):
        if s.name == name:
            return s
    raise KeyError(f"unknown stage {name!r} (known: {', '.join(s.name for s in stages(params))})")


def group(params: Params, name: str, active_only: bool = True) -> list[Stage]:
    """The stages of one flow (``release`` | ``compare``), only those these params need by default."""
    return [s for s in stages(params) if s.group == name and (s.active(params) or not active_only)]


def run_stage(name: str, params: Params, root: str | Path = ".") -> dict:
    """Run one stage by name (what ``dprelease stage NAME`` and the Prefect tasks call)."""
    stage = get(params, name)
    artifacts = private_dir(Path(root) / params.artifacts)  # owner-only: narratives, embeddings, moments, weights
    summary = stage.run(params, root)
    for out in stage.produced:  # whatever wrote them: every output under the artifacts 0700 / 0600
        make_private_within(artifacts, Path(root) / out)
    return summary


Runner.run = run_stage
Runner.names = lambda params, name: [s.name for s in group(params, name)]


def sanitizer(mechanism: str):
    """The ``sanitize(release_dir, texts, *, seed)`` of the plug-in named ``mechanism`` (what ``dprelease
    sanitize`` calls for a sanitizer release naming that mechanism)."""
    found = {m.name: m.sanitize for m in MECHANISMS if m.sanitize is not None}
    if mechanism not in found:
        raise ReleaseError(f"no sanitizer for mechanism {mechanism!r} in this dprelease "
                           f"(sanitizers: {', '.join(sorted(found)) or 'none'})")
    return found[mechanism]


def flows() -> dict[str, FlowSpec]:
    """Every plug-in's flows by name."""
    return {f.name: f for m in MECHANISMS for f in m.flows}


def arms() -> dict:
    """Every package's arms by name (declared in its ``params`` module: :func:`dprelease.plugins.arms`)."""
    return plugins.arms()


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


PIPELINE = "release"  # the group dvc.yaml holds: what `make run` runs, so `make run` leaves `dvc status` clean


def dvc_yaml(params: Params) -> dict:
    """``dvc.yaml`` from the registry: the release pipeline (every stage of :data:`PIPELINE`, needed or not,
    then ``track``) with each stage's inputs, declared code, params and outputs. The other flows' stages
    (comparison, audit, NVDP, GPP) run under their flows only, their outputs in the same cache; an input one
    of them produces (the comparison and the privacy audit that ``publish`` puts on the card when present)
    is evidence added by that flow, which re-runs ``publish`` itself, so it is no DVC input here."""
    entries = {}
    pipeline = group(params, PIPELINE, active_only=False)
    elsewhere = [p for s in stages(params) if s.group != PIPELINE for p in s.produced]
    for s in pipeline:
        code = [PACKAGE_ROOT] if s.code == ["."] else [f"{PACKAGE_ROOT}/{p}" for p in s.code]
        deps = [d for d in s.deps if d not in elsewhere]
        entry: dict = {"cmd": f"dprelease stage {s.name}", "deps": _unique(deps + code)}
        if s.params:
            entry["params"] = _unique(list(s.params))
        if s.outs:  # a stage that is not shared stands for a private file: DVC never caches (or pushes) it
            entry["outs"] = list(s.outs) if s.shared else [{o: {"cache": False}} for o in s.outs]
        if s.metrics:
            entry["metrics"] = list(s.metrics)  # cached by DVC, so `dvc checkout` / experiments restore them
        if s.plots:
            entry["plots"] = list(s.plots)
        entries[s.name] = entry
        code_files(s.code)  # fails loudly on an extra_code path that does not exist
    evaluate = get(params, "evaluate")
    track_deps = ["metrics/evaluation.json", "metrics/release.json", *evaluate.plots, "reports/release", params.release]
    entries["track"] = {"cmd": "dprelease track", "deps": track_deps, "params": ["tracking"],
                        "outs": [{"metrics/mlflow_run.json": {"cache": False}}]}  # a new run id each time
    return {"stages": entries}
