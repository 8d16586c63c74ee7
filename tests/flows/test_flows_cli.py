"""flows/cli.py through the real command (``python -m flows.release`` in a subprocess, its whole stdout and stderr
captured; this file is not test_cli.py, which tests/test_cli.py, the package cli's, already names): bad input is refused in one line before Prefect starts, with nothing written; a failure inside a stage
(an OSError: a full disk) is one line on stderr, with no Prefect ERROR line or traceback on the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SLICE_DATA, make_root, slice_raw

WAIT_S = 900  # a generous bound for a loaded machine; nothing here waits on a clock


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _release(root: Path, *args: str, env: dict | None = None, code: str | None = None) -> subprocess.CompletedProcess:
    """The release flow's command line (or ``code``, a script that runs it) on ``root``, its output captured."""
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "flows.release"]
    return subprocess.run(
        [*cmd, "--root", str(root), "--no-track", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, **(env or {})},
    )


def _refused(res: subprocess.CompletedProcess, *needles: str) -> str:
    """The whole output is one line, ``dprelease: error: …``, exit 2, naming each needle."""
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert res.stdout == "" and out.count("\n") == 1 and out.startswith("dprelease: error: "), out
    for needle in needles:
        assert needle in out, f"{needle!r} not in {out}"
    return out


@pytest.fixture
def root(tmp_path) -> Path:
    root = make_root(tmp_path / "project")
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw()), encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "override, needles",
    [
        ("released.epsilon=.inf", ("released.epsilon", "finite", "params.yaml")),
        ("dpsgd.head.max_grad_norm=.nan", ("dpsgd.head.max_grad_norm", "finite")),  # NaN passes every range check
        ("released.delta=-0.1", ("released.delta",)),
        ("data.test_size=1.5", ("data.test_size",)),
        ("data.label_column=Nope", ("Nope", "label column", SLICE_DATA)),
        ("data.text_column=Nope", ("Nope", "text column")),
    ],
)
def test_bad_settings_and_columns_are_one_line_before_anything_runs(root, override, needles):
    before = _tree(root)
    _refused(_release(root, "--set", override), *needles)
    assert _tree(root) == before


def test_a_data_file_with_other_columns_is_one_line(root):
    (root / "data/other.csv").write_text("ID,Final Narrative,Kind\n1,fell,111\n2,cut,1311\n", encoding="utf-8")
    before = _tree(root)
    _refused(_release(root, "--set", "data.path=data/other.csv"), "data/other.csv", "'Nature' not found", "'Kind'")
    assert _tree(root) == before


def test_a_data_file_that_is_not_utf8_is_one_line(root):
    text = "ID,EventDate,Final Narrative,Nature\n1,2015-06-01,caf\u00e9 floor,111\n2,2016-06-01,cut,1311\n"
    (root / "data/bad.csv").write_bytes(text.encode("utf-8") + b"3,2016-07-01,stray \xff byte,111\n")
    before = _tree(root)
    _refused(_release(root, "--set", "data.path=data/bad.csv"), "data/bad.csv", "invalid UTF-8", "0xff")
    assert _tree(root) == before


def test_the_params_file_dprelease_params_names_is_named(root):
    (root / "slice.yaml").write_text(yaml.safe_dump(slice_raw(ppm__c=3.0)), encoding="utf-8")
    before = _tree(root)
    out = _refused(_release(root, env={"DPRELEASE_PARAMS": "slice.yaml"}), "slice.yaml: ppm.c")
    assert "params.yaml" not in out
    assert _tree(root) == before


def test_a_params_file_that_is_not_utf8_is_named(root):
    (root / "latin.yaml").write_bytes("# r\u00e9glages\nseed: 7\n".encode("latin-1"))
    before = _tree(root)
    _refused(_release(root, "--params", "latin.yaml"), "latin.yaml", "not UTF-8", "0xe9")
    assert _tree(root) == before


def test_a_setting_the_release_choice_overrides_is_refused_as_inert(root):
    """With a linear head, DP-SGD's release takes its run settings from the public proxy's choice (dpsgd.grid):
    ``--set dpsgd.head.max_grad_norm`` would re-make the release and change nothing."""
    before = _tree(root)
    _refused(
        _release(
            root,
            "--set",
            "released.mechanism=dpsgd",
            "--set",
            "dpsgd.head.hidden=0",
            "--set",
            "dpsgd.head.max_grad_norm=0.2",
        ),
        "dpsgd.head.max_grad_norm",
        "changes nothing",
        "dpsgd.grid",
    )
    assert _tree(root) == before


# a failure inside a stage: the real flow, its first stage failing as a full disk would -----------------------------
FULL_DISK = """
import errno, sys
import tasks.stages as ts
def full(name, params, root, **kw):
    raise OSError(errno.ENOSPC, "No space left on device", "release/.release.tmp/model.safetensors")
ts.run_stage = full
import flows.release
sys.exit(flows.release.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_an_oserror_inside_a_stage_is_one_line(root):
    res = _release(root, code=FULL_DISK)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("dprelease: error: "), res.stderr
    for needle in ("model.safetensors", "No space left on device", "free some space", "nothing was released"):
        assert needle in res.stderr, res.stderr
    assert "Traceback" not in res.stdout and "ERROR" not in res.stdout, res.stdout  # progress lines only
    assert all(line.startswith(("[", " ")) for line in res.stdout.splitlines()), res.stdout
    assert not (root / "release").exists() and not (root / "metrics/released.json").exists()
