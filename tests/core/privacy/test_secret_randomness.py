"""End to end on the head slice: the noise a guarantee rests on is the project's secret, not the public seed.

"Clone A" is the session's head run (and its comparison arms); "clone B" is the same root — same data,
params, seed, and every public-seeded intermediate — without A's key, as a fresh clone of the repository
would be. B's released draw and DP-SGD weights differ from A's; A re-run with its own key reproduces its
release byte for byte; the key's value appears in no file outside its private folder.
(``benchmarks/secret_randomness.py`` shows the same with two real clones and ``make run``.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import copy_root, run_stages

from dprelease.core.privacy import secret

pytestmark = pytest.mark.slow


def _fresh_clone(src: Path, dst: Path, artifacts: str) -> Path:
    """``src`` without its key (and without any trace of it): what another clone of the project holds."""
    root = copy_root(src, dst)
    shutil.rmtree(root / artifacts / "secret")
    return root


def _key_text(root: Path, artifacts: str) -> str:
    return (root / artifacts / "secret" / "key").read_text().strip()


def test_another_key_releases_another_draw_and_the_same_key_the_same_bytes(head_run, tmp_path):
    p = head_run.params
    a_release = head_run.path(p.release)
    b = _fresh_clone(head_run.root, tmp_path / "b", p.artifacts)
    run_stages(p, b, ["secret", "draw", "evaluate", "publish"])
    assert secret.key_id(b / p.artifacts) != secret.key_id(head_run.path(p.artifacts))
    assert (b / p.release / "model.safetensors").read_bytes() != (a_release / "model.safetensors").read_bytes()
    # A again, from its own key: the released draw, manifest and card byte for byte
    again = copy_root(head_run.root, tmp_path / "again")
    shutil.rmtree(again / p.release)
    shutil.rmtree(again / p.artifacts / "draw")
    run_stages(p, again, ["secret", "draw", "evaluate", "publish"])
    for name in ("model.safetensors", "release.json", "README.md", "labels.json"):
        assert (again / p.release / name).read_bytes() == (a_release / name).read_bytes(), name


def test_another_key_trains_another_dpsgd_model_and_the_same_key_the_same(arms_run, tmp_path):
    p = arms_run.params
    model = Path(p.artifacts) / "arms" / "dpsgd" / "model" / "model.safetensors"
    b = _fresh_clone(arms_run.root, tmp_path / "b", p.artifacts)
    run_stages(p, b, ["secret", "dpsgd"])
    assert (b / model).read_bytes() != arms_run.path(str(model)).read_bytes()
    again = copy_root(arms_run.root, tmp_path / "again")
    run_stages(p, again, ["dpsgd"])
    assert (again / model).read_bytes() == arms_run.path(str(model)).read_bytes()


def test_the_key_appears_nowhere_outside_its_private_folder(arms_run):
    p = arms_run.params
    root = arms_run.root
    key_hex = _key_text(root, p.artifacts)
    key_bytes = bytes.fromhex(key_hex)
    secret_dir = (root / p.artifacts / "secret").resolve()
    derived = [
        str(secret.seed(root / p.artifacts, label))
        for label in ("release/round2", "release/round3", "dpsgd/dpsgd", "select/round2")
    ]
    checked = 0
    for path in root.rglob("*"):
        if not path.is_file() or secret_dir in path.resolve().parents:
            continue
        data = path.read_bytes()
        checked += 1
        assert key_hex.encode() not in data and key_hex.upper().encode() not in data, path
        assert key_bytes not in data, path
        if path.suffix in (".json", ".md", ".csv", ".yaml", ".txt", ".log"):
            text = data.decode("utf-8", errors="ignore")
            assert not [s for s in derived if s in text], path  # no derived seed either
    assert checked > 50  # the release, metrics, reports, every artifact of the run were searched
    manifest = (root / p.release / "release.json").read_text()
    assert secret.key_id(root / p.artifacts) in manifest  # only the public, one-way id names the key
