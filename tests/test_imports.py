"""Import rules of the core package, checked by static analysis (``ast``) of every ``.py`` file under
``src/dprelease`` and of the repository's ``tasks/`` and ``flows/`` folders (the analysis and how the
graph is built: tests/import_graph.py). Nothing here imports the modules it checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from import_graph import (MECHANISMS, Import, MAX_LINES, PKG, REGISTRY, SHARED, SRC, inside, is_declaration, is_kinds,
                          is_params, resolve_relative,
                          cross_mechanism_violations, describe_cycle, find_cycle, import_graph, init_has_code, part_graph,
                          internal_imports, mechanism_of, module_files, orchestration_imports, raw_imports,
                          registry_violations, run_module_violations, shared_violations, top_level)

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
    for name in ("dprelease", "dprelease.registry", "dprelease.swag_ppm.rounds", "dprelease.dpsgd.stages",
                 "dprelease.gpp.federated", "dprelease.mia"):
        assert name in files, name


def test_relative_imports_resolve():
    assert resolve_relative("dprelease.swag_ppm.rounds", False, 1, "ppm") == "dprelease.swag_ppm.ppm"
    assert resolve_relative("dprelease.swag_ppm.rounds", False, 2, "a.b") == "dprelease.a.b"
    assert resolve_relative("dprelease.swag_ppm.rounds", False, 1, None) == "dprelease.swag_ppm"
    assert resolve_relative("dprelease.backends", True, 1, "base") == "dprelease.backends.base"
    assert resolve_relative("dprelease.backends", True, 2, "config") == "dprelease.config"
    with pytest.raises(ValueError):
        resolve_relative("dprelease.x", False, 3, "y")


def test_synthetic_package_edges_and_resolution(tmp_path):
    _write(tmp_path, "pkg/__init__.py", '"""Only a docstring."""\nfrom __future__ import annotations\n')
    _write(tmp_path, "pkg/sub/__init__.py", "from .inner import THING\n")           # has code
    _write(tmp_path, "pkg/sub/inner.py", "from ..leaf import f\nTHING = 1\n")
    _write(tmp_path, "pkg/data/__init__.py", '"""docstring only"""\n')
    _write(tmp_path, "pkg/data/rec.py", "")
    _write(tmp_path, "pkg/leaf.py", "def f():\n    import json\n    from . import data\n    return json\n")
    _write(tmp_path, "pkg/user.py", "def g():\n    from pkg.sub.inner import THING\n    from .data import rec\n"
                                    "    import importlib\n    return importlib.import_module('pkg.leaf')\n")
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.sub"] == {"pkg.sub.inner"}                 # inside its own package: no edge to pkg.sub
    assert g["pkg.sub.inner"] == {"pkg.leaf"}                 # from ..leaf import f -> module pkg.leaf
    assert g["pkg.leaf"] == {"pkg.data"}                      # from . import data -> the subpackage
    # function-level imports count; pkg.sub's __init__ has code so it is an implicit edge; pkg.data's not
    assert g["pkg.user"] == {"pkg.sub.inner", "pkg.sub", "pkg.data.rec", "pkg.leaf"}
    assert find_cycle(g) is None
    assert init_has_code(tmp_path / "pkg/sub/__init__.py")
    assert not init_has_code(tmp_path / "pkg/__init__.py")


def test_synthetic_cycle_is_detected(tmp_path):
    _write(tmp_path, "pkg/__init__.py", '"""doc"""\n')
    _write(tmp_path, "pkg/a.py", "from . import b\n")
    _write(tmp_path, "pkg/b.py", "def late():\n    from .c import x\n")   # function-level import still counts
    _write(tmp_path, "pkg/c.py", "from pkg.a import y\n")
    _write(tmp_path, "pkg/d.py", "from . import a\n")                    # reaches the cycle, not on it
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
    assert "dprelease.swag_ppm.ppm" in graph["dprelease.swag_ppm.rounds"]
    assert "dprelease.swag_ppm.passes" in graph["dprelease.swag_ppm.rounds"]
    assert "dprelease.swag_ppm.plugin" in graph["dprelease.registry"]  # the plug-in list's imports by name
    assert "dprelease.swag_ppm.stages" in graph["dprelease.swag_ppm.plugin"]
    assert "dprelease.gpp.params" in graph["dprelease.plugins"] and "dprelease.plugins" in graph["dprelease.config"]
    assert "dprelease.dpsgd.plugin" in graph["dprelease.registry"]
    assert "dprelease.data.plugin" in graph["dprelease.registry"]          # from .data import stages as …
    assert "dprelease.data.records" in graph["dprelease.dpsgd.stages"]     # from ..data import records
    assert "dprelease.privacy.accountants" in graph["dprelease.dpsgd.accounting"]  # names → accountants
    assert "dprelease.privacy.rdp" in graph["dprelease.privacy.accountants"]
    assert "dprelease.backends" in graph["dprelease.data.splits"]          # from ..backends import make_backend
    assert "dprelease.backends" in graph["dprelease.training"]             # implicit: backends/__init__ has code
    assert "dprelease.privacy" not in graph["dprelease.swag_ppm.rounds"]   # privacy/__init__ is a docstring
    assert "dprelease.registry" in graph["dprelease.cli"]                  # a function-level import


# ------------------------------------------------------------------------------------------------- rules


def test_no_import_cycle(graph, imports):
    cycle = find_cycle(graph)
    assert cycle is None, describe_cycle(cycle, imports)


def test_parts_form_layers_none_imports_one_that_imports_it(graph):
    """Collapsed into its parts (``dprelease.backends``, ``dprelease.release``, ``dprelease.config`` …) the graph
    still has no cycle: a part never imports one that imports it, directly or through others, so the parts stack
    in layers (the backends below the release, ``config`` below ``privacy``). Reading a plug-in package's
    declarations by name (its ``params`` and ``kinds``, through the plug-in list) is the one exception."""
    from dprelease import code_scope

    cycle = find_cycle(part_graph(graph, code_scope.listed_packages()))
    assert cycle is None, "parts import each other: " + " → ".join(cycle)


def test_part_layering_sees_a_loop_between_two_folders_without_a_module_cycle(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", '"""doc"""\n')
    for pkg in ("backends", "release"):
        _write(tmp_path, f"dprelease/{pkg}/__init__.py", '"""doc"""\n')
    _write(tmp_path, "dprelease/backends/head.py", "from ..release.check import bounded\n")
    _write(tmp_path, "dprelease/release/check.py", "")
    _write(tmp_path, "dprelease/release/folder.py", "from ..backends import head\n")
    graph = import_graph(tmp_path)
    assert find_cycle(graph) is None                                   # no module imports itself back ...
    assert find_cycle(part_graph(graph)) == ["dprelease.backends", "dprelease.release", "dprelease.backends"]
    _write(tmp_path, "dprelease/backends/head.py", "")                 # ... and once the loop is cut, none
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
    bad = {m: sorted(t for t in reach(m) if mechanism_of(t) and not is_declaration(t) and t not in MECHANISMS)
           for m in graph if any(inside(m, s) for s in SHARED)}
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, bad


def test_registry_imports_only_the_stages_module_of_a_mechanism(imports):
    targets = {i.target for i in imports if i.importer == REGISTRY and mechanism_of(i.target)}
    assert {f"{m}.plugin" for m in ("dprelease.swag_ppm", "dprelease.dpsgd", "dprelease.nonprivate")} <= targets
    bad = registry_violations(imports)
    assert not bad, bad


def test_a_params_module_imports_only_the_plug_in_declarations(graph):
    """``Params`` is assembled from them at import time: a project import there could start a cycle. A params
    module may import :mod:`dprelease.mechanism` (its ``Arm`` declarations), which imports nothing of the project."""
    sections = [m for m in graph if is_params(m)]
    assert {"dprelease.gpp.params", "dprelease.swag_ppm.params"} <= set(sections)
    assert graph["dprelease.mechanism"] == set()
    assert {m: graph[m] for m in sections if graph[m] - {"dprelease.mechanism"}} == {}


def test_a_kinds_module_imports_only_the_declarations(graph):
    """Looked up whenever a record's kind is not known yet (``dprelease verify`` of any release): the kind
    declaration (:mod:`dprelease.mechanism`) and the core kinds' helpers, nothing that could import torch."""
    kinds = [m for m in graph if is_kinds(m)]
    assert "dprelease.swag_ppm.kinds" in kinds
    assert "dprelease.swag_ppm.kinds" in graph["dprelease.plugins"]  # the plug-in list's imports by name
    assert graph["dprelease.privacy.kinds"] == {"dprelease.mechanism"}
    assert {m: graph[m] for m in kinds if graph[m] - {"dprelease.mechanism", "dprelease.privacy.kinds"}} == {}


