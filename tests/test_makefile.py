"""``make help`` lists every target of the Makefile, each with a line of description."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_help_lists_every_target_with_a_description():
    rules = set(re.findall(r"^([a-z][a-z-]*):(?!=)", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"help", "run", "test", "serve", "ui", "serve-model", "screenshots"} <= rules
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed = {}
    for line in out.stdout.splitlines()[1:]:
        name, _, text = line.strip().partition(" ")
        listed[name] = text.strip()
    assert set(listed) == rules
    assert all(len(text) > 8 for text in listed.values()), listed
    default = subprocess.run(["make", "-s"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert default.stdout == out.stdout  # plain `make` prints the list


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_serve_model_checks_the_registry_and_the_signature_before_serving():
    """`make serve-model` first runs the one-line check (no registered model: what to run first; a release
    that fails its signature check: why), with the agency's own public key pinned unless one is set."""
    out = subprocess.run(
        ["make", "-n", "serve-model", "AGENCY_KEY=/keys/agency.pub"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    steps = [
        line
        for line in out.stdout.splitlines()
        if "dprelease.pipeline.service.pyfunc_model" in line or "dprelease.pipeline.service.model_server" in line
    ]
    assert len(steps) == 2 and "-m dprelease.pipeline.service.pyfunc_model" in steps[0], steps
    assert "-m dprelease.pipeline.service.model_server" in steps[1], steps  # MLflow's scoring app, bounded
    assert all('DPRELEASE_AGENCY_KEY="${DPRELEASE_AGENCY_KEY:-/keys/agency.pub}"' in s for s in steps), steps
