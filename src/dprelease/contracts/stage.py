"""What a pipeline stage is: a declaration (name, run function, params it reads, files in and out,
and the code it depends on). Each mechanism package declares its own stages in its ``stages``
module; :mod:`dprelease.pipeline.registry` gathers them into the one list that ``dprelease stage NAME``,
the Prefect tasks and the generated ``dvc.yaml`` all read.

A run function is ``fn(params, root) -> summary``: it reads its inputs from files, writes its outputs
atomically and returns public aggregates only. A stage that runs other stages (``runs_stages=True``: the canary
audit re-runs whole pipelines in a sub-root) is called ``fn(params, root, stages=…)`` with a :class:`StageAccess`:
the registry's functions, passed in by the registry at the call, never installed anywhere at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel  # a stage's params: dprelease.core.config.Params, assembled above this floor

from dprelease.contracts.code_scope import closure, module_of


@dataclass(frozen=True, kw_only=True)
class StageAccess:
    """What the registry hands a stage declared ``runs_stages=True``, at the call: ``run(name, params, root, *,
    stage=None)`` runs one stage by name (``stage``: its declaration, when the caller has it) (a module-level function: picklable for worker processes), ``declared(params)`` lists
    every stage declaration and ``plan(stages, params, targets=…)`` is the runner's planner
    (:func:`dprelease.pipeline.plan.plan`). Passed in, so no stage module imports the registry (which imports every
    one) nor the runtime above it."""

    run: Callable[..., dict]
    declared: Callable[[BaseModel], list["Stage"]]
    plan: Callable[..., Any]


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage, read like a DVC stage: ``name``, the function it runs, the ``params`` keys it reads, the
    files it reads (``deps``) and writes (``outs``, ``metrics``, ``plots``). Paths are relative to the
    project root. Its code is computed, not declared: the static import closure of the run function's
    module (:mod:`dprelease.contracts.code_scope`), plus ``extra_code`` for what no import statement shows
    (package-relative paths; ``"."`` = the whole package)."""

    name: str
    run: Callable[[BaseModel, str | Path], dict]
    params: list[str]
    deps: list[str]
    outs: list[str]
    metrics: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    extra_code: list[str] = field(default_factory=list)
    group: str = "release"  # which flow's group: release | select | compare | audit | nvdp | gpp | ...
    evidence: list[str] = field(default_factory=list)  # deps used when present, never produced for this stage:
    #   a flow that adds the evidence (the comparison, the audit) re-runs this stage itself
    when: Callable[[BaseModel], bool] | None = None  # None: always needed; else the flow runs it only when true
    timed: bool = True  # False: its run time grows with a data-dependent search (selection's tries, re-weighting's
    #                     refits), which no guarantee covers: flows never record, print or log its duration
    shared: bool = True  # False: never restored from (nor saved to) the stage store shared between roots,
    #                      and not cached by DVC: its output stands for a private file outside its key (the secret)
    runs_stages: bool = False  # True: its run function also takes ``stages`` (a StageAccess) from the registry
    signs: bool = False  # True: it signs with the agency key, which must exist before its inputs are hashed

    def active(self, params: BaseModel) -> bool:
        """Whether the flows run this stage under these params (always, unless ``when`` says otherwise).

        Args:
            params: the parsed params.

        Returns:
            True when the stage is needed."""
        return self.when is None or self.when(params)

    @property
    def code(self) -> list[str]:
        """Package-relative source files that may change the outputs (``["."]`` for the whole package)."""
        if "." in self.extra_code:
            return ["."]
        return sorted(set(closure(self.module)) | set(self.extra_code))

    @property
    def inputs(self) -> list[str]:
        """Every file the stage reads: its deps, then its evidence."""
        return self.deps + [e for e in self.evidence if e not in self.deps]

    @property
    def produced(self) -> list[str]:
        """Every path the stage writes (outputs, metrics and plots)."""
        return self.outs + self.metrics + self.plots

    @property
    def module(self) -> str:
        """The module that defines the run function (``functools.partial`` unwrapped)."""
        return module_of(self.run)


def pick(params: BaseModel, dotted: list[str]) -> dict:
    """The values of ``dotted`` params keys (e.g. ``["seed", "ppm.c"]``).

    Args:
        params: the parsed params.
        dotted: dotted keys.

    Returns:
        ``{key: value}`` for each key."""
    raw = params.model_dump(mode="json")
    picked = {}
    for key in dotted:
        node = raw
        for part in key.split("."):
            node = node[part]
        picked[key] = node
    return picked


def flat(params: BaseModel, dotted: list[str], *, drop: tuple[str, ...] = ()) -> dict:
    """Params keys flattened to their leaves: the settings an MLflow run logs (a release's ``ReleaseSpec.settings``,
    the shared sections, a tracked flow's section).

    Args:
        params: the validated params.
        dotted: params keys, sections or single settings (``"ppm"``, ``"dpsgd.grid"``).
        drop: leaves whose flattened key starts with one of these are left out.

    Returns:
        ``{"ppm.c": 1.0, ...}``: each key's value flattened to its leaves.
    """

    def leaves(node, key: str) -> dict:
        if not isinstance(node, dict):
            return {key: node}
        return {k: v for name, child in node.items() for k, v in leaves(child, f"{key}.{name}").items()}

    out = {k: v for key, value in pick(params, dotted).items() for k, v in leaves(value, key).items()}
    return {k: v for k, v in out.items() if not k.startswith(drop)}
