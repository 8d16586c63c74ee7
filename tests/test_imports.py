"""Import rules of the core package, checked by static analysis (``ast``) of every ``.py`` file under
``src/dprelease`` and of the repository's ``tasks/`` and ``flows/`` folders (the analysis and how the
graph is built: tests/import_graph.py; the analysis and each rule's detector on synthetic packages:
tests/test_import_analysis.py). Nothing here imports the modules it checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import (
    FLOORS,
    MECHANISM_FLOOR,
    MECHANISMS,
    PKG,
    REGISTRY,
    SHARED,
    SRC,
    Import,
    cross_mechanism_violations,
    describe_cycle,
    find_cycle,
    floor_order,
    floor_rank,
    import_graph,
    inside,
    internal_imports,
    is_declaration,
    is_kinds,
    is_params,
    mechanism_of,
    module_files,
    orchestration_files,
    orchestration_imports,
    part_graph,
    raw_imports,
    registry_violations,
    run_module_violations,
    shared_violations,
    top_level,
    upward_violations,
)

# ----------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return module_files(SRC)


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return internal_imports(SRC)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(SRC)


# ------------------------------------------------------------------------------------------------- rules


def test_no_import_cycle(graph, imports):
    cycle = find_cycle(graph)
    assert cycle is None, describe_cycle(cycle, imports)


def test_parts_form_layers_none_imports_one_that_imports_it(graph):
    """Collapsed into its parts (``dprelease.core.backends``, ``dprelease.core.release``, ``dprelease.core.config`` …) the graph
    still has no cycle: a part never imports one that imports it, directly or through others, so the parts stack
    in layers (the backends below the release, ``config`` below ``privacy``). Reading a plug-in package's
    declarations by name (its ``params`` and ``kinds``, through the plug-in list) is the one exception."""
    from dprelease.contracts import code_scope

    cycle = find_cycle(part_graph(graph, code_scope.listed_packages()))
    assert cycle is None, "parts import each other: " + " → ".join(cycle)


def test_mechanism_packages_never_import_each_other(imports):
    bad = cross_mechanism_violations(imports)
    assert not bad, "\n".join(bad)


def test_shared_modules_never_import_a_mechanism(imports, files):
    assert all(any(inside(m, s) for m in files) for s in SHARED)  # the listed modules exist
    bad = shared_violations(imports)
    assert not bad, "\n".join(bad)


def test_listed_shared_modules_do_not_reach_a_mechanism_even_indirectly(graph):
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    # a mechanism's params section (pydantic only) and guarantee kinds (declarations only), both checked below, are
    # the parts of it shared code reads
    bad = {
        m: sorted(t for t in reach(m) if mechanism_of(t) and not is_declaration(t) and t not in MECHANISMS)
        for m in graph
        if any(inside(m, s) for s in SHARED)
    }
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, bad


def test_registry_imports_only_the_stages_module_of_a_mechanism(imports):
    targets = {i.target for i in imports if i.importer == REGISTRY and mechanism_of(i.target)}
    assert {
        f"{m}.plugin"
        for m in ("dprelease.mechanisms.swag_ppm", "dprelease.mechanisms.dpsgd", "dprelease.mechanisms.nonprivate")
    } <= targets
    bad = registry_violations(imports)
    assert not bad, bad


def test_a_params_module_imports_only_the_plug_in_declarations(graph):
    """``Params`` is assembled from them at import time: a project import there could start a cycle. A params
    module may import :mod:`dprelease.contracts.mechanism` (its ``Arm`` declarations), which imports nothing of the
    project, and the accountant registry (a setting naming an accountant is validated against it), which imports
    the errors only at import time."""
    allowed = {"dprelease.contracts.mechanism", "dprelease.core.privacy.accountants"}
    sections = [m for m in graph if is_params(m)]
    assert {"dprelease.mechanisms.gpp.params", "dprelease.mechanisms.swag_ppm.params"} <= set(sections)
    assert graph["dprelease.contracts.mechanism"] == set()
    assert graph["dprelease.core.privacy.accountants"] == {"dprelease.core.errors", "dprelease.core.privacy.rdp"}
    assert {m: graph[m] for m in sections if graph[m] - allowed} == {}


def test_a_kinds_module_imports_only_the_declarations(graph):
    """Looked up whenever a record's kind is not known yet (``dprelease verify`` of any release): the kind
    declaration (:mod:`dprelease.contracts.mechanism`) and the core kinds' helpers, nothing that could import torch."""
    kinds = [m for m in graph if is_kinds(m)]
    assert "dprelease.mechanisms.swag_ppm.kinds" in kinds
    assert (
        "dprelease.mechanisms.swag_ppm.kinds" in graph["dprelease.contracts.plugins"]
    )  # the plug-in list's imports by name
    assert graph["dprelease.core.privacy.kinds"] == {"dprelease.contracts.mechanism"}
    assert {
        m: graph[m] for m in kinds if graph[m] - {"dprelease.contracts.mechanism", "dprelease.core.privacy.kinds"}
    } == {}


