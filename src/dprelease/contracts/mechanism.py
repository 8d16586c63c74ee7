"""The plug-in surface: what a package of dprelease contributes, as ONE object (:class:`Mechanism`).

Each package that declares stages (a mechanism such as ``swag_ppm``, or a shared step such as ``data`` or ``mia``)
exports ``PLUGIN`` from its ``plugin`` module; :mod:`dprelease.contracts.plugins` lists those packages. From these
objects are assembled the params sections, the stage registry, the flows, the MLflow runs (plain :class:`TrackedRun`
data), the comparison's and the audit's arms (:class:`Arm`), ``dprelease sanitize`` and the guarantee vocabulary
(:class:`Kind`). Nothing here imports a mechanism: plain declarations, arrays and files stay in the packages.

See docs/architecture.md, "Notes from the code", `contracts/mechanism.py`."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True, kw_only=True)
class PlantedBug:
    """A bug the canary audit plants in an arm to show it convicts one (``privacy_audit.planted_bugs``): the arm's
    model audited against a claim it does not keep. Declared by the arm's package (:attr:`Arm.planted`)."""

    key: str  # its entry under ``planted`` in ``metrics/audit_canary.json`` (its report row: ``planted:<key>``)
    guarantee: str  # what it claims, in words (the result's ``guarantee``)
    claim: tuple[float, float] | None = None  # the (ε, δ) it is labelled with; None: its model's own claim
    overrides: tuple[tuple[str, Any], ...] = ()  # (dotted key, value): its stage re-run alone in a sibling root


@dataclass(frozen=True, kw_only=True)
class ReportTable:
    """A table of an arm's own in the comparison report: the ``rows`` of a JSON file, when the arm is compared."""

    title: str  # its heading
    source: str  # root-relative JSON file holding ``rows``
    csv: str  # the CSV it is also written to, in the report's folder
    columns: tuple[str, ...]  # the columns kept, in order


@dataclass(frozen=True, kw_only=True)
class ResultsSection:
    """A package's section of ``docs/results.md`` (``RESULTS_SECTION`` in its ``params`` module): Markdown its report
    stage writes, included as it is; when the file is absent, the heading and a line naming the make target."""

    path: str  # root-relative Markdown file, the whole section (heading included)
    heading: str  # the section's heading line
    what: str  # what is not measured yet when the file is absent
    target: str  # the make target that measures it


@dataclass(frozen=True, kw_only=True)
class Arm:
    """A model a package contributes to the comparison and (``audited``) to the membership audit. Declared in
    the package's ``params`` module (``ARMS``), so that ``compare.arms`` and ``privacy_audit.arms`` accept its
    name when ``Params`` is assembled (:func:`dprelease.contracts.plugins.arms`)."""

    name: str
    stage: str  # the stage that trains it
    label: str  # its row in the reports
    audited: bool = True
    release: bool = False  # the release itself: its figures are the release's, its model the staged release folder
    model: str | None = None  # its release-format model folder under ``artifacts`` (None: ``arms/<name>/model``)
    files: tuple[str, ...] = ()  # further files the comparison report reads
    record: str | None = None  # its guarantee record, root-relative (None: ``metrics/<name>.json``)
    scores: tuple[str, str, str] | None = None  # (file, weighted key, macro key) of its test F1 (None: the record's)
    per_class: str | None = (
        None  # the folder of its ``per_class_f1.csv``, root-relative (None: ``reports/arms/<name>``)
    )
    suffix: Callable[[dict], str] | None = None  # (its guarantee's quantities) -> text appended to its label
    requires: tuple[str, Callable[[Any], bool]] | None = None  # (what, test of the params): when it can be named
    params: tuple[str, ...] = ()  # params keys its training stages read (what the canary audit re-running it hashes)
    planted: tuple[PlantedBug, ...] = ()  # the canary audit's planted bugs in this arm
    reference_epochs: str | None = None  # dotted key of its epochs when the audit's reference models train like it
    table: ReportTable | None = None  # its own table in the comparison report

    def sources(self) -> tuple[str, tuple[str, str, str], str]:
        """Where its row in the comparison report is read, root-relative, the defaults filled in.

        Returns:
            ``(guarantee record, (F1 file, weighted key, macro key), per-class folder)``.
        """
        record = self.record or f"metrics/{self.name}.json"
        return record, self.scores or (record, "weighted_f1", "macro_f1"), self.per_class or f"reports/arms/{self.name}"

    def refusal(self, params, section: str) -> str | None:
        """The one-line reason ``section`` cannot name this arm with these params, or None.

        Args:
            params: the validated ``Params`` (what the arm's ``requires`` test reads).
            section: the dotted key naming the arm (``compare.arms`` or ``privacy_audit.arms``), for the message.

        Returns:
            ``"<section>: <arm> needs <what>"`` when the arm's ``requires`` test fails, else None.
        """
        if self.requires is None or self.requires[1](params):
            return None
        return f"{section}: {self.name} needs {self.requires[0]}"


