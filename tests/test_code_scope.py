"""dprelease.code_scope: the static import closure a stage's cache key and dvc.yaml deps hash."""

from __future__ import annotations

import pytest

from dprelease import code_scope


def test_closure_follows_imports_parents_and_data():
    files = code_scope.closure("dprelease.data.stages")
    assert {"data/stages.py", "data/records.py", "data/__init__.py", "__init__.py", "config.py",
            "resources/oiics_201_nature.csv", "resources/__init__.py"} <= set(files)
    assert "plots.py" not in files and files == sorted(files)


def test_plugins_list_is_an_edge_to_every_params_section_and_plugin():
    known = set(code_scope.module_files())
    assert "dprelease.gpp.params" in code_scope.implicit_imports("dprelease.plugins", known)
    assert "dprelease.gpp.plugin" in code_scope.implicit_imports("dprelease.registry", known)
    assert "gpp/params.py" in code_scope.closure("dprelease.config")
    assert "gpp/stages.py" in code_scope.closure("dprelease.registry")


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