def test_the_package_is_five_floors_and_the_command_line():
    """``src/dprelease`` holds the floors (``contracts``, ``core``, ``mechanisms``, ``compare``, ``pipeline``:
    folders) and the command line, nothing else: at most 10 entries, every mechanism a package of the
    ``mechanisms`` floor."""
    entries = sorted(p.name for p in (SRC / PKG).iterdir() if p.name != "__pycache__")
    assert len(entries) <= 10, entries
    assert set(entries) == {*FLOORS, "__init__.py", "cli.py", "py.typed"}, entries
    assert FLOORS == ("compare", "contracts", "core", "mechanisms", "pipeline")
    assert {"dprelease.mechanisms.dpsgd", "dprelease.mechanisms.swag_ppm", "dprelease.mechanisms.ncm"} <= set(
        MECHANISMS
    )
    from dprelease.contracts import code_scope

    # every package of the plug-in list lives on a floor; the mechanisms are exactly the mechanisms floor's packages
    listed = code_scope.listed_packages()
    assert all(p.split(".")[1] in FLOORS for p in listed)
    assert {p for p in listed if p.startswith(MECHANISM_FLOOR + ".")} == set(MECHANISMS)


def test_the_floors_stack_in_the_documented_order():
    """docs/architecture.md lists every floor, bottom up; that order is the one the next test enforces."""
    assert floor_order() == ("contracts", "core", "mechanisms", "compare", "pipeline")
    assert set(floor_order()) == set(FLOORS)


def _declarations() -> set[str]:
    from dprelease.contracts import code_scope

    return {f"{p}.{name}" for p in code_scope.listed_packages() for name in ("params", "kinds")}


def test_no_arrow_back_up_between_floors(imports):
    """contracts < core < mechanisms < compare < pipeline < the command line (and tasks/, flows/ above the package):
    a module imports its own floor and the floors below only. The plug-in list reading a listed package's
    ``params`` and ``kinds`` by name is the one inversion (the plug-ins are found, not imported by the floor)."""
    bad = upward_violations(imports, floor_order(), _declarations())
    assert not bad, f"{len(bad)} arrows back up:\n" + "\n".join(bad)
    ranks = {floor_rank(i.importer, floor_order()) for i in imports}
    assert ranks == set(range(len(floor_order()) + 1))  # not vacuous: every floor and the command line import


def test_the_package_never_imports_the_orchestration(files):
    bad = [
        f"{i.where()}: {i.target}"
        for module, path in files.items()
        for i in raw_imports(path, module)
        if top_level(i.target) in ("flows", "tasks")
    ]
    assert not bad, "\n".join(bad)