@dataclass(frozen=True)
class Kind:
    """A kind of privacy claim (docs/guarantees.md, K), declared by whoever makes it in its package's ``kinds``
    module (``KINDS``; that module imports this one and :mod:`dprelease.core.privacy.kinds` only, never torch). A
    guarantee record names its kind; validation, the record's meaning, the model card and the frontier's
    recommendation read this declaration (:func:`dprelease.core.privacy.guarantee.kind`)."""

    name: str
    meaning: str  # one line: what sort of claim it is
    claims_epsilon: bool  # False: the record has no ε and no δ
    sentence: Callable[[dict], str]  # (the guarantee dict) -> the card's guarantee sentence
    _: KW_ONLY
    conditions: Callable[[dict], list[str]] | None = None  # (manifest) -> card lines among its conditions
    measured: Callable[[dict], list[str]] | None = None  # (manifest) -> card lines: how its figure was measured
    describe: Callable[[dict], str] | None = None  # (quantities) -> the record's meaning, with its own numbers
    claim: Callable[[dict], str] | None = None  # (quantities) -> the claim in a few words, for a kind without ε
    check: Callable[[dict], str | None] | None = None  # (quantities) -> why a record of this kind is invalid
    worst_case: bool = False  # ε holds for every pair of neighbouring databases (what the frontier may recommend)
    tail_headline: bool = False  # its figure is the upper end of the GEV interval of Δ's tail quantile
    floor: bool = False  # reads no private report (ε 0): the frontier's floor, a line every DP point is drawn against


@dataclass(frozen=True, kw_only=True)
class TrackedRun:
    """One MLflow run as plain data (aggregates and public config only): ``metrics`` logged once, each dict
    of ``steps`` as one step; ``artifacts`` are (file, artifact folder) pairs; ``children`` nested runs."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)
    artifacts: list[tuple[Path, str]] = field(default_factory=list)
    children: list["TrackedRun"] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Search:
    """A flow that searches a mechanism's settings by re-running its stages in cells (SWAG-PPM's ``tune``), its
    loop its own: the flow module (``flows/tune.py``: Prefect, Dask and arguments only) runs ``cell`` as a task per
    setting and hands ``run`` the registry's :class:`dprelease.contracts.stage.StageAccess` and the cells' runner."""

    cell: Callable  # (base params dict, root, setting, *, stages) -> dict: one cell, in a task of the flow
    run: Callable  # (params, root, mode, *, stages, cells) -> result; cells(list of settings) -> list of cell dicts
    track: Callable | None = None  # (params, root, result) -> TrackedRun: its MLflow record (None: not tracked)


@dataclass(frozen=True, kw_only=True)
class FlowSpec:
    """A flow, named by the stages it must finish: the active stages of ``groups`` and the ``targets``, every
    stage that produces one of their deps (recursively), then ``then``. Order and concurrency come from the
    stages' declared deps and outs (:mod:`dprelease.pipeline.plan`); nothing else is written down."""

    name: str  # `python -m flows.run NAME`, `make flow FLOW=NAME`
    title: str  # the Prefect flow's name
    doc: str
    groups: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()  # stage names
    then: tuple[str, ...] = ()  # run after everything else (e.g. ``publish``: the card shows the new evidence)
    workers: int = 1  # stages at once (1: one after another, in declaration order where the graph allows)
    check: Callable | None = None  # (params) -> None: a one-line error before Prefect starts (flow-level rules)
    track: Callable | str | None = None  # (params, root, timings) -> TrackedRun, or a shared tracker's name
    report: str | None = None  # the Markdown report the flow prints, relative to the reports folder
    children: str = "stage"  # what the MLflow parent run's children are, for the printed line
    search: Search | None = None  # a search over settings, run by its own flow module (not flows.run)


@dataclass(frozen=True, kw_only=True)
class ReleaseSpec:
    """What a mechanism releases through the one shared publish step (:mod:`dprelease.core.release.stages`): its stage
    stages a release-format folder (model, labels, a manifest holding the guarantee record), and the publish step
    signs it into ``params.release`` with the card and records ``metrics/released.json``. The mechanism named by
    ``released.mechanism`` (declared before the data are seen) is the one published."""

    mechanism: str  # the name ``released.mechanism`` gives it (its package's short name)
    stage: str  # the stage that writes the staged folder (in the ``release`` group while declared)
    staged: Callable[[Any], str]  # (params) -> the staged release folder, relative to the root
    card: Callable[[Any, Any, dict], tuple[str, dict]]  # (params, root, manifest) -> (model card, manifest additions)
    # (params, root, manifest) -> weighted_f1, macro_f1, diagnostics, arm; optionally headline (its own headline
    # figures beside ε and F1, dprelease.core.headline's names), tags (its own registry version tags) and details
    # (further public aggregates for the MLflow run's details.json): all of it goes into the release's record
    figures: Callable[[Any, Any, dict], dict]
    deps: Callable[[Any], list[str]] = lambda params: []  # further files the card and figures read
    evidence: Callable[[Any], list[str]] = lambda params: []  # read when present (comparison, audit)
    params: tuple[str, ...] = ()  # params keys the card and figures read
    code: Callable[[], list[str]] = lambda: []  # package-relative files of the card and figures (publish's scope)
    summary: Callable[[Any, Any], list[str]] = lambda params, root: []  # (params, root) -> its lines in the summary
    # (params) -> its own public settings, flattened ({"dpsgd.head.lr": 0.01, ...}; dprelease.contracts.stage.flat): the
    # release run's MLflow params beyond the shared sections, only what its release reads (none: it reads those only)
    settings: Callable[[Any], dict] = lambda params: {}
    # (params, guarantee, claim text) -> the release run's name after mechanism and backend; None: claim, kind, δ
    run_name: Callable[[Any, Any, str], list[str] | None] | None = None


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    name: str
    declare: Callable  # (params) -> list[Stage]
    flows: tuple[FlowSpec, ...] = ()
    sanitize: Callable | None = None  # (release_dir, texts, *, seed) -> array, for a sanitizer release
    check: Callable | None = None  # (params, root) -> None: preflight of any flow that plans one of its stages
    release: ReleaseSpec | None = None  # what it releases when ``released.mechanism`` names it
