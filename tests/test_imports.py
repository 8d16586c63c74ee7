"""Import rules of the core package, checked by static analysis (``ast``) of every ``.py`` file under
``src/dprelease`` and of the repository's ``tasks/`` and ``flows/`` folders (the analysis and how the
graph is built: tests/import_graph.py). Nothing here imports the modules it checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import (
    FLOORS,
    MAX_LINES,
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
    init_has_code,
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
    resolve_relative,
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


def _write(root: Path, rel: str, text: str = "") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------ the analysis itself


def test_analysis_sees_the_whole_package(files):
    assert len(files) > 40
    for name in (
        "dprelease",
        "dprelease.pipeline.registry",
        "dprelease.mechanisms.swag_ppm.rounds",
        "dprelease.mechanisms.dpsgd.stages",
        "dprelease.mechanisms.gpp.federated",
        "dprelease.compare.mia",
    ):
        assert name in files, name


def test_relative_imports_resolve():
    assert (
        resolve_relative("dprelease.mechanisms.swag_ppm.rounds", False, 1, "ppm") == "dprelease.mechanisms.swag_ppm.ppm"
    )
    assert resolve_relative("dprelease.mechanisms.swag_ppm.rounds", False, 2, "a.b") == "dprelease.mechanisms.a.b"
    assert resolve_relative("dprelease.mechanisms.swag_ppm.rounds", False, 1, None) == "dprelease.mechanisms.swag_ppm"
    assert resolve_relative("dprelease.core.backends", True, 1, "base") == "dprelease.core.backends.base"
    assert resolve_relative("dprelease.core.backends", True, 2, "config") == "dprelease.core.config"
    with pytest.raises(ValueError):
        resolve_relative("dprelease.x", False, 3, "y")


def test_synthetic_package_edges_and_resolution(tmp_path):
    _write(tmp_path, "pkg/__init__.py", '"""Only a docstring."""\nfrom __future__ import annotations\n')
    _write(tmp_path, "pkg/sub/__init__.py", "from .inner import THING\n")  # has code
    _write(tmp_path, "pkg/sub/inner.py", "from ..leaf import f\nTHING = 1\n")
    _write(tmp_path, "pkg/data/__init__.py", '"""docstring only"""\n')
    _write(tmp_path, "pkg/data/rec.py", "")
    _write(tmp_path, "pkg/leaf.py", "def f():\n    import json\n    from . import data\n    return json\n")
    _write(
        tmp_path,
        "pkg/user.py",
        "def g():\n    from pkg.sub.inner import THING\n    from .data import rec\n"
        "    import importlib\n    return importlib.import_module('pkg.leaf')\n",
    )
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.sub"] == {"pkg.sub.inner"}  # inside its own package: no edge to pkg.sub
    assert g["pkg.sub.inner"] == {"pkg.leaf"}  # from ..leaf import f -> module pkg.leaf
    assert g["pkg.leaf"] == {"pkg.data"}  # from . import data -> the subpackage
    # function-level imports count; pkg.sub's __init__ has code so it is an implicit edge; pkg.data's not
    assert g["pkg.user"] == {"pkg.sub.inner", "pkg.sub", "pkg.data.rec", "pkg.leaf"}
    assert find_cycle(g) is None
    assert init_has_code(tmp_path / "pkg/sub/__init__.py")
    assert not init_has_code(tmp_path / "pkg/__init__.py")


def test_synthetic_cycle_is_detected(tmp_path):
    _write(tmp_path, "pkg/__init__.py", '"""doc"""\n')
    _write(tmp_path, "pkg/a.py", "from . import b\n")
    _write(tmp_path, "pkg/b.py", "def late():\n    from .c import x\n")  # function-level import still counts
    _write(tmp_path, "pkg/c.py", "from pkg.a import y\n")
    _write(tmp_path, "pkg/d.py", "from . import a\n")  # reaches the cycle, not on it
    cycle = find_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None
    assert cycle[0] == cycle[-1] and set(cycle) == {"pkg.a", "pkg.b", "pkg.c"} and len(cycle) == 4


def test_cycle_through_a_package_init_is_detected(tmp_path):
    _write(tmp_path, "pkg/__init__.py", '"""doc"""\n')
    _write(tmp_path, "pkg/sub/__init__.py", "from ..top import T\n")
    _write(tmp_path, "pkg/sub/leaf.py", "")
    _write(tmp_path, "pkg/top.py", "from .sub.leaf import L\nT = 1\n")  # pkg.sub's __init__ runs first
    cycle = find_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None and set(cycle) == {"pkg.sub", "pkg.top"}


def test_real_graph_has_known_edges(graph):
    assert "dprelease.mechanisms.swag_ppm.ppm" in graph["dprelease.mechanisms.swag_ppm.rounds"]
    assert "dprelease.mechanisms.swag_ppm.passes" in graph["dprelease.mechanisms.swag_ppm.rounds"]
    assert (
        "dprelease.mechanisms.swag_ppm.plugin" in graph["dprelease.pipeline.registry"]
    )  # the plug-in list's imports by name
    assert "dprelease.mechanisms.swag_ppm.stages" in graph["dprelease.mechanisms.swag_ppm.plugin"]
    assert (
        "dprelease.mechanisms.gpp.params" in graph["dprelease.contracts.plugins"]
        and "dprelease.contracts.plugins" in graph["dprelease.core.config"]
    )
    assert "dprelease.mechanisms.dpsgd.plugin" in graph["dprelease.pipeline.registry"]
    assert "dprelease.core.data.plugin" in graph["dprelease.pipeline.registry"]  # from .data import stages as …
    assert "dprelease.core.data.stages" in graph["dprelease.mechanisms.dpsgd.stages"]  # from …data.stages import …
    assert "dprelease.core.privacy.accountants" in graph["dprelease.mechanisms.dpsgd.accounting"]  # names → accountants
    assert "dprelease.core.privacy.rdp" in graph["dprelease.core.privacy.accountants"]
    assert "dprelease.core.backends" in graph["dprelease.core.data.splits"]  # from ..backends import make_backend
    assert "dprelease.core.backends" in graph["dprelease.core.training"]  # implicit: backends/__init__ has code
    assert (
        "dprelease.core.privacy" not in graph["dprelease.mechanisms.swag_ppm.rounds"]
    )  # privacy/__init__ is a docstring
    assert "dprelease.pipeline.registry" in graph["dprelease.cli"]  # a function-level import


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


def test_part_layering_sees_a_loop_between_two_folders_without_a_module_cycle(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", '"""doc"""\n')
    for pkg in ("core", "core/backends", "core/release"):
        _write(tmp_path, f"dprelease/{pkg}/__init__.py", '"""doc"""\n')
    _write(tmp_path, "dprelease/core/backends/head.py", "from ..release.check import bounded\n")
    _write(tmp_path, "dprelease/core/release/check.py", "")
    _write(tmp_path, "dprelease/core/release/folder.py", "from ..backends import head\n")
    graph = import_graph(tmp_path)
    assert find_cycle(graph) is None  # no module imports itself back ...
    assert find_cycle(part_graph(graph)) == [
        "dprelease.core.backends",
        "dprelease.core.release",
        "dprelease.core.backends",
    ]
    _write(tmp_path, "dprelease/core/backends/head.py", "")  # ... and once the loop is cut, none
    assert find_cycle(part_graph(import_graph(tmp_path))) is None


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


def test_layering_rules_see_synthetic_violations(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", '"""doc"""\n')
    for pkg in (
        "mechanisms",
        "mechanisms/swag_ppm",
        "mechanisms/dpsgd",
        "compare",
        "compare/mia",
        "core",
        "core/utility",
        "pipeline",
    ):
        _write(tmp_path, f"dprelease/{pkg}/__init__.py", '"""doc"""\n')
    _write(tmp_path, "dprelease/mechanisms/swag_ppm/stages.py", "")
    _write(tmp_path, "dprelease/mechanisms/swag_ppm/rounds.py", "")
    _write(tmp_path, "dprelease/mechanisms/dpsgd/stages.py", "def f():\n    from ..swag_ppm import rounds\n")
    _write(tmp_path, "dprelease/compare/mia/audit.py", "import dprelease.mechanisms.dpsgd.stages\n")
    _write(tmp_path, "dprelease/core/utility/evaluate.py", "from ...mechanisms.swag_ppm.stages import x\n")
    _write(tmp_path, "dprelease/mechanisms/swag_ppm/plugin.py", "from . import stages\n")
    _write(tmp_path, "dprelease/mechanisms/dpsgd/plugin.py", "from . import stages\n")
    _write(
        tmp_path,
        "dprelease/pipeline/registry.py",
        "from ..mechanisms.swag_ppm import plugin, rounds\nfrom ..mechanisms.dpsgd import plugin\n",
    )
    imports = internal_imports(tmp_path)
    cross = cross_mechanism_violations(imports)
    assert (
        len(cross) == 1 and "dprelease.mechanisms.dpsgd.stages imports dprelease.mechanisms.swag_ppm.rounds" in cross[0]
    )
    shared = shared_violations(imports)
    assert len(shared) == 2
    assert any("dprelease.compare.mia.audit imports dprelease.mechanisms.dpsgd.stages" in b for b in shared)
    assert any("dprelease.core.utility.evaluate imports dprelease.mechanisms.swag_ppm.stages" in b for b in shared)
    assert registry_violations(imports) == ["dprelease.mechanisms.swag_ppm.rounds"]


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


def test_the_floor_rule_sees_synthetic_arrows_back_up(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", '"""doc"""\n')
    for pkg in ("contracts", "core", "mechanisms", "mechanisms/toy", "compare", "pipeline"):
        _write(tmp_path, f"dprelease/{pkg}/__init__.py", '"""doc"""\n')
    _write(tmp_path, "dprelease/contracts/stage.py", "from dprelease.core.io import write_json\n")  # up: 1
    _write(tmp_path, "dprelease/contracts/plugins.py", "def f():\n    from dprelease.mechanisms.toy import params\n")
    _write(tmp_path, "dprelease/core/io.py", "from dprelease.contracts import stage\nfrom dprelease import x\n")
    _write(tmp_path, "dprelease/mechanisms/toy/params.py", "")
    _write(tmp_path, "dprelease/mechanisms/toy/run.py", "from dprelease.compare import arms\n")  # up: 2
    _write(tmp_path, "dprelease/compare/arms.py", "from dprelease.pipeline import plan\n")  # up: 3
    _write(tmp_path, "dprelease/pipeline/plan.py", "from dprelease.mechanisms.toy import run\n")
    _write(tmp_path, "dprelease/cli.py", "from dprelease.pipeline import plan\n")
    order = ("contracts", "core", "mechanisms", "compare", "pipeline")
    imports = internal_imports(tmp_path)
    bad = upward_violations(imports, order, {"dprelease.mechanisms.toy.params"})
    assert sorted(b.split(": ", 1)[1] for b in bad) == [
        "dprelease.compare.arms imports dprelease.pipeline.plan",
        "dprelease.contracts.stage imports dprelease.core.io",
        "dprelease.mechanisms.toy.run imports dprelease.compare.arms",
    ]
    # the plug-in list's by-name import is the one inversion, and only of a declaration
    assert any(
        "dprelease.contracts.plugins imports dprelease.mechanisms.toy.params" in b
        for b in upward_violations(imports, order, set())
    )


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


def test_third_party_rule_sees_synthetic_violations(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", "")
    _write(
        tmp_path,
        "dprelease/x.py",
        "def f():\n    import mlflow.sklearn\n    from prefect import flow\n    __import__('dvc.api')\n",
    )
    tops = {top_level(i.target) for i in raw_imports(tmp_path / "dprelease/x.py", "dprelease.x")}
    assert {"mlflow", "prefect", "dvc"} <= tops


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


def test_no_module_is_over_400_lines(files):
    long = {m: n for m, p in files.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


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


def test_run_module_rule_flags_synthetic_imports(tmp_path):
    _write(
        tmp_path,
        "flows/bad.py",
        "from dprelease.mechanisms.swag_ppm.rounds import finetune\n"
        "from dprelease.mechanisms.dpsgd import train\n"
        "def f():\n    import dprelease.mechanisms.swag_ppm.select as s\n"
        "from dprelease.mechanisms.swag_ppm import tuning\n"
        "from dprelease.core.utility.evaluate import write_arm\n",
    )
    known = set(module_files(SRC))
    imports = [i for i in raw_imports(tmp_path / "flows/bad.py", "flows.bad", known) if inside(i.target, PKG)]
    bad = run_module_violations(imports)
    assert len(bad) == 3
    assert any("dprelease.mechanisms.swag_ppm.rounds" in b for b in bad)
    assert any("dprelease.mechanisms.dpsgd.train" in b for b in bad)
    assert any("dprelease.mechanisms.swag_ppm.select" in b for b in bad)
    # utility.evaluate is shared, not a mechanism's run module; tuning is pure maths
    assert not any("utility" in b or "tuning" in b for b in bad)
