"""dprelease.cli: one-line errors with exit code 2, and the generated dvc.yaml."""

from __future__ import annotations

import pytest
import yaml

from dprelease.pipeline import registry
from dprelease.cli import main
from dprelease.core.config import load_params


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
    code = main(["predict", "--release", str(tmp_path / "no_release"), "--input", str(missing),
                 "--output", str(output)])
    assert code == 2
    line = _one_error_line(capsys)
    assert "release folder not found" in line and "no_release" in line
    assert not output.exists()


def test_missing_subcommand_is_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
