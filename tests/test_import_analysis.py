"""The import-graph analysis itself (tests/import_graph.py: ``ast`` only, nothing imported) on synthetic packages
and on the real one, and each rule's detector shown to see a synthetic violation. The rules applied to the
package, ``tasks/`` and ``flows/``: tests/test_imports.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import (
    PKG,
    SRC,
    cross_mechanism_violations,
    find_cycle,
    import_graph,
    init_has_code,
    inside,
    internal_imports,
    module_files,
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
def graph() -> dict[str, set[str]]:
    return import_graph(SRC)


# ------------------------------------------------------------------------------------ the analysis itself


def _write(root: Path, rel: str, text: str = "") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


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


# ------------------------------------------------------------------ each rule sees a synthetic violation


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


def test_third_party_rule_sees_synthetic_violations(tmp_path):
    _write(tmp_path, "dprelease/__init__.py", "")
    _write(
        tmp_path,
        "dprelease/x.py",
        "def f():\n    import mlflow.sklearn\n    from prefect import flow\n    __import__('dvc.api')\n",
    )
    tops = {top_level(i.target) for i in raw_imports(tmp_path / "dprelease/x.py", "dprelease.x")}
    assert {"mlflow", "prefect", "dvc"} <= tops


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
