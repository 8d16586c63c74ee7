"""dprelease.contracts.plugins / dprelease.contracts.mechanism: a new mechanism is one new folder plus one line in the plug-in list.

End to end in a copy of the package: a toy mechanism (params section, one stage, one flow, one arm) is added
by writing its folder and appending its package name to ``PACKAGES`` (found by ``ast``) — no other file is edited — and then
``Params`` has its section, the registry runs its stage, its flow is planned and listed, and ``compare.arms``
accepts its arm (the comparison report then reads its files)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT

from dprelease.contracts import code_scope, plugins, source
from dprelease.core.config import load_params
from dprelease.pipeline import registry

TOY = {
    "__init__.py": '"""A toy mechanism (test only)."""\n',
    "params.py": """
        from pydantic import BaseModel, ConfigDict, Field
        from dprelease.contracts.mechanism import Arm

        class ToyParams(BaseModel):
            model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
            scale: int = Field(2, ge=1)

        SECTION = ("toy", ToyParams)
        ARMS = (Arm(name="toy", stage="toy_total", label="Toy", audited=False),)
        """,
    "stages.py": """
        from pathlib import Path
        from dprelease.core.io import write_json
        from dprelease.contracts.stage import Stage

        def total(params, root="."):
            value = params.toy.scale * 21
            write_json(Path(root) / "reports" / "arms" / "toy" / "summary.json", {"value": value})
            write_json(Path(root) / "metrics" / "toy.json", {"value": value})
            return {"value": value}

        def declare(params):  # its arm's files (reports/arms/toy, metrics/toy.json) are its stage's outputs
            return [Stage(name="toy_total", run=total, params=["toy"], deps=["artifacts/data"],
                          outs=["reports/arms/toy"], metrics=["metrics/toy.json"], group="toy")]
        """,
    "plugin.py": """
        from dprelease.contracts.mechanism import FlowSpec, Mechanism
        from . import stages

        PLUGIN = Mechanism(name="toy", declare=stages.declare,
                           flows=(FlowSpec(name="toy", title="toy", groups=("toy",), doc="a toy flow"),))
        """,
}

CHECK = """
import json, sys
from dprelease.contracts import source
from dprelease.pipeline import plan as pipeline, registry
from dprelease.core.config import parse_params
p = parse_params({"toy": {"scale": 3}, "compare": {"arms": ["nonprivate", "toy"]}})
plan = pipeline.plan(registry.stages(p), p, **{"groups": registry.flows()["toy"].groups})
summary = registry.run_stage("toy_total", p, sys.argv[1])
try:
    parse_params({"privacy_audit": {"arms": ["toy"]}})
    audit = "accepted"
except Exception as e:
    audit = str(e)
print(json.dumps({"scale": p.toy.scale, "order": plan.order, "summary": summary, "arms": sorted(registry.arms()),
                  "flows": sorted(registry.flows()), "code": registry.get(p, "toy_total").code,
                  "report_deps": registry.get(p, "compare_report").deps, "audit": audit,
                  "release_code": {s.name: s.code for s in registry.group(p, "release", active_only=False)},
                  "release_hash": {s.name: source.code_hash(s.code) for s in registry.group(p, "release", active_only=False)},
                  "report_code": registry.get(p, "compare_report").code}))
