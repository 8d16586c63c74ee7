"""dprelease.cli: one-line errors with exit code 2, and the generated dvc.yaml; predict's refusals, its count of
narratives longer than the encoder's window and Ctrl-C through the real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from dprelease.cli import main
from dprelease.core.config import load_params
from dprelease.pipeline import registry


@pytest.fixture
def params_file(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"seed": 3, "ppm": {"c": 0.9}}), encoding="utf-8")
    return p


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("dprelease: error: ")
    assert captured.out == ""
    return lines[0]


def test_unknown_stage(params_file, capsys):
    assert main(["stage", "nope", "--params", str(params_file)]) == 2
    line = _one_error_line(capsys)
    assert "unknown stage 'nope'" in line
    assert "stratify" in line  # the known stages are listed
    assert not line.startswith('dprelease: error: "')  # KeyError's repr quotes are stripped


def test_missing_params_file(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "params.yaml"
    assert main(["stage", "stratify", "--params", str(missing)]) == 2
    line = _one_error_line(capsys)
    assert "params file not found" in line
    assert str(missing) in line


def test_invalid_params_file(tmp_path, capsys):
    bad = tmp_path / "params.yaml"
    bad.write_text("ppm:\n  c: 0.5\n  bogus: 1\n", encoding="utf-8")
    assert main(["dvc-yaml", "--params", str(bad), "--output", str(tmp_path / "dvc.yaml")]) == 2
    line = _one_error_line(capsys)
    assert "ppm.bogus" in line and "unknown key" in line
    assert not (tmp_path / "dvc.yaml").exists()


def test_dvc_yaml_matches_registry(params_file, tmp_path, capsys):
    out = tmp_path / "gen" / "dvc.yaml"
    assert main(["dvc-yaml", "--params", str(params_file), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    text = out.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("#") and "generated" in first.lower()
    assert yaml.safe_load(text) == registry.dvc_yaml(load_params(params_file))
    # stage order is the registry's execution order
    assert list(yaml.safe_load(text)["stages"])[:3] == ["secret", "stratify", "featurize"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["dvc.yaml"]  # written atomically


def test_predict_missing_release_is_one_line(tmp_path, capsys):
    """The release folder is verified before the input is read (input problems: tests/core/release/test_predict.py)."""
    missing, output = tmp_path / "missing.csv", tmp_path / "out.csv"
    code = main(
        ["predict", "--release", str(tmp_path / "no_release"), "--input", str(missing), "--output", str(output)]
    )
    assert code == 2
    line = _one_error_line(capsys)
    assert "release folder not found" in line and "no_release" in line
    assert not output.exists()


def test_missing_subcommand_is_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


# predict through the real command (a subprocess, its whole output captured) -------------------------------------------
WAIT_S = 900  # generous, for a loaded machine; each wait returns as soon as its event happens


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A tiny signed head release and the agency's public key."""
    from release_helpers import tiny_release

    from dprelease.core.release.signing import PUBLIC, ensure_key

    keys = tmp_path_factory.mktemp("agency") / "keys"
    release = tiny_release(tmp_path_factory.mktemp("rel") / "release", signer=ensure_key(keys)[0])
    return release, keys / PUBLIC


def _predict_cmd(signed, src, out, *extra) -> list[str]:
    release, key = signed
    return [
        sys.executable,
        "-m",
        "dprelease.cli",
        "predict",
        "--release",
        str(release),
        "--input",
        str(src),
        "--output",
        str(out),
        "--key",
        str(key),
        *extra,
    ]


def _predict(signed, src, out, *extra) -> subprocess.CompletedProcess:
    return subprocess.run(_predict_cmd(signed, src, out, *extra), capture_output=True, text=True, timeout=WAIT_S)


def _one_line(res: subprocess.CompletedProcess, code: int, start: str, *needles: str) -> str:
    out = res.stdout + res.stderr
    assert res.returncode == code and out.count("\n") == 1 and out.startswith(start), (res.returncode, out)
    for needle in needles:
        assert needle in out, out
    return out


def test_predict_refuses_a_column_of_numbers(signed, tmp_path):
    src, out = tmp_path / "numbers.csv", tmp_path / "coded.csv"
    src.write_text("id,Final Narrative\n1,0.0\n2,3.5\n3,12\n", encoding="utf-8")
    _one_line(
        _predict(signed, src, out), 2, "dprelease: error: ", "numbers.csv", "holds no text", "'0.0'", "--text-column"
    )
    assert not out.exists()


def test_predict_refuses_an_existing_output_without_force(signed, tmp_path):
    src, out = tmp_path / "narratives.csv", tmp_path / "coded.csv"
    src.write_text("id,Final Narrative\n1,An employee fell from a ladder.\n", encoding="utf-8")
    out.write_text("someone else's file\n", encoding="utf-8")
    _one_line(_predict(signed, src, out), 2, "dprelease: error: ", "coded.csv", "exists", "--force")
    assert out.read_text(encoding="utf-8") == "someone else's file\n"


def test_predict_force_replaces_and_long_narratives_are_counted(signed, tmp_path):
    """``--force`` replaces an existing output; a narrative longer than the encoder's window (128 tokens) is
    coded from its first tokens and counted in one line on stderr, not cut silently."""
    src, out = tmp_path / "narratives.csv", tmp_path / "coded.csv"
    long = "An employee fell from a ladder and fractured his wrist " * 300  # ~3,000 tokens
    src.write_text(f"id,Final Narrative\n1,A worker cut a finger.\n2,{long}\n3,Back pain.\n", encoding="utf-8")
    out.write_text("old\n", encoding="utf-8")
    res = _predict(signed, src, out, "--force")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"coded 3 narratives -> {out}\n", res.stdout
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("dprelease: note: 1 of 3 narratives"), res.stderr
    assert "128 tokens" in res.stderr and "data rows 2" in res.stderr, res.stderr
    assert len(pd.read_csv(out)) == 3


def test_predict_ctrl_c_is_one_line(signed, tmp_path):
    """SIGINT once predict holds its verified copy of the release (a folder in TMPDIR: the event waited on)."""
    src, out, tmp = tmp_path / "narratives.csv", tmp_path / "coded.csv", tmp_path / "tmp"
    tmp.mkdir()
    pd.DataFrame({"Final Narrative": ["An employee fell from a ladder and fractured a wrist."] * 20000}).to_csv(
        src, index=False
    )
    proc = subprocess.Popen(
        _predict_cmd(signed, src, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    deadline = time.monotonic() + WAIT_S
    while not list(tmp.glob("dprelease-release-*")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "predict never made its copy of the release"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    _one_line(res, 130, "dprelease: interrupted: predict stopped", "no partial output")
    assert not out.exists() and not list(tmp_path.glob(".coded.csv*"))


STAGE_FULL_DISK = """
import errno, sys
import dprelease.pipeline.registry as registry
def full(name, params, root="."):
    raise OSError(errno.ENOSPC, "No space left on device", "artifacts/data/.train.csv.tmp")
registry.run_stage = full
from dprelease.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_oserror_in_a_stage_under_dvc_is_one_line(params_file):
    """``dprelease stage NAME`` (what dvc.yaml runs) meeting a full disk: one line naming the file, exit 2."""
    res = subprocess.run(
        [sys.executable, "-c", STAGE_FULL_DISK, "stage", "stratify", "--params", str(params_file)],
        cwd=params_file.parent,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 2 and out.count("\n") == 1, out
    assert out.startswith("dprelease: error: artifacts/data/.train.csv.tmp: No space left on device: free some space")
