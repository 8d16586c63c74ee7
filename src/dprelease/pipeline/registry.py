"""The one stage registry: every stage of every plug-in (declared once, in its package's ``stages`` module), in
execution order, for ``dprelease stage NAME`` (:func:`run_stage`), the Prefect tasks (``tasks/stages.py``) and the
generated ``dvc.yaml`` (:func:`dvc_yaml`, kept in sync by a test). Adding a mechanism changes nothing here.

Loading is lazy: importing this module imports no plug-in; one stage by name (:func:`get`), a sanitizer and the flows'
help are found in the plug-in index (one fragment per package, :func:`index_file`), so only that package's modules are
imported. The index only ever saves imports: a name it lacks is looked up in every plug-in unless the index is current
(:func:`index_is_current`).

See docs/architecture.md, "Notes from the code", `pipeline/registry.py`."""

from __future__ import annotations

import importlib
import importlib.util
import json
from dataclasses import replace
from functools import cache
from pathlib import Path

from dprelease.contracts import plugins
from dprelease.contracts.mechanism import FlowSpec, Mechanism, ReleaseSpec
from dprelease.contracts.source import code_files
from dprelease.contracts.stage import Stage, StageAccess
from dprelease.core.config import Params
from dprelease.core.errors import ConfigError, ReleaseError
from dprelease.core.io import atomic_path, make_private_within, private_dir
from dprelease.pipeline.plan import plan as plan_stages

PACKAGE_ROOT = "src/dprelease"
INDEX_ROOT = Path(__file__).parents[1]  # the package folders holding the index fragments (another tree: tests)
INDEX_NAME = "plugin_index.json"


@cache
def plugin(package: str) -> Mechanism:
    """The ``PLUGIN`` of one listed package (its ``plugin`` module, hence its stages, imported on first use)."""
    return importlib.import_module(f"{package}.plugin").PLUGIN


def mechanisms() -> list[Mechanism]:
    """Every listed package's plug-in, in :data:`dprelease.contracts.plugins.PACKAGES` order (imports them all)."""
    return [plugin(package) for package in plugins.PACKAGES]


def __getattr__(name: str):
    if name == "MECHANISMS":  # the former eager list: every plug-in, loaded on first use
        return mechanisms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PUBLISH = "publish"  # the one shared publish step (dprelease.core.release.stages), added for the declared release
PUBLISH_PACKAGE = "dprelease.core.release"  # whose code it runs (its index entry)


def releasing() -> dict[str, dict]:
    """``{name released.mechanism may give: {"package", "stage"}}`` for every plug-in with a
    :class:`ReleaseSpec`, in :data:`PACKAGES` order: from the index when usable, else from the plug-ins."""
    index = plugin_index()
    if index is not None and index["releases"]:
        return dict(index["releases"])
    return {
        m.release.mechanism: {"package": package, "stage": m.release.stage}
        for package in plugins.PACKAGES
        if (m := plugin(package)).release is not None
    }


def release_spec(params: Params) -> ReleaseSpec:
    """The declared release (``released.mechanism``, resolved here once): its plug-in's spec. A name that releases
    nothing is refused in one line (the release flow's preflight)."""
    known = releasing()
    entry = known.get(params.released.mechanism)
    if entry is None:
        raise ConfigError(
            f"released.mechanism: {params.released.mechanism!r} releases nothing here (mechanisms "
            f"with a release: {', '.join(known)})"
        )
    return plugin(entry["package"]).release


def staged_releases(params: Params) -> list[ReleaseSpec]:
    """The ReleaseSpecs of the declared release and of every other releasing plug-in whose release stage runs in the
    release pipeline beside it (SWAG-PPM's chain in ``make run``), declared first."""
    declared = release_spec(params)
    pipeline = {s.name for s in group(params, PIPELINE)}
    return [declared] + [
        plugin(entry["package"]).release
        for name, entry in releasing().items()
        if name != declared.mechanism and entry["stage"] in pipeline
    ]


def summaries(params: Params, root: str | Path, ran: set[str]) -> list[str]:
    """The summary lines of every releasing mechanism whose release stage ran in this flow: the declared release's
    first, then those measured beside it (SWAG-PPM's chain in ``make run``), each from its plug-in's own hook."""
    lines = list(release_spec(params).summary(params, root))
    for name, entry in releasing().items():
        if name != params.released.mechanism and entry["stage"] in ran:
            lines += plugin(entry["package"]).release.summary(params, root)
    return lines