"""


def add_package(listing: Path, package: str) -> None:
    """Append ``package`` to the ``PACKAGES`` literal of the plug-in list at ``listing`` (wherever it sits, however
    it is laid out: the assignment is found by ``ast``, as the import-graph analysis reads it)."""
    import ast

    text = listing.read_text(encoding="utf-8")
    node = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "PACKAGES" for t in n.targets)
    )
    listed = (*ast.literal_eval(node.value), package)
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.value.lineno - 1]) + node.value.col_offset
    end = sum(len(line) for line in lines[: node.value.end_lineno - 1]) + node.value.end_col_offset
    listing.write_text(
        text[:start] + "(" + "".join(f"\n    {p!r}," for p in listed) + "\n)" + text[end:], encoding="utf-8"
    )


def test_a_new_mechanism_is_one_folder_and_one_line(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(code_scope.PACKAGE_DIR, src / "dprelease", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in TOY.items():
        (src / "dprelease" / "mechanisms" / "toy").mkdir(exist_ok=True)
        (src / "dprelease" / "mechanisms" / "toy" / name).write_text(textwrap.dedent(text), encoding="utf-8")
    add_package(src / "dprelease" / "contracts" / "packages.py", "dprelease.mechanisms.toy")
    root = tmp_path / "root"
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(root)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["scale"] == 3 and got["summary"] == {"value": 63}
    assert json.loads((root / "metrics" / "toy.json").read_text()) == {"value": 63}
    assert got["order"][-1] == "toy_total" and "stratify" in got["order"]  # its dep's producer is planned
    assert "toy" in got["arms"] and "toy" in got["flows"]
    # its arm can be compared (the report reads its files) but not audited (it declared audited=False)
    assert {"reports/arms/toy", "metrics/toy.json"} <= set(got["report_deps"])
    assert "privacy_audit.arms.0" in got["audit"] and "'toy'" not in got["audit"]
    assert {"mechanisms/toy/stages.py", "mechanisms/toy/params.py", "contracts/stage.py", "core/io.py"} <= set(
        got["code"]
    )
    # its params section is in no other package's stage's scope (their keys hash the values they read) ...
    params = load_params(ROOT / "params.yaml")
    assert got["release_code"] == {s.name: s.code for s in registry.group(params, "release", active_only=False)}
    # nor is the list of packages it was added to (configuration): every release stage's key and dvc.yaml deps,
    # hence dvc.lock, are as they were
    assert got["release_hash"] == {
        s.name: source.code_hash(s.code) for s in registry.group(params, "release", active_only=False)
    }
    # ... except where its declarations are read: the comparison report reads its arm's label
    assert "mechanisms/toy/params.py" in got["report_code"]


def test_the_plug_in_list_is_rewritten_by_ast(tmp_path):
    listing = tmp_path / "packages.py"
    listing.write_text(
        (code_scope.PACKAGE_DIR / "contracts" / "packages.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    add_package(listing, "dprelease.mechanisms.toy")
    compile(listing.read_text(encoding="utf-8"), str(listing), "exec")  # still Python
    assert code_scope._listed_packages(listing, code_scope._stamp(listing)) == (
        *plugins.PACKAGES,
        "dprelease.mechanisms.toy",
    )


def _params_module(package: str):
    import importlib.util

    return importlib.import_module(f"{package}.params") if importlib.util.find_spec(f"{package}.params") else None


def test_the_real_list_loads_every_package_once():
    """Everything below is derived from the one list (``plugins.PACKAGES``); what can still fail: a plug-in named
    after another folder, a section params.yaml lacks, an arm out of package order, a flow without its help line."""
    import yaml

    names = [m.name for m in registry.MECHANISMS]
    assert len(names) == len(set(names)) == len(plugins.PACKAGES)
    assert names == [p.rsplit(".", 1)[1] for p in plugins.PACKAGES]  # each plugin.py names its own folder
    modules = [m for p in plugins.PACKAGES if (m := _params_module(p)) is not None]
    sections = [
        key
        for m in modules
        for key, _ in ((m.SECTION,) if hasattr(m, "SECTION") else ()) + tuple(getattr(m, "SECTIONS", ()))
    ]
    assert list(plugins.sections()) == sections and sections  # every declared section, once, in package order
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert set(sections) <= set(raw), f"params.yaml lacks the sections {sorted(set(sections) - set(raw))}"
    assert list(registry.arms()) == [a.name for m in modules for a in getattr(m, "ARMS", ())]  # the reports' rows
    assert registry.arms() and plugins.arm_names() == list(registry.arms())
    flows = [f.name for p in plugins.PACKAGES for f in registry.plugin(p).flows]
    assert sorted(registry.flows()) == sorted(flows) and len(set(flows)) == len(flows)  # no flow declared twice
    undocumented = [n for n, f in registry.flows().items() if not (f.title.strip() and f.doc.strip())]
    assert not undocumented, f"flows without a title and a one-line doc (their --help): {undocumented}"


def test_every_stage_is_planned_by_a_flow():
    """A stage no flow plans would run under DVC at most; derived from the plug-ins, so it holds for a new one (every
    group a flow names has stages; every stage these params need is planned by some flow)."""
    from dprelease.pipeline import plan as pipeline

    params = load_params(ROOT / "params.yaml")
    flows = registry.flows().values()
    stages = registry.stages(params)
    assert {g for f in flows for g in f.groups} <= {s.group for s in stages}, "a flow names a group no stage has"
    planned = {
        n for f in flows for n in pipeline.plan(stages, params, groups=f.groups, targets=f.targets, then=f.then).order
    }
    orphans = sorted(s.name for s in stages if s.active(params) and s.name not in planned)
    assert not orphans, f"stages no flow plans: {orphans}"


def test_every_declared_arm_is_trained_by_a_stage_of_its_own_package():
    """Each package's ``ARMS`` (its ``params`` module) against the registry: the arm's stage exists and belongs
    to the declaring package, and the comparison report's deps for it are outputs of that package's stages."""
    import importlib.util

    from dprelease.compare.reports.stages import arm_files
    from dprelease.core.config import parse_params

    params = parse_params({"ppm": {"reweight": True}})
    stages = {s.name: s for s in registry.stages(params)}
    declared = []
    for package in plugins.PACKAGES:
        if importlib.util.find_spec(f"{package}.params") is None:
            continue
        for arm in getattr(importlib.import_module(f"{package}.params"), "ARMS", ()):
            declared.append(arm.name)
            stage = stages[arm.stage]
            assert stage.module.startswith(package + "."), (arm.name, stage.module)
            own = {out for s in stages.values() if s.module.startswith(package + ".") for out in s.produced}
            assert set(stage.produced) & set(arm_files(arm.name)) or arm.release, arm.name
            assert set(arm_files(arm.name)) <= own, arm.name
    assert declared == list(plugins.arms())


TOY_RELEASE = {
    "__init__.py": '"""A toy mechanism that releases (test only)."""\n',
    "stages.py": """
        from dprelease.contracts.mechanism import ReleaseSpec
        from dprelease.contracts.stage import Stage

        def staged(params):
            return f"{params.artifacts}/toy_release/release"

        def stage_it(params, root="."):
            return {}

        def card(params, root, manifest):
            return "# toy", {}

        def figures(params, root, manifest):
            return {"weighted_f1": 0.5, "macro_f1": 0.4, "arm": None, "diagnostics": {}}

        SPEC = ReleaseSpec(mechanism="toy_release", stage="toy_stage", staged=staged, card=card, figures=figures)

        def declare(params):
            return [Stage(name="toy_stage", run=stage_it, params=["seed"], deps=[f"{params.artifacts}/features"],
                          outs=[f"{params.artifacts}/toy_release"], group="toy_release")]
        """,
    "plugin.py": """
        from dprelease.contracts.mechanism import Mechanism
        from . import stages

        PLUGIN = Mechanism(name="toy_release", declare=stages.declare, release=stages.SPEC)
        """,
}

CHECK_RELEASE = """
import json, sys
from dprelease.cli import main
from dprelease.core.config import load_params
from dprelease.pipeline import registry
p = load_params(sys.argv[1])
assert main(["plugin-index", "--params", sys.argv[1]]) == 0  # the index fragments, each in its package's folder
assert main(["dvc-yaml", "--params", sys.argv[1], "--output", sys.argv[2]]) == 0
print(json.dumps({"spec": registry.release_spec(p).mechanism, "releasing": list(registry.releasing()),
                  "release": [s.name for s in registry.group(p, "release", active_only=False)],
                  "publish": registry.get(p, "publish").deps}))
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_new_releasing_mechanism_is_its_folder_and_two_shared_files(tmp_path):
    """A mechanism that releases through the shared publish step: its folder (stages, ``ReleaseSpec`` on its
    plug-in), its line in the plug-in list and the operator's ``released.mechanism`` in params.yaml. The registry
    resolves the declaration (its stage joins the release group, ``publish`` signs its staged folder) and
    ``dprelease plugin-index`` / ``dprelease dvc-yaml`` regenerate what is generated; no other source file changes."""
    import json

    import yaml

    src = tmp_path / "src"
    shutil.copytree(code_scope.PACKAGE_DIR, src / "dprelease", ignore=shutil.ignore_patterns("__pycache__"))
    before = _tree(src / "dprelease")
    toy = src / "dprelease" / "mechanisms" / "toy_release"
    toy.mkdir()
    for name, text in TOY_RELEASE.items():
        (toy / name).write_text(textwrap.dedent(text), encoding="utf-8")
    add_package(src / "dprelease" / "contracts" / "packages.py", "dprelease.mechanisms.toy_release")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw.setdefault("released", {})["mechanism"] = "toy_release"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", CHECK_RELEASE, str(tmp_path / "params.yaml"), str(tmp_path / "dvc.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["spec"] == "toy_release" and "toy_release" in got["releasing"]
    assert got["release"][got["release"].index("toy_stage") + 1] == "publish"  # resolved once, by the registry
    assert "artifacts/toy_release" in got["publish"]
    stages = yaml.safe_load((tmp_path / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert "toy_stage" in stages and "artifacts/toy_release" in stages["publish"]["deps"]
    after = _tree(src / "dprelease")
    changed = {f for f in set(before) | set(after) if before.get(f) != after.get(f)}
    assert changed == {
        "contracts/packages.py",
        *(f"mechanisms/toy_release/{n}" for n in TOY_RELEASE),
        "mechanisms/toy_release/plugin_index.json",
    }, changed


def test_the_plug_ins_name_the_folders_key_rotation_re_signs():
    """``dprelease key rotate`` re-signs the release and each plug-in's ``SIGNED`` folders; no list by name."""
    from dprelease.core.config import parse_params

    params = parse_params({"nvdp": {"release_dir": "n"}, "gpp": {"release": "g"}})
    assert plugins.signed_folders(params) == ["n", "g"]
