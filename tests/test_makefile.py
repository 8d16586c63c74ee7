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
    assert default.stdout == out.stdout                                    # plain `make` prints the list
