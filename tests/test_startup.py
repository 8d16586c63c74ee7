"""Start-up structure (no timing here: benchmarks/bench_startup.py measures it): help is parsed before anything
heavy is imported, ``dprelease stage NAME`` imports that stage's package only, and the plug-in index that makes
this possible is the registry's own (a test fails when it drifts)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from dprelease.contracts import plugins
from dprelease.contracts.code_scope import PKG, closure
from dprelease.core.config import load_params, parse_params
from dprelease.pipeline import registry

HEAVY = ("torch", "opacus", "pandas", "prefect", "mlflow", "transformers", "sklearn", "scipy", "flwr", "dask")
SUBCOMMANDS = ("stage", "predict", "sanitize", "verify", "key", "dvc-yaml", "plugin-index", "track", "secret")
FLOW_MODULES = sorted(
    p.stem
    for p in (ROOT / "flows").glob("*.py")
    if p.stem != "__init__" and '__name__ == "__main__"' in p.read_text(encoding="utf-8")
)
# flow modules whose --help still imports Prefect and the service at module level (their own imports, not this
# structure's): strict, so the entry goes once the module parses its arguments first
HEAVY_HELP: dict[str, str] = {}


def _imported(*args: str) -> set[str]:
    """Every module a fresh ``python -X importtime ARGS`` imports (read from its import-time report)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def _plug_in_modules(modules) -> set[str]:
    """The listed packages' ``plugin`` and ``stages`` modules among ``modules``."""
    return {
        m for m in modules if m.rsplit(".", 1)[0] in plugins.PACKAGES and m.rsplit(".", 1)[1] in ("stages", "plugin")
    }


HELP_ALL = f"""
from dprelease.cli import main
for argv in (["--help"], *[[c, "--help"] for c in {SUBCOMMANDS!r}]):
    try:
        main(argv)
    except SystemExit as e:
        assert e.code == 0, argv
"""


def test_dprelease_help_imports_nothing_heavy():
    modules = _imported("-c", HELP_ALL)
    assert "dprelease.cli" in modules  # not vacuous
    assert _heavy(modules) == []
    assert not _plug_in_modules(modules)  # no plug-in either


@pytest.mark.parametrize("module", FLOW_MODULES)
def test_flow_help_imports_nothing_heavy(module, request):
    if module in HEAVY_HELP:
        request.applymarker(pytest.mark.xfail(reason=HEAVY_HELP[module], strict=True))
    modules = _imported("-m", f"flows.{module}", "--help")
    assert "flows" in modules  # not vacuous: the report is read
    assert _heavy(modules) == []


RESOLVE = """
import json, sys
from dprelease.pipeline import registry
from dprelease.core.config import load_params
stage = registry.get(load_params("params.yaml"), sys.argv[1])
print(json.dumps({"run": stage.module, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize(
    "name, package", [("secret", "dprelease.core.privacy"), ("draw", "dprelease.mechanisms.swag_ppm")]
)
def test_resolving_a_stage_imports_its_package_only(name, package):
    proc = subprocess.run([sys.executable, "-c", RESOLVE, name], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["run"].startswith(package + ".")
    # its own plug-in, plus the shared ``stages`` modules its own code imports (e.g. privacy's key_id_file)
    needed = {f"{PKG}.{path[:-3].replace('/', '.')}" for path in closure(f"{package}.plugin")}
    assert _plug_in_modules(got["modules"]) == _plug_in_modules(needed) >= {f"{package}.stages", f"{package}.plugin"}
    if package == "dprelease.core.privacy":  # the randomness key: no numerical library beyond numpy
        assert _heavy(set(got["modules"])) == []


def test_unknown_stage_is_answered_from_the_index(tmp_path):
    """With an index newer than every plug-in source (as ``dprelease plugin-index`` leaves it), an unknown name is
    a one-line error without importing any plug-in."""
    (tmp_path / "params.yaml").write_bytes((ROOT / "params.yaml").read_bytes())  # its own root (and root lock)
    for package in plugins.PACKAGES:  # written now: current
        copy = registry.index_file(package, tmp_path / "ix")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(registry.index_file(package).read_bytes())
    script = (
        "import json, sys; from pathlib import Path; from dprelease.pipeline import registry; "
        "registry.INDEX_ROOT = Path('ix'); from dprelease.cli import main; "
        "rc = main(['stage', 'no_such_stage']); print(json.dumps([rc, sorted(sys.modules)]))"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    rc, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 2 and "unknown stage 'no_such_stage'" in proc.stderr and "secret" in proc.stderr
    assert not _plug_in_modules(modules)


# ----------------------------------------------------------------------------------------------- the index


def test_plugin_index_is_in_sync_with_the_registry():
    written = registry.read_index()
    assert written is not None, "a listed package has no plug-in index fragment: run `dprelease plugin-index`"
    assert written == registry.build_index(load_params(ROOT / "params.yaml")), (
        "the plug-in index is out of date; regenerate it with `dprelease plugin-index`"
    )
    assert registry.plugin_index() == written  # every fragment is there: the index is used
    # stage names never depend on params (every stage is always declared): any params give the same index
    assert registry.build_index(parse_params({"nvdp": {"tasks": ["osha"]}, "ppm": {"reweight": False}})) == written
    # every stage, each under its package (``publish``: the release package's, placed by the registry after the
    # declared release's stage)
    assert sorted(written["stages"]) == sorted(s.name for s in registry.stages(load_params(ROOT / "params.yaml")))
    assert written["stages"]["publish"] == "dprelease.core.release"
    assert written["releases"] == {
        "swag_ppm": {"package": "dprelease.mechanisms.swag_ppm", "stage": "draw"},
        "public_only": {"package": "dprelease.mechanisms.public_only", "stage": "public_release"},
        "dpsgd": {"package": "dprelease.mechanisms.dpsgd", "stage": "dpsgd_release"},
        "ncm": {"package": "dprelease.mechanisms.ncm", "stage": "ncm_release"},
        "linear_ppm": {"package": "dprelease.mechanisms.linear_ppm", "stage": "linear_ppm_draw"},
    }
    assert set(written["flows"]) == set(registry.flows())


def test_a_stale_or_missing_index_falls_back_to_every_plug_in(monkeypatch, tmp_path):
    params = load_params(ROOT / "params.yaml")
    registry.write_index(params, root=tmp_path / "lacking")
    registry.index_file(
        "dprelease.mechanisms.gpp", tmp_path / "lacking"
    ).unlink()  # a package without its fragment: not used
    registry.write_index(params, root=tmp_path / "foreign")
    registry.index_file("dprelease.mechanisms.gpp", tmp_path / "foreign").write_text(  # a fragment of another package
        registry.index_file("dprelease.mechanisms.nvdp", tmp_path / "foreign").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    for root in (tmp_path / "lacking", tmp_path / "foreign", tmp_path / "missing"):
        monkeypatch.setattr(registry, "INDEX_ROOT", root)
        registry.plugin_index.cache_clear()
        try:
            assert registry.plugin_index() is None
            assert registry.get(params, "publish").name == "publish"
            assert set(registry.flow_help()) == set(registry.flows())
            with pytest.raises(KeyError, match="unknown stage 'nope'"):
                registry.get(params, "nope")
        finally:
            registry.plugin_index.cache_clear()


def test_a_name_the_index_lacks_is_looked_up_everywhere_once_a_source_changed(monkeypatch, tmp_path):
    """A stage added since the index was written runs before anyone regenerates it (this test's drift check fails
    meanwhile); with no source newer than the index, the index's answer is final (the fast unknown-stage error)."""
    import os

    params = load_params(ROOT / "params.yaml")
    lacking = registry.build_index(params)
    del lacking["stages"]["dpsgd_sweep"]
    paths = registry.write_index(params, root=tmp_path)
    monkeypatch.setattr(registry, "INDEX_ROOT", tmp_path)
    monkeypatch.setattr(registry, "plugin_index", lambda: lacking)
    os.utime(
        registry.index_file("dprelease.mechanisms.swag_ppm", tmp_path), ns=(0, 0)
    )  # older than its package's sources
    assert not registry.index_is_current()
    assert registry.get(params, "dpsgd_sweep").name == "dpsgd_sweep"
    for path in paths:
        os.utime(path, ns=(2**62, 2**62))  # newer than every source file
    assert registry.index_is_current()
    with pytest.raises(KeyError, match="unknown stage 'dpsgd_sweep'"):
        registry.get(params, "dpsgd_sweep")


