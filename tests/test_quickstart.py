"""The README's quick start, run as written in a fresh ``git clone`` of this repository.

The commands are read from the README's first ``bash`` block under "## Quick start" and run one by one, unchanged,
in the clone. Only the environment differs from a new user's: ``DPRELEASE_PARAMS`` (documented in the README)
points at a tiny slice of the bundled data, the clone reuses this checkout's virtual environment (``.venv``, as CI
builds it), and ``PYTHONPATH`` makes the clone run its own code. No key is copied: the clone starts with none, as
a new user's does, while its committed ``dvc.lock`` names the maintainers' keys.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SLICE

pytestmark = pytest.mark.slow
VENV = ROOT / ".venv"


def quickstart_commands(readme: str) -> list[str]:
    """The command lines of the first ``bash`` block after the "## Quick start" heading (comments stay: bash
    reads them as comments)."""
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README: no bash block under '## Quick start'"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_names_the_release_commands():
    cmds = quickstart_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert cmds[0].startswith("make run ARGS=--new-key")  # the first command a new user runs
    assert any(" verify " in c for c in cmds) and any(" predict " in c for c in cmds)


def _tiny_params(clone: Path) -> Path:
    """params.yaml of the clone with the test suite's slice sizes (data, features, epochs, draws)."""
    raw = yaml.safe_load((clone / "params.yaml").read_text(encoding="utf-8"))
    raw["data"].update(codes=SLICE["data"]["codes"], cap=SLICE["data"]["cap"])
    raw["proxy"].update(SLICE["proxy"])
    raw["features"].update(SLICE["features"])
    raw["model"]["head"].update(SLICE["model"]["head"])
    raw["ppm"].update(SLICE["ppm"])
    raw["evaluation"].update(SLICE["evaluation"])
    path = clone / "params-tiny.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.skipif(not (VENV / ".installed").is_file(), reason="needs the environment `make env` builds (.venv)")
def test_quickstart_as_written_in_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    assert not (clone / "artifacts").exists() and (clone / "dvc.lock").is_file()  # no key here; the lock names one
    (clone / ".venv").symlink_to(VENV)
    for name in ("requirements.txt", "requirements-nodeps.txt", "pyproject.toml"):  # the shared .venv is current
        os.utime(clone / name, (0, 0))
    params = _tiny_params(clone)
    env = {**os.environ, "DPRELEASE_PARAMS": params.name, "PYTHONPATH": f"{clone / 'src'}{os.pathsep}{clone}"}
    env.pop("DPRELEASE_NEW_KEY", None)  # no hidden switch: the flag alone must do it
    outputs = []
    for cmd in quickstart_commands((clone / "README.md").read_text(encoding="utf-8")):
        done = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{cmd!r} exited {done.returncode}: {done.stderr[-2000:]}"
        outputs.append(done.stdout + done.stderr)

    manifest = json.loads((clone / "release" / "release.json").read_text(encoding="utf-8"))
    g = manifest["guarantee"]
    declared = yaml.safe_load(params.read_text(encoding="utf-8"))["released"]
    assert manifest["mechanism"] == declared["mechanism"] == "dpsgd"
    assert g["kind"] == "dp_accountant" and 0 < g["epsilon"] <= declared["epsilon"] * 1.001 and 0 < g["delta"] < 1
    assert manifest["signed_by"]["key_id"] and (clone / "release" / "release.sig").is_file()
    first = outputs[0]
    assert "--new-key" in first and "Release (dpsgd)" in first and "dp_accountant" in first
    assert re.search(r"weighted F1 \d\.\d{3}, macro F1 \d\.\d{3} \(test split, from noised counts", first)
    assert "floor      the public model" in first  # the public-only floor beside the release
    assert "SWAG-PPM, the design's chain, measured beside the release (not released)" in first  # beside, its own words
    assert "utility    its draw: weighted F1" in first and "released draw" not in first
    verify = next(o for c, o in zip(quickstart_commands((clone / "README.md").read_text()), outputs) if " verify " in c)
    assert "dp_accountant" in verify and manifest["signed_by"]["key_id"][:16] in verify
    with open(clone / "coded.csv", newline="", encoding="utf-8") as fh:
        coded = list(csv.DictReader(fh))
    with open(clone / "data" / "example_narratives.csv", newline="", encoding="utf-8") as fh:
        assert len(coded) == len(list(csv.DictReader(fh))) and all(r["code"] for r in coded)
    labels = json.loads((clone / "release" / "labels.json").read_text(encoding="utf-8"))["codes"]
    assert {r["code"] for r in coded} <= set(labels)
    record = json.loads((clone / "metrics" / "released.json").read_text(encoding="utf-8"))
    assert record["guarantee"] == g and record["mechanism"] == "dpsgd"
    assert "Release (dpsgd)" in outputs[-1]  # the plain re-run after the keys exist: same release, no refusal
    assert json.loads((clone / "release" / "release.json").read_text(encoding="utf-8"))["files"] == manifest["files"]
    shutil.rmtree(clone, ignore_errors=True)
