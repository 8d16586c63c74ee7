"""dprelease.contracts.code_scope: the static import closure a stage's cache key and dvc.yaml deps hash."""

from __future__ import annotations

import pytest

from dprelease.contracts import code_scope, plugins


def test_closure_follows_imports_parents_and_data():
    files = code_scope.closure("dprelease.core.data.stages")
    assert {
        "core/data/stages.py",
        "core/data/records.py",
        "core/data/__init__.py",
        "__init__.py",
        "core/config.py",
        "core/resources/oiics_201_nature.csv",
        "core/resources/__init__.py",
    } <= set(files)
    assert "core/plots.py" not in files and files == sorted(files)


def test_plugins_list_is_an_edge_to_every_params_section_and_plugin():
    known = set(code_scope.module_files())
    assert "dprelease.mechanisms.gpp.params" in code_scope.implicit_imports("dprelease.contracts.plugins", known)
    assert "dprelease.mechanisms.gpp.plugin" in code_scope.implicit_imports("dprelease.pipeline.registry", known)
    assert "mechanisms/gpp/stages.py" in code_scope.closure("dprelease.pipeline.registry")


def test_a_scope_holds_other_packages_params_only_where_it_reads_their_declarations():
    """The plug-in list's edges to the ``params`` modules are graph edges, not scope: config.py (the schema) reads
    no other package's params code; a module that reads the arms (labels, ``requires`` tests) does; a module's own
    package's ``params`` module is always in its scope."""
    config = code_scope.closure("dprelease.core.config")
    assert "contracts/plugins.py" in config and not [f for f in config if f.endswith("/params.py")]
    assert "mechanisms/gpp/params.py" not in code_scope.closure("dprelease.mechanisms.swag_ppm.rounds")
    assert "mechanisms/swag_ppm/params.py" in code_scope.closure(
        "dprelease.mechanisms.swag_ppm.rounds"
    )  # its own package's
    folders = [p.removeprefix("dprelease.").replace(".", "/") for p in code_scope.listed_packages()]
    assert {f"{f}/params.py" for f in folders if (code_scope.PACKAGE_DIR / f / "params.py").exists()} <= set(
        code_scope.closure("dprelease.compare.reports.compare")
    )  # reads plugins.arms()
    files = code_scope.module_files()
    assert code_scope.reads_declarations(files["dprelease.compare.reports.stages"], "dprelease.compare.reports.stages")
    assert not code_scope.reads_declarations(files["dprelease.core.config"], "dprelease.core.config")


def test_a_scope_holds_its_own_kinds_and_every_packages_only_where_it_reads_them_all():
    """A guarantee kind is its maker's: the stage that makes it has it in scope (its own package's ``kinds``
    module), the record's look-up by name brings in no other package's, and the frontier's recommendation,
    which reads every kind's ``worst_case``, has them all."""
    assert "mechanisms/swag_ppm/kinds.py" in code_scope.closure("dprelease.mechanisms.swag_ppm.publish")
    assert "core/privacy/kinds.py" in code_scope.closure(
        "dprelease.mechanisms.dpsgd.stages"
    )  # the core kinds, via guarantee.py
    assert "mechanisms/swag_ppm/kinds.py" not in code_scope.closure("dprelease.mechanisms.dpsgd.stages")
    assert "mechanisms/swag_ppm/kinds.py" in code_scope.closure(
        "dprelease.compare.frontier.report"
    )  # plugins.guarantee_kinds()
    assert "dprelease.mechanisms.swag_ppm.kinds" in code_scope.implicit_imports(
        "dprelease.contracts.plugins", set(code_scope.module_files())
    )


def test_the_list_of_packages_is_configuration_in_no_stages_scope():
    """Adding a mechanism to ``packages.py`` re-runs no other stage: the list is in the import graph (the plug-in
    list imports it) but, like another package's params section, in no stage's scope."""
    assert code_scope.listed_packages() == plugins.PACKAGES
    assert "contracts/packages.py" not in code_scope.closure(
        "dprelease.core.config", "dprelease.mechanisms.swag_ppm.rounds", "dprelease.pipeline.registry"
    )
    assert "contracts/plugins.py" in code_scope.closure("dprelease.core.config")
    assert any(
        i.target == "dprelease.contracts.packages"
        for i in code_scope.raw_imports(
            code_scope.PACKAGE_DIR / "contracts/plugins.py",
            "dprelease.contracts.plugins",
            set(code_scope.module_files()),
        )
    )


def test_declaration_readers_are_seen_in_every_form(tmp_path):
    cases = {
        "a.py": ("from .. import plugins\nx = plugins.arms()\n", True),
        "b.py": ("from ..plugins import frontier_sources\n", True),
        "c.py": ("from .. import plugins\nx = plugins.sections()\n", False),
        "d.py": ("arms = 1\nplugins = None\n", False),
    }  # no import of the plug-in list
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert code_scope.reads_declarations(tmp_path / name, f"dprelease.contracts.x.{name[:-3]}") is expected, name


def test_relative_imports_and_unknown_modules(tmp_path):
    pkg = tmp_path / "dprelease" / "a"
    pkg.mkdir(parents=True)
    (tmp_path / "dprelease" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("from . import n\nfrom ..b import x\nimport importlib\nimportlib.import_module('os')\n")
    (pkg / "n.py").write_text("")
    files = code_scope.module_files(tmp_path)
    got = {i.target for i in code_scope.raw_imports(files["dprelease.a.m"], "dprelease.a.m", set(files))}
    assert got == {"dprelease.a.n", "dprelease.b", "importlib", "os"}
    with pytest.raises(KeyError, match="not a module"):
        code_scope.closure("dprelease.nope")