def test_an_index_naming_the_wrong_package_is_corrected_by_the_registry(monkeypatch):
    params = load_params(ROOT / "params.yaml")
    wrong = registry.build_index(params)
    wrong["stages"]["draw"] = "dprelease.core.privacy"  # e.g. a stage moved since the index was written
    monkeypatch.setattr(registry, "plugin_index", lambda: wrong)
    assert registry.get(params, "draw").module.startswith("dprelease.mechanisms.swag_ppm.")
    with pytest.raises(KeyError, match="unknown stage 'nope'"):
        registry.get(params, "nope")


def test_sanitizers_come_from_the_index():
    from dprelease.core.errors import ReleaseError

    assert set(registry.read_index()["sanitizers"]) == {"gpp", "nvdp"}
    assert registry.sanitizer("gpp") is registry.plugin("dprelease.mechanisms.gpp").sanitize
    with pytest.raises(ReleaseError, match=r"sanitizers: gpp, nvdp\)"):
        registry.sanitizer("swag_ppm")


def test_plugin_index_command_writes_the_index(tmp_path, capsys):
    from dprelease.cli import main

    assert main(["plugin-index", "--params", str(ROOT / "params.yaml"), "--output", str(tmp_path)]) == 0
    assert registry.read_index(tmp_path) == registry.read_index() is not None
    assert (
        json.loads(registry.index_file("dprelease.mechanisms.gpp", tmp_path).read_text(encoding="utf-8"))["sanitizer"]
        == "gpp"
    )
    assert "wrote" in capsys.readouterr().out


def test_flow_modules_build_their_prefect_flows_on_first_use(monkeypatch):
    """The flows and the tuning task, built on first attribute access, are the Prefect objects they were when
    the modules built them at import; a monkeypatched one is what ``main`` runs."""
    from prefect import Flow, Task

    import flows.compare as fc
    import flows.release as fr
    import flows.run as frun
    import flows.tune as ft

    assert {fr.release_flow.name, fc.compare_flow.name, frun.graph_flow.name, ft.tune_flow.name} == {
        "dprelease-release",
        "swag-ppm-compare",
        "dprelease-flow",
        "swag-ppm-tune",
    }
    assert all(isinstance(f, Flow) for f in (fr.release_flow, fc.compare_flow, frun.graph_flow, ft.tune_flow))
    assert isinstance(ft.cell_task, Task) and ft.cell_task is ft.cell_task  # built once
    assert fr.release_flow is fr.__getattr__("release_flow")
    sentinel = object()
    monkeypatch.setattr(fr, "release_flow", sentinel)
    assert fr.__getattr__("release_flow") is sentinel
    with pytest.raises(AttributeError):
        fr.no_such_thing  # noqa: B018