MLFLOW_ALLOWED = (
    "dprelease/pipeline/tracking.py",
    "dprelease/pipeline/service/pyfunc_model.py",
    "dprelease/pipeline/service/model_code.py",
    "dprelease/pipeline/mlflow_app.py",  # the MLflow UI server plugin (mlflow ui --app-name dprelease)
    "dprelease/pipeline/service/model_server.py",
)  # make serve-model: MLflow's scoring app, bounded


def test_mlflow_flwr_prefect_dvc(files):
    """mlflow: tracking, the registered model's pyfunc wrapper, its server and the UI plugin only; flwr: gpp/federated only."""
    bad = []
    for module, path in files.items():
        rel = path.relative_to(SRC).as_posix()
        for imp in raw_imports(path, module):
            top = top_level(imp.target)
            if top == "mlflow" and rel not in MLFLOW_ALLOWED:
                bad.append(f"{imp.where()}: mlflow outside {', '.join(MLFLOW_ALLOWED)}")
            if top == "flwr" and not rel.startswith("dprelease/mechanisms/gpp/federated/"):
                bad.append(f"{imp.where()}: flwr outside dprelease/mechanisms/gpp/federated/")
            if top in ("prefect", "dvc"):
                bad.append(f"{imp.where()}: {top} imported in the core package (orchestration is tasks/, flows/)")
    assert not bad, "\n".join(bad)
    # not vacuous: the one allowed mlflow import is seen
    tracking = raw_imports(files["dprelease.pipeline.tracking"], "dprelease.pipeline.tracking")
    assert "mlflow" in {top_level(i.target) for i in tracking}


def test_only_the_plug_in_loader_imports_by_a_computed_name(files):
    """``import_module`` / ``__import__`` only where the plug-in list is read (``plugins``: params and kinds
    modules; ``registry``: plug-ins), which the import-graph analysis sees by name (code_scope.implicit_imports);
    code_scope itself only parses such calls. No name-to-module table, no loader elsewhere (flows, tasks)."""
    import re

    pattern = re.compile(r"\b(import_module|__import__)\(")
    callers = {
        module
        for module, path in files.items()
        if pattern.search(path.read_text(encoding="utf-8")) and module != "dprelease.contracts.code_scope"
    }
    assert callers == {"dprelease.contracts.plugins", "dprelease.pipeline.registry"}, callers
    outside = [m for m, path in orchestration_files().items() if pattern.search(path.read_text(encoding="utf-8"))]
    assert outside == [], outside


# ---------------------------------------------------------------------------------------- tasks/ and flows/


def test_orchestration_imports_are_seen():
    imports = orchestration_imports()
    by_file = {}
    for i in imports:
        by_file.setdefault(i.importer, set()).add(i.target)
    assert "dprelease.pipeline.registry" in by_file["tasks.stages"]
    assert not any(t.startswith("dprelease.mechanisms.") for t in by_file["flows.tune"])  # through the plug-in
    assert {"dprelease.pipeline.plan", "dprelease.pipeline.registry"} <= by_file["flows.run"]
    assert "dprelease.compare.reports.tune" in by_file["flows.tune"]


def test_tasks_and_flows_never_import_a_mechanism_run_module():
    bad = run_module_violations(orchestration_imports())
    assert not bad, "stage functions are reached through dprelease.pipeline.registry only:\n" + "\n".join(bad)


def test_tasks_and_flows_reach_mechanisms_only_through_stages_declarations_or_tuning():
    """What is legitimately there: the registry for every stage and ``<mechanism>.stages`` for pre-flight
    checks (``check_dpsgd``, ``preview_train_size``); the tuning flow reaches SWAG-PPM's search through its plug-in."""
    allowed: set[str] = set()
    bad = [
        f"{i.where()}: {i.target}"
        for i in orchestration_imports()
        if mechanism_of(i.target) and i.target != f"{mechanism_of(i.target)}.stages" and i.target not in allowed
    ]
    assert not bad, "\n".join(bad)