def _released(params: Params, package: str, declared: list[Stage]) -> list[Stage]:
    """``package``'s stages with the declared release resolved: when its plug-in is the one ``released.mechanism``
    names, its release stage moves into the :data:`PIPELINE` group and the ``publish`` stage (its ReleaseSpec's) follows
    its last stage of that group. An unknown name changes nothing (the release flow's preflight,
    :func:`release_spec`, says why)."""
    from dprelease.core.release.stages import publish_stage

    spec = plugin(package).release
    if spec is None or spec.mechanism != params.released.mechanism:
        return declared
    out = [replace(s, group=PIPELINE) if s.name == spec.stage else s for s in declared]
    last = max(i for i, s in enumerate(out) if s.group == PIPELINE)
    return out[: last + 1] + publish_stage(params, spec) + out[last + 1 :]


def declared(params: Params) -> dict[str, list[Stage]]:
    """``{package: its stages}`` for every listed package, the declared release resolved: each plug-in's
    ``declare`` called once (a flow plans from this and hands the declarations on, :class:`Plan.stages`)."""
    return {package: _released(params, package, plugin(package).declare(params)) for package in plugins.PACKAGES}


def stages(params: Params, by_package: dict[str, list[Stage]] | None = None) -> list[Stage]:
    """Every stage, in execution order (stages a run does not need included: DVC runs them all); ``by_package``:
    :func:`declared`'s result, when the caller has it."""
    out = [s for ss in (by_package if by_package is not None else declared(params)).values() for s in ss]
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise RuntimeError(f"stage declared twice: {sorted({n for n in names if names.count(n) > 1})}")
    return out


def get(params: Params, name: str) -> Stage:
    """One stage by name: from its own package's plug-in only (the index names it), else from every plug-in.
    ``publish`` is the declared release's (:func:`release_spec`)."""
    if name == PUBLISH and params.released.mechanism in releasing():
        from dprelease.core.release.stages import publish_stage

        return publish_stage(params, release_spec(params))[0]
    index = plugin_index()
    package = index["stages"].get(name) if index else None
    if package is not None:
        found = [s for s in plugin(package).declare(params) if s.name == name]
        if found:
            return found[0]
    elif index is not None and index_is_current():  # nothing changed since it was written: no such stage
        raise KeyError(f"unknown stage {name!r} (known: {', '.join(index['stages'])})")
    everything = stages(params)  # no usable index, one older than a plug-in's sources, or a stage moved: all decide
    for s in everything:
        if s.name == name:
            return s
    raise KeyError(f"unknown stage {name!r} (known: {', '.join(s.name for s in everything)})")


def group(params: Params, name: str, active_only: bool = True) -> list[Stage]:
    """The stages of one flow (``release`` | ``compare``), only those these params need by default."""
    return [s for s in stages(params) if s.group == name and (s.active(params) or not active_only)]


def run_stage(name: str, params: Params, root: str | Path = ".", *, stage: Stage | None = None) -> dict:
    """Run one stage by name (what ``dprelease stage NAME`` and the Prefect tasks call); ``stage``: its
    declaration when the caller's plan has it (else looked up)."""
    stage = stage if stage is not None else get(params, name)
    artifacts = private_dir(Path(root) / params.artifacts)  # owner-only: narratives, embeddings, moments, weights
    summary = stage.run(params, root, stages=ACCESS) if stage.runs_stages else stage.run(params, root)
    for out in stage.produced:  # whatever wrote them: every output under the artifacts 0700 / 0600
        make_private_within(artifacts, Path(root) / out)
    return summary


def refuse_inert(params, keys) -> None:
    """Preflight of the release flow: a ``--set`` of a setting the released mechanism's own choice replaces
    (:func:`dprelease.contracts.plugins.overridden`) is refused in one line: the run would re-make the release and change nothing."""
    inert = plugins.overridden(params) if keys else {}
    for key in keys:
        if key in inert:
            raise ConfigError(
                f"--set {key}: refused, it changes nothing in this release ({params.released.mechanism}): {inert[key]}"
            )


ACCESS = StageAccess(
    run=run_stage, declared=stages, plan=plan_stages
)  # what a stage that runs other stages is handed (runs_stages)


