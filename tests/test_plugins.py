"""dprelease.plugins / dprelease.mechanism: a new mechanism is one new folder plus one line in the plug-in list.

End to end in a copy of the package: a toy mechanism (params section, one stage, one flow, one arm) is added
by writing its folder and appending its package name to ``PACKAGES`` — no other file is edited — and then
``Params`` has its section, the registry runs its stage, its flow is planned and listed, and ``compare.arms``
accepts its arm (the comparison report then reads its files)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dprelease import code_scope, plugins, registry

TOY = {
    "__init__.py": '"""A toy mechanism (test only)."""\n',
    "params.py": """
        from pydantic import BaseModel, ConfigDict, Field
        from ..mechanism import Arm

        class ToyParams(BaseModel):
            model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
            scale: int = Field(2, ge=1)

        SECTION = ("toy", ToyParams)
        ARMS = (Arm(name="toy", stage="toy_total", label="Toy", audited=False),)
        """,
    "stages.py": """
        from pathlib import Path
        from ..io import write_json
        from ..stage import Stage

        def total(params, root="."):
            value = params.toy.scale * 21
            write_json(Path(root) / "metrics" / "toy.json", {"value": value})
            return {"value": value}

        def declare(params):
            return [Stage(name="toy_total", run=total, params=["toy"], deps=["artifacts/data"],
                          outs=[], metrics=["metrics/toy.json"], group="toy")]
        """,
    "plugin.py": """
        from ..mechanism import FlowSpec, Mechanism
        from . import stages

        PLUGIN = Mechanism(name="toy", declare=stages.declare,
                           flows=(FlowSpec(name="toy", title="toy", groups=("toy",), doc="a toy flow"),))
        """,
}

CHECK = """
import json, sys
from dprelease import pipeline, registry
from dprelease.config import parse_params
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
                  "report_deps": registry.get(p, "compare_report").deps, "audit": audit}))
"""


def test_a_new_mechanism_is_one_folder_and_one_line(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(code_scope.PACKAGE_DIR, src / "dprelease", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in TOY.items():
        (src / "dprelease" / "toy").mkdir(exist_ok=True)
        (src / "dprelease" / "toy" / name).write_text(textwrap.dedent(text), encoding="utf-8")
    listing = src / "dprelease" / "plugins.py"
    text = listing.read_text(encoding="utf-8")
    assert '    "dprelease.gpp",\n)' in text
    listing.write_text(text.replace('    "dprelease.gpp",\n)', '    "dprelease.gpp",\n    "dprelease.toy",\n)'))
    root = tmp_path / "root"
    proc = subprocess.run([sys.executable, "-c", CHECK, str(root)], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=300)
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
    assert {"toy/stages.py", "stage.py", "io.py"} <= set(got["code"])


def test_the_real_list_loads_every_package_once():
    names = [m.name for m in registry.MECHANISMS]
    assert len(names) == len(set(names)) == len(plugins.PACKAGES)
    assert names == [p.rsplit(".", 1)[1] for p in plugins.PACKAGES]  # each plugin.py names its own folder
    assert set(plugins.sections()) == {"gpp", "nvdp", "frontier"}
    assert list(registry.arms()) == ["nonprivate", "swag_ppm", "swag_ppm_reweighted", "swag_ppm_uncalibrated",
                                     "swag_ppm_censored", "dpsgd"]  # package order: the reports' row order
    assert set(registry.flows()) == {"release", "audit-replay", "compare", "frontier", "audit", "nvdp", "gpp"}


def test_an_arm_that_needs_a_setting_is_refused_with_the_reason():
    from dprelease.config import parse_params
    from dprelease.errors import ConfigError

    params = parse_params({"ppm": {"reweight": False}, "compare": {"arms": ["nonprivate", "swag_ppm_reweighted"]}})
    with pytest.raises(ConfigError, match=r"^compare\.arms: swag_ppm_reweighted needs ppm\.reweight: true$"):
        plugins.check_arms(params, ("compare",))
    plugins.check_arms(parse_params({"ppm": {"reweight": True}}), ("compare", "privacy_audit"))  # no error


def test_every_declared_arm_is_trained_by_a_stage_of_its_own_package():
    """Each package's ``ARMS`` (its ``params`` module) against the registry: the arm's stage exists and belongs
    to the declaring package, and the comparison report's deps for it are outputs of that package's stages."""
    import importlib.util

    from dprelease.config import parse_params
    from dprelease.reports.stages import arm_files

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
