"""Code-scoped cache keys: a stage's key hashes the params it reads, its inputs and only the code it
declares. Editing a plot must not re-run a posterior pass; editing the PPM maths must re-run every
stage that uses it. A traced run checks the declarations: the package code a stage executes is
always inside the code it declares."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import make_root, slice_raw, trace_package

from dprelease.contracts import source
from dprelease.core.config import parse_params
from dprelease.pipeline import cache, registry

PARAMS = parse_params(slice_raw())


@pytest.fixture
def package_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the package source that the key functions hash instead of the real one."""
    code = tmp_path / "dprelease"
    shutil.copytree(source.PACKAGE_DIR, code, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(source, "PACKAGE_DIR", code)
    return code


def _keys(root: Path) -> dict[str, str]:
    return {s.name: cache.input_key(s, PARAMS, root) for s in registry.stages(PARAMS)}


def _edit(path: Path) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")


def _changed(before: dict, after: dict) -> set[str]:
    return {name for name in before if before[name] != after[name]}


def test_editing_a_plot_reruns_only_plotting_stages(package_copy, tmp_path):
    before = _keys(tmp_path)
    _edit(package_copy / "core/plots.py")
    changed = _changed(before, _keys(tmp_path))
    # canary_runs re-runs whole pipelines through the registry, so it declares the whole package
    assert changed == {"evaluate", "compare_report", "privacy_report", "canary_runs"}
    assert not changed & {"risk", "sensitivity_r2", "reweight"}  # no posterior pass


def test_editing_the_ppm_maths_reruns_every_stage_that_uses_it(package_copy, tmp_path):
    before = _keys(tmp_path)
    _edit(package_copy / "mechanisms" / "swag_ppm" / "ppm.py")
    changed = _changed(before, _keys(tmp_path))
    assert {"risk", "sensitivity_r2", "reweight", "draw", "select", "swag_ppm", "swag_ppm_censored"} <= changed
    assert not changed & {"stratify", "featurize", "finetune_r1", "swag_r1", "nonprivate", "dpsgd"}


def test_editing_another_mechanisms_params_section_reruns_no_release_stage(package_copy, tmp_path):
    """A stage's scope holds its own package's ``params`` module, not another's (the key hashes the values it
    reads): editing GPP's params section re-runs GPP and the arm readers, never the SWAG-PPM chain."""
    release = {s.name for s in registry.group(PARAMS, "release", active_only=False)}
    before = _keys(tmp_path)
    _edit(package_copy / "mechanisms" / "gpp" / "params.py")
    changed = _changed(before, _keys(tmp_path))
    assert not changed & release
    assert {"gpp_release", "compare_report", "privacy_report"} <= changed  # its own stages; readers of the arms
    assert not changed & {"nonprivate", "dpsgd", "swag_ppm", "nvdp_probe"}
    before = _keys(tmp_path)
    _edit(package_copy / "mechanisms" / "swag_ppm" / "params.py")  # a release stage's own package's: in its scope
    assert {"risk", "draw", "publish"} <= _changed(before, _keys(tmp_path))


def test_editing_the_params_model_reruns_everything(package_copy, tmp_path):
    before = _keys(tmp_path)
    _edit(package_copy / "core/config.py")  # every run module reads Params
    assert _changed(before, _keys(tmp_path)) == set(before)


def test_editing_a_shared_module_reruns_exactly_the_stages_that_import_it(package_copy, tmp_path):
    before = _keys(tmp_path)
    _edit(package_copy / "core/seeds.py")
    changed = _changed(before, _keys(tmp_path))
    importers = {s.name for s in registry.stages(PARAMS) if s.code == ["."] or "core/seeds.py" in s.code}
    assert changed == importers
    assert {"finetune_r1", "swag_r1", "risk", "draw"} <= changed and "secret" not in changed


def test_bytecode_and_unrelated_files_do_not_change_keys(package_copy, tmp_path):
    before = _keys(tmp_path)
    (package_copy / "__pycache__").mkdir(exist_ok=True)
    (package_copy / "__pycache__" / "plots.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (package_copy / "mechanisms" / "swag_ppm" / "notes.txt").write_text("not code", encoding="utf-8")
    assert _keys(tmp_path) == before


def test_key_follows_params_and_inputs(tmp_path):
    risk = registry.get(PARAMS, "risk")
    key = cache.input_key(risk, PARAMS, tmp_path)
    assert cache.input_key(risk, parse_params(slice_raw(ppm__c=0.8)), tmp_path) != key
    assert (
        cache.input_key(risk, parse_params(slice_raw(evaluation__draws=5)), tmp_path) == key
    )  # a param it does not read
    swag = tmp_path / PARAMS.artifacts / "round1" / "swag"
    swag.mkdir(parents=True)
    (swag / "moments.safetensors").write_bytes(b"x")
    assert cache.input_key(risk, PARAMS, tmp_path) != key


# the declarations checked against what actually runs -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["head", "full"])
def test_code_a_stage_runs_is_code_it_declares(backend, tmp_path, monkeypatch):
    """Every stage of both flows, run on a fresh slice root (validation split on, so ``select`` runs):
    the package files whose functions executed ⊆ the stage's declared code. Selection keeps trying until a
    draw passes (γ = 1e-6; at γ = 0.1 a third of the slice's runs stopped empty-handed and never wrote a release)."""
    from conftest import COMPARE

    raw = slice_raw(
        backend,
        data__validation_size=0.3,
        selection__tau=0.0,
        selection__gamma=1e-6,
        selection__enabled=True,
        privacy_audit={
            "pool_size": 300,
            "references": 3,
            "canaries": 40,
            "input_canaries": 60,
            "guess_grid": [10],
            "replay_targets": 1,
        },
    )  # the replay's code, not its power
    raw.update(COMPARE)
    params = parse_params(raw)
    root = make_root(tmp_path)
    monkeypatch.setenv(
        "DPRELEASE_AUDIT_WORKERS", "1"
    )  # the audit's fits run in this process, where the trace sees them
    stages = registry.group(params, "release") + registry.group(params, "compare") + registry.group(params, "audit")
    assert "select" in [s.name for s in stages]
    used = {}
    for s in stages:
        extra = {"stages": registry.ACCESS} if s.runs_stages else {}  # as the registry calls it
        used[s.name] = trace_package(lambda: s.run(params, root, **extra))
        declared = {f.relative_to(source.PACKAGE_DIR).as_posix() for f in source.code_files(s.code)}
        assert used[s.name] <= declared, f"{s.name} ran code it does not declare: {sorted(used[s.name] - declared)}"
    # the trace sees what it should (so the check above is not vacuous)
    assert {"mechanisms/swag_ppm/passes.py", "mechanisms/swag_ppm/ppm.py", f"core/backends/{backend}.py"} <= used[
        "risk"
    ]
    assert "core/plots.py" in used["evaluate"] and "core/plots.py" not in used["risk"]
    assert {"mechanisms/dpsgd/train.py", "mechanisms/dpsgd/accounting.py", "core/privacy/rdp.py"} <= used["dpsgd"]
    assert {"mechanisms/swag_ppm/select.py", "core/privacy/selection.py", "core/release/folder.py"} <= used["select"]
    assert {"compare/mia/attack.py", "compare/mia/scores.py", "compare/mia/bounds.py", "core/release/check.py"} <= used[
        "privacy_audit"
    ]
    assert {"mechanisms/swag_ppm/rounds.py", "mechanisms/dpsgd/train.py", "pipeline/registry.py"} <= used["canary_runs"]