def sanitizer(mechanism: str):
    """The ``sanitize(release_dir, texts, *, seed)`` of the plug-in named ``mechanism`` (what ``dprelease
    sanitize`` calls for a sanitizer release naming that mechanism); only that package is imported."""
    index = plugin_index()
    package = index["sanitizers"].get(mechanism) if index else None
    if package is not None:
        return plugin(package).sanitize
    found = {m.name: m.sanitize for m in mechanisms() if m.sanitize is not None}  # not indexed: every plug-in
    if mechanism not in found:
        raise ReleaseError(
            f"no sanitizer for mechanism {mechanism!r} in this dprelease "
            f"(sanitizers: {', '.join(sorted(found)) or 'none'})"
        )
    return found[mechanism]


def flows() -> dict[str, FlowSpec]:
    """Every plug-in's flows by name."""
    return {f.name: f for m in mechanisms() for f in m.flows}


def flow_help() -> dict[str, tuple[str, str]]:
    """``{flow name: (title, doc)}`` for command-line help: from the index (no plug-in imported) when usable."""
    index = plugin_index()
    if index is None:
        return {name: (f.title, f.doc) for name, f in flows().items()}
    return {name: (f["title"], f["doc"]) for name, f in index["flows"].items()}


def index_file(package: str, root: str | Path | None = None) -> Path:
    """Where a listed package's fragment of the plug-in index lives: ``<its folder>/plugin_index.json``."""
    top, _, sub = package.partition(".")
    if top != "dprelease" or not sub:
        raise ValueError(f"a listed package is a subpackage of dprelease, not {package!r}")
    return Path(root if root is not None else INDEX_ROOT).joinpath(*sub.split(".")) / INDEX_NAME