def test_layering_rules_see_synthetic_violations(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", '"""doc"""\n')
    for pkg in ("swag_ppm", "dpsgd", "mia", "utility"):
        _write(tmp_path, f"dprelease/{pkg}/__init__.py", '"""doc"""\n')
    _write(tmp_path, "dprelease/swag_ppm/stages.py", "")
    _write(tmp_path, "dprelease/swag_ppm/rounds.py", "")
    _write(tmp_path, "dprelease/dpsgd/stages.py", "def f():\n    from ..swag_ppm import rounds\n")
    _write(tmp_path, "dprelease/mia/audit.py", "import dprelease.dpsgd.stages\n")
    _write(tmp_path, "dprelease/utility/evaluate.py", "from ..swag_ppm.stages import x\n")
    _write(tmp_path, "dprelease/swag_ppm/plugin.py", "from . import stages\n")
    _write(tmp_path, "dprelease/dpsgd/plugin.py", "from . import stages\n")
    _write(tmp_path, "dprelease/registry.py", "from .swag_ppm import plugin, rounds\nfrom .dpsgd import plugin\n")
    imports = internal_imports(tmp_path)
    cross = cross_mechanism_violations(imports)
    assert len(cross) == 2
    assert any("dprelease.dpsgd.stages imports dprelease.swag_ppm.rounds" in b for b in cross)
    assert any("dprelease.mia.audit imports dprelease.dpsgd.stages" in b for b in cross)
    shared = shared_violations(imports)
    assert len(shared) == 1 and "dprelease.utility.evaluate imports dprelease.swag_ppm.stages" in shared[0]
    assert registry_violations(imports) == ["dprelease.swag_ppm.rounds"]


MLFLOW_ALLOWED = ("dprelease/tracking.py", "dprelease/service/pyfunc_model.py", "dprelease/service/model_code.py",
                  "dprelease/mlflow_app.py")  # the last: the MLflow UI server plugin (mlflow ui --app-name dprelease)


def test_mlflow_flwr_prefect_dvc(files):
    """mlflow: tracking, the registered model's pyfunc wrapper and the UI plugin only; flwr: gpp/federated only."""
    bad = []
    for module, path in files.items():
        rel = path.relative_to(SRC).as_posix()
        for imp in raw_imports(path, module):
            top = top_level(imp.target)
            if top == "mlflow" and rel not in MLFLOW_ALLOWED:
                bad.append(f"{imp.where()}: mlflow outside {', '.join(MLFLOW_ALLOWED)}")
            if top == "flwr" and not rel.startswith("dprelease/gpp/federated/"):
                bad.append(f"{imp.where()}: flwr outside dprelease/gpp/federated/")
            if top in ("prefect", "dvc"):
                bad.append(f"{imp.where()}: {top} imported in the core package (orchestration is tasks/, flows/)")
    assert not bad, "\n".join(bad)
    # not vacuous: the one allowed mlflow import is seen
    tracking = raw_imports(files["dprelease.tracking"], "dprelease.tracking")
    assert "mlflow" in {top_level(i.target) for i in tracking}


def test_third_party_rule_sees_synthetic_violations(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", "")
    _write(tmp_path, "dprelease/x.py", "def f():\n    import mlflow.sklearn\n    from prefect import flow\n"
                                       "    __import__('dvc.api')\n")
    tops = {top_level(i.target) for i in raw_imports(tmp_path / "dprelease/x.py", "dprelease.x")}
    assert {"mlflow", "prefect", "dvc"} <= tops


def test_no_module_is_over_400_lines(files):
    long = {m: n for m, p in files.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# ---------------------------------------------------------------------------------------- tasks/ and flows/


def test_orchestration_imports_are_seen():
    imports = orchestration_imports()
    by_file = {}
    for i in imports:
        by_file.setdefault(i.importer, set()).add(i.target)
    assert "dprelease.registry" in by_file["tasks.stages"]
    assert "dprelease.swag_ppm.tuning" in by_file["flows.tune"]
    assert {"dprelease.pipeline", "dprelease.registry"} <= by_file["flows.run"]
    assert "dprelease.reports.tune" in by_file["flows.tune"]


def test_tasks_and_flows_never_import_a_mechanism_run_module():
    bad = run_module_violations(orchestration_imports())
    assert not bad, "stage functions are reached through dprelease.registry only:\n" + "\n".join(bad)


def test_tasks_and_flows_reach_mechanisms_only_through_stages_declarations_or_tuning():
    """What is legitimately there: the registry for every stage, ``<mechanism>.stages`` for pre-flight
    checks (``check_dpsgd``, ``preview_train_size``) and SWAG-PPM's pure tuning rules."""
    allowed = {"dprelease.swag_ppm.tuning"}
    bad = [f"{i.where()}: {i.target}" for i in orchestration_imports()
           if mechanism_of(i.target) and i.target != f"{mechanism_of(i.target)}.stages" and i.target not in allowed]
    assert not bad, "\n".join(bad)


def test_run_module_rule_flags_synthetic_imports(tmp_path):
    _write(tmp_path, "flows/bad.py", "from dprelease.swag_ppm.rounds import finetune\n"
                                     "from dprelease.dpsgd import train\n"
                                     "def f():\n    import dprelease.swag_ppm.select as s\n"
                                     "from dprelease.swag_ppm import tuning\n"
                                     "from dprelease.utility.evaluate import write_arm\n")
    known = set(module_files(SRC))
    imports = [i for i in raw_imports(tmp_path / "flows/bad.py", "flows.bad", known) if inside(i.target, PKG)]
    bad = run_module_violations(imports)
    assert len(bad) == 3
    assert any("dprelease.swag_ppm.rounds" in b for b in bad)
    assert any("dprelease.dpsgd.train" in b for b in bad)
    assert any("dprelease.swag_ppm.select" in b for b in bad)
    # utility.evaluate is shared, not a mechanism's run module; tuning is pure maths
    assert not any("utility" in b or "tuning" in b for b in bad)
