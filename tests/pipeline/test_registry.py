"""The one stage registry and its three consumers agree: ``dprelease stage NAME`` (run_stage), the
Prefect tasks (``tasks/stages.py``) and the generated ``dvc.yaml``; every stage declares its code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, slice_raw

from dprelease.contracts.source import PACKAGE_DIR, code_files
from dprelease.core.config import load_params, parse_params
from dprelease.pipeline import registry

DEFAULT = load_params(ROOT / "params.yaml")


def _dvc() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))


def test_dvc_yaml_in_sync_with_the_registry():
    expected = registry.dvc_yaml(DEFAULT)
    actual = _dvc()
    assert actual == expected, "dvc.yaml is out of date; regenerate it with `dprelease dvc-yaml`"
    assert json.loads(json.dumps(actual)) == actual  # plain YAML types only


def test_dvc_yaml_is_the_release_pipeline_plus_track():
    """What ``make run`` runs (every release stage, needed or not), so that it leaves ``dvc status`` clean; the
    other flows' stages are not DVC stages, and no DVC input is another flow's output."""
    release = [s.name for s in registry.group(DEFAULT, "release", active_only=False)]
    assert list(_dvc()["stages"]) == release + ["track"]
    assert {"select", "publish"} <= set(release) and "nonprivate" not in release
    others = {p for s in registry.stages(DEFAULT) if s.group != "release" for p in s.produced}
    deps = {d for entry in _dvc()["stages"].values() for d in entry["deps"]}
    assert deps.isdisjoint(others)
    publish = registry.get(DEFAULT, "publish")  # the audit is its evidence, not its deps (DP-SGD's card)
    assert {"reports/privacy"} <= set(publish.evidence) & others
    assert set(publish.deps).isdisjoint(others) and set(publish.evidence) <= set(publish.inputs)
    swag = parse_params({"released": {"mechanism": "swag_ppm"}})  # SWAG-PPM's card: the comparison and the audit
    publish = registry.get(swag, "publish")
    swag_others = {p for s in registry.stages(swag) if s.group != "release" for p in s.produced}
    assert {"metrics/nonprivate.json", "reports/privacy"} <= set(publish.evidence) & swag_others


def test_every_dvc_stage_lists_its_code_as_folders():
    """dvc.yaml reads as the pipeline's map: a stage's code deps are the folders of its code (a floor, a mechanism
    or a comparison package), the package's and the mechanisms' ``__init__.py`` aside."""
    stages = _dvc()["stages"]
    for s in registry.group(DEFAULT, "release", active_only=False):
        entry = stages[s.name]
        assert entry["cmd"] == f"dprelease stage {s.name}"
        code = [d for d in entry["deps"] if d.startswith("src/dprelease")]
        if s.code == ["."]:  # a stage that re-runs whole pipelines depends on the whole package
            assert code == ["src/dprelease"], s.name
            continue
        assert code == registry.code_folders(s.code), s.name
        assert {"src/dprelease/core", "src/dprelease/__init__.py"} <= set(code), s.name
        own = "/".join(s.module.split(".")[1:3]) if s.module.split(".")[1] in registry.PER_PACKAGE else None
        assert own is None or f"src/dprelease/{own}" in code, (s.name, s.module)
        for rel in code:  # every declared path exists in the checkout
            assert (ROOT / rel).exists(), rel
    # the tracking run asks every releasing plug-in for its settings: whole floors, each named once
    assert [d for d in stages["track"]["deps"] if d.startswith("src/")] == [
        f"src/dprelease/{p}" for p in ("__init__.py", "compare", "contracts", "core", "mechanisms", "pipeline")
    ]
    # the tracking run reads what each staged release's figures hook reads (its ReleaseSpec's deps), no more
    staged = [d for spec in registry.staged_releases(DEFAULT) for d in spec.deps(DEFAULT)]
    assert "metrics/released.json" in stages["track"]["deps"] and set(staged) <= set(stages["track"]["deps"])
    lines = (ROOT / "dvc.yaml").read_text(encoding="utf-8").count("\n")
    assert lines < 475, lines  # was ~1,100 with one line per file (the track stage lists its data deps one a line)


def test_code_folders_name_a_floor_when_every_package_of_it_is_read():
    every = [f"{rel}/__init__.py" if not rel.endswith(".py") else rel for rel in registry._floor_parts("mechanisms")]
    assert registry.code_folders(every + ["core/io.py"]) == ["src/dprelease/core", "src/dprelease/mechanisms"]
    assert registry.code_folders(every[1:] + ["core/io.py"])[-1] != "src/dprelease/mechanisms"  # one missing


def test_code_folders_rule():
    assert registry.code_folders(["."]) == ["src/dprelease"]
    code = ["__init__.py", "compare/arms.py", "compare/mia/canary.py", "core/privacy/secret.py", "core/io.py"]
    code += ["mechanisms/__init__.py", "mechanisms/dpsgd/stages.py", "mechanisms/dpsgd/x/y.py", "pipeline/plan.py"]
    assert registry.code_folders(code) == [
        f"src/dprelease/{p}"
        for p in (
            "__init__.py",
            "compare/arms.py",
            "compare/mia",
            "core",
            "mechanisms/__init__.py",
            "mechanisms/dpsgd",
            "pipeline",
        )
    ]
    assert registry.code_folders(["mechanisms", "mechanisms/dpsgd/a.py", "core/io.py"]) == [
        "src/dprelease/core",
        "src/dprelease/mechanisms",
    ]  # an extra_code folder covers what lies in it


def test_dvc_hashes_every_file_of_each_stages_exact_code():
    """The folder deps are a superset of the exact closure (the cache key's files), after .dvcignore: ``dvc repro``
    never misses a change to a stage's code (it may re-run a stage for a change to a folder's other files)."""
    from dvc.fs import LocalFileSystem
    from dvc.ignore import DvcIgnoreFilter

    from dprelease.contracts.code_scope import closure

    fs = LocalFileSystem()
    ignore = DvcIgnoreFilter(fs, str(ROOT))
    hashed: dict[str, set[Path]] = {}

    def seen(dep: str) -> set[Path]:  # the files DVC hashes for one dep
        if dep not in hashed:
            path = ROOT / dep
            found = ignore.find(fs, str(path)) if path.is_dir() else [] if ignore.is_ignored_file(str(path)) else [path]
            hashed[dep] = {Path(f) for f in found}
        return hashed[dep]

    stages = _dvc()["stages"]
    codes = {s.name: s.code for s in registry.group(DEFAULT, "release", active_only=False)}
    codes["track"] = closure("dprelease.pipeline.tracking")
    for name, code in codes.items():
        covered = set().union(*(seen(d) for d in stages[name]["deps"] if d.startswith("src/dprelease")))
        missing = [f for f in code_files(code) if f not in covered]
        assert code_files(code) and not missing, (name, missing)
    assert not {PACKAGE_DIR / "contracts" / "packages.py", PACKAGE_DIR / "core" / "data" / "plugin_index.json"} & set(
        seen("src/dprelease/contracts") | seen("src/dprelease/core")
    )  # configuration and the generated index: in no folder's hash


def test_declared_code_resolves_to_source_files():
    for s in registry.stages(DEFAULT):
        files = code_files(s.code)
        # source, and the data files a module reads (contracts.code_scope.DATA: the OIICS list, the public encoder)
        assert files and all(f.suffix in {".py", ".csv", ".json", ".safetensors"} for f in files), s.name
        assert all("__pycache__" not in f.parts and PACKAGE_DIR in f.parents for f in files), s.name
    with pytest.raises(FileNotFoundError, match="nope.py"):
        code_files(["nope.py"])


def test_the_run_functions_module_is_part_of_the_declared_code():
    """A stage whose own module could change without changing its key would give stale results."""
    for s in registry.stages(DEFAULT):
        rel = s.module.removeprefix("dprelease.").replace(".", "/") + ".py"
        assert PACKAGE_DIR / rel in code_files(s.code), (s.name, rel)


def test_a_stage_declares_that_it_signs_exactly_when_it_reads_the_agency_key():
    """``signs=True`` is what the Prefect task reads to make the agency key before hashing the stage's inputs (no
    search of a stage's deps for the key's path): each signing stage lists the public key, and only they do."""
    from dprelease.core.release.signing import public_key_dep

    everything = parse_params({"gpp": {"osha": {"enabled": True}}})
    for params in (DEFAULT, everything):
        stages = registry.stages(params)
        assert {s.name for s in stages if s.signs} >= {"publish", "nvdp_sanitizer", "linear_ppm_publish"}
        assert {s.name for s in stages if s.signs} == {s.name for s in stages if public_key_dep(params) in s.deps}


def test_stage_names_unique_and_groups_known():
    names = [s.name for s in registry.stages(DEFAULT)]
    assert len(names) == len(set(names))
    # the groups come from the plug-ins (plugins.PACKAGES); each is a flow's group or holds a flow's target
    stages, flows = registry.stages(DEFAULT), registry.flows().values()
    targets = {t for f in flows for t in f.targets}
    reached = {g for f in flows for g in f.groups} | {s.group for s in stages if s.name in targets}
    assert {s.group for s in stages} == reached and registry.PIPELINE in reached
    # the stage set and order the release flow runs with the default params (select needs a validation split)
    assert [s.name for s in registry.group(DEFAULT, "release")] == [
        "secret",
        "stratify",
        "featurize",
        "finetune_r1",
        "swag_r1",
        "risk",
        "finetune_r2",
        "swag_r2",
        "sensitivity_r2",
        "reweight",
        "draw",
        "evaluate",
        "dpsgd_release",
        "publish",
    ]
    # the comparison's and the audit's: these, in this order (a new mechanism's arm joins them: not listed here)
    compare = [s.name for s in registry.group(DEFAULT, "compare")]
    assert [n for n in compare if n in COMPARE] == COMPARE
    audit = [s.name for s in registry.group(DEFAULT, "audit")]
    assert [n for n in audit if n in AUDIT] == AUDIT


COMPARE = [
    "nonprivate",
    "swag_ppm",
    "swag_ppm_uncalibrated",
    "swag_ppm_censored",
    "dpsgd",
    "dpsgd_sweep",
    "compare_report",
]
AUDIT = ["audit_replay", "audit_pool", "audit_references", "privacy_audit", "canary_runs", "privacy_report"]


def test_active_stages_follow_params():
    off = parse_params(slice_raw(ppm__reweight=False))
    names = [s.name for s in registry.group(off, "release")]
    assert not {"reweight", "select"} & set(names)
    val = parse_params(slice_raw(selection__enabled=True))
    assert "select" in [s.name for s in registry.group(val, "release")]
    everything = [s.name for s in registry.group(off, "release", active_only=False)]
    assert {"reweight", "select"} <= set(everything)


def test_select_is_a_graph_stage():
    s = registry.get(DEFAULT, "select")
    assert s.outs == ["release-selected", "artifacts/selection"] and s.metrics == ["metrics/selection.json"]
    assert "selection" in s.params and "release" in s.params
    assert "select" in _dvc()["stages"]


def test_release_path_in_the_publish_stage():
    p = parse_params({"release": "shipping/v2"})
    publish = registry.get(p, "publish")
    assert publish.outs == ["shipping/v2"] and "release" in publish.params
    assert registry.get(p, "select").outs[0] == "shipping/v2-selected"


def test_unknown_stage_is_one_line():
    with pytest.raises(KeyError, match="unknown stage 'nope'") as info:
        registry.get(DEFAULT, "nope")
    assert "\n" not in str(info.value)


def test_prefect_tasks_prepare_every_registered_stage(tmp_path):
    """The Prefect side has no stage list of its own: every registry stage gets a task and a key."""
    import tasks.stages as ts

    for s in registry.stages(DEFAULT):
        task, args = ts._prepared(s.name, DEFAULT, tmp_path)
        assert task.name == s.name and args[0] == s.name
        assert args[3].startswith(f"{s.name}-")
    assert ts.run_stage is registry.run_stage


def test_no_other_dispatcher_remains():
    """Stage dispatch lives in the registry only: no name → function tables elsewhere."""
    needles = ("STAGE_FUNCS", "ROUND_FUNCS", "ARM_FUNCS", "def run_stage")
    for path in [*PACKAGE_DIR.rglob("*.py"), *(ROOT / "tasks").rglob("*.py"), *(ROOT / "flows").rglob("*.py")]:
        if path.name == "registry.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not any(n in text for n in needles), path


def test_every_param_a_stage_reads_is_in_params_yaml():
    """DVC refuses a stage whose `params:` are missing from params.yaml."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    missing = set()
    for s in registry.stages(DEFAULT):
        for key in s.params:
            node = raw
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    missing.add(key)
                    break
                node = node[part]
    assert not missing, f"params.yaml lacks {sorted(missing)}"