def read_index(root: str | Path | None = None) -> dict | None:
    """The plug-in index (:func:`build_index`'s shape) from every listed package's fragment; None when one is
    missing, unreadable or names another package (then every lookup imports every plug-in, as :func:`stages` does)."""
    out: dict = {"packages": list(plugins.PACKAGES), "stages": {}, "flows": {}, "sanitizers": {}, "releases": {}}
    for package in plugins.PACKAGES:
        try:
            part = json.loads(index_file(package, root).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(part, dict) or part.get("package") != package:
            return None
        out["stages"] |= {name: package for name in part["stages"]}
        out["flows"] |= part["flows"]
        if part.get("sanitizer") is not None:
            out["sanitizers"][part["sanitizer"]] = package
        if part.get("release") is not None:
            out["releases"][part["release"]["mechanism"]] = {"package": package, "stage": part["release"]["stage"]}
    return out


@cache
def plugin_index() -> dict | None:
    """:func:`read_index` of the package folders, read once per process."""
    return read_index()


def index_is_current() -> bool:
    """True when no source file of a listed package is newer than that package's index fragment: a name the index
    lacks is then no stage (else, e.g. a stage just added, every plug-in is asked: slower, never wrong)."""
    for package in plugins.PACKAGES:
        written = index_file(package).stat().st_mtime_ns
        folders = [Path(p) for p in importlib.util.find_spec(package).submodule_search_locations]
        if any(f.stat().st_mtime_ns > written for folder in folders for f in folder.rglob("*.py")):
            return False
    return True


def build_index(params: Params) -> dict:
    """The plug-in index, from the plug-ins themselves (imports them all): the package list, each stage's package
    in execution order (stage names do not depend on params: every stage is always declared), each flow's title
    and doc, each sanitizer's package and each release (the name ``released.mechanism`` gives it and its stage)."""
    owner = {s.name: package for package in plugins.PACKAGES for s in plugin(package).declare(params)}
    owner[PUBLISH] = PUBLISH_PACKAGE
    return {
        "packages": list(plugins.PACKAGES),
        "releases": {
            m.release.mechanism: {"package": package, "stage": m.release.stage}
            for package in plugins.PACKAGES
            if (m := plugin(package)).release is not None
        },
        "stages": {s.name: owner[s.name] for s in stages(params)},  # stages(): fails on a name declared twice
        "flows": {f.name: {"title": f.title, "doc": f.doc} for m in mechanisms() for f in m.flows},
        "sanitizers": {
            plugin(package).name: package for package in plugins.PACKAGES if plugin(package).sanitize is not None
        },
    }


def write_index(params: Params, *, root: str | Path | None = None) -> list[Path]:
    """Write :func:`build_index` as one fragment per listed package, in its folder (``root``: under another tree),
    ``dprelease plugin-index``."""
    index, written = build_index(params), []
    for package in plugins.PACKAGES:
        m = plugin(package)
        part = {
            "package": package,
            "stages": [n for n, p in index["stages"].items() if p == package],
            "flows": {f.name: index["flows"][f.name] for f in m.flows},
            "sanitizer": m.name if m.sanitize is not None else None,
            "release": None if m.release is None else {"mechanism": m.release.mechanism, "stage": m.release.stage},
        }
        path = index_file(package, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(part, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    plugin_index.cache_clear()
    return written


def arms() -> dict:
    """Every package's arms by name (declared in its ``params`` module: :func:`dprelease.contracts.plugins.arms`)."""
    return plugins.arms()


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


PIPELINE = "release"  # the group dvc.yaml holds: what `make run` runs, so `make run` leaves `dvc status` clean
PER_PACKAGE = ("mechanisms", "compare")  # floors that are packages side by side: dvc.yaml names the package's folder


def code_folders(code: list[str]) -> list[str]:
    """``dvc.yaml``'s code deps for a stage's code (:attr:`Stage.code`, package-relative): the folders that hold
    it, so that a stage reads as a map — a floor's folder (``contracts``, ``core``, ``pipeline``), one package's
    folder in ``mechanisms/`` and ``compare/``, a module outside any of those (``__init__.py``, ``compare/arms.py``)
    itself; ``["."]``: the whole package. Always a superset of the exact files (a test checks it): ``dvc repro``
    re-runs a stage for a change to its folders, the stage's cache key still hashes its exact files."""
    if code == ["."]:
        return [PACKAGE_ROOT]
    folders = set()
    for rel in code:
        parts = rel.split("/")
        depth = 2 if parts[0] in PER_PACKAGE else 1
        folders.add("/".join(parts[:depth]) if len(parts) > depth else rel)
    for floor in PER_PACKAGE:  # every package and module of a floor: the floor's folder (the tracking run's map)
        if _floor_parts(floor) <= folders:
            folders = {f for f in folders if not f.startswith(floor + "/")} | {floor}
    covered = {f for f in folders if any(f.startswith(g + "/") for g in folders)}
    return [f"{PACKAGE_ROOT}/{f}" for f in sorted(folders - covered)]


@cache
def _floor_parts(floor: str) -> frozenset[str]:
    """A side-by-side floor's packages and modules, package-relative (``mechanisms/dpsgd``, ``compare/arms.py``)."""
    base = Path(__file__).resolve().parents[1] / floor
    return frozenset(f"{floor}/{p.name}" for p in base.iterdir() if (p / "__init__.py").is_file() or p.suffix == ".py")


def dvc_yaml(params: Params) -> dict:
    """``dvc.yaml`` from the registry: the release pipeline (every stage of :data:`PIPELINE`, needed or not,
    then ``track``) with each stage's inputs, its code's folders (:func:`code_folders`), params and outputs. The other flows' stages
    (comparison, audit, NVDP, GPP) run under their flows only, their outputs in the same cache; an input one
    of them produces (the comparison and the privacy audit that ``publish`` puts on the card when present)
    is evidence added by that flow, which re-runs ``publish`` itself, so it is no DVC input here."""
    entries = {}
    pipeline = group(params, PIPELINE, active_only=False)
    elsewhere = [p for s in stages(params) if s.group != PIPELINE for p in s.produced]
    for s in pipeline:
        code = code_folders(s.code)
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
    from dprelease.contracts.code_scope import closure

    tracking_code = code_folders(closure("dprelease.pipeline.tracking"))  # a change to the logging re-runs it
    staged = [d for spec in staged_releases(params) for d in spec.deps(params)]  # what their figures hooks read
    track_deps = _unique(
        ["metrics/released.json", *staged, *evaluate.plots, "reports/release", params.release, *tracking_code]
    )
    entries["track"] = {
        "cmd": "dprelease track",
        "deps": track_deps,
        "params": ["tracking"],
        "outs": [{"metrics/mlflow_run.json": {"cache": False}}],
    }  # a new run id each time
    return {"stages": entries}
