"""The Prefect comparison flow end to end on the head slice (``flows.compare.main``): a first run from data to
report, a re-run that executes no stage, a changed DP-SGD target that re-runs only the DP-SGD arms and the report,
and bad DP-SGD / arm settings that stop before any arm trains.

Stage executions are counted by wrapping ``tasks.stages.run_stage`` as test_flow does; Prefect's home is the
throw-away one from conftest, and its ephemeral server is shared by the whole pytest process (~12 s to start).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import ARM_STAGES, compare_raw, make_root, written

from dprelease.contracts import source
from dprelease.core.config import parse_params
from dprelease.core.io import read_json
from dprelease.pipeline import cache, registry

pytestmark = pytest.mark.slow

ARM_OUTPUTS = [*(f"metrics/{a}.json" for a in ARM_STAGES), *(f"reports/arms/{a}" for a in ARM_STAGES[:3])]


@pytest.fixture(scope="module")
def compare_env(tmp_path_factory):
    """flows.compare with counted stages, a frozen code version (others may edit the source meanwhile) and a
    stage store of its own (the session's may hold a release another module ran with the same keys: its
    stages would be restored, not run)."""
    import flows.compare as fc
    import tasks.stages as ts

    store = tmp_path_factory.mktemp("home") / "stage-store"

    calls: list[str] = []
    real = ts.run_stage

    def counted(name, params, root, **kw):
        calls.append(name)
        return real(name, params, root, **kw)

    frozen = source.code_hash(["."])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ts, "run_stage", counted)
        mp.setattr(ts, "store_dir", lambda: store)
        mp.setattr(source, "code_hash", lambda paths: frozen)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield SimpleNamespace(fc=fc, calls=calls)


def _project(root: Path, **overrides) -> Path:
    make_root(root)
    (root / "params.yaml").write_text(yaml.safe_dump(compare_raw(**overrides), allow_unicode=True), encoding="utf-8")
    return root


def _main(env, root: Path, *extra: str) -> tuple[int, str, list[str]]:
    env.calls.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = env.fc.main(["--root", str(root), "--params", "params.yaml", "--no-track", *extra])
    return rc, out.getvalue(), list(env.calls)


def _snapshot(root: Path) -> dict[str, int]:
    files = {}
    for top in ("artifacts", "metrics", "plots", "reports", "release"):
        for p in (root / top).rglob("*"):
            if p.is_file():
                files[p.relative_to(root).as_posix()] = p.stat().st_mtime_ns
    return files


@pytest.fixture(scope="module")
def first(compare_env, tmp_path_factory):
    root = _project(tmp_path_factory.mktemp("compare"))
    rc, out, calls = _main(compare_env, root)
    return SimpleNamespace(root=root, rc=rc, out=out, calls=calls, params=parse_params(compare_raw()))


def test_first_run_builds_the_report(first):
    assert first.rc == 0, first.out
    report = first.root / "reports/compare/report.md"
    assert report.is_file()
    assert report.read_text(encoding="utf-8") in first.out
    for name in ("table1.csv", "quartiles.csv", "delta_sweep.csv", "per_class_vs_size.png"):
        assert (first.root / "reports/compare" / name).is_file(), name
    for rel in ARM_OUTPUTS:
        assert (first.root / rel).exists(), rel


def test_first_run_runs_each_stage_once(first):
    release = [s.name for s in registry.group(first.params, "release")]
    assert sorted(first.calls) == sorted([*release, *ARM_STAGES, "compare_report"])
    assert set(first.calls[:3]) == {"secret", "stratify", "featurize"}  # nothing reads before the split exists
    # the plan's last stage is publish (the card shows the comparison), right after the report
    assert first.calls[-2:] == ["compare_report", "publish"]
    # the DP-SGD arms run at a declared target: they need the features, never the release
    assert first.calls.index("dpsgd") > first.calls.index("featurize")
    assert first.calls.index("swag_ppm") > first.calls.index("sensitivity_r2")


def test_first_run_is_at_the_declared_target(first):
    dp = read_json(first.root / "metrics/dpsgd.json")["guarantee"]
    assert dp["kind"] == "dp_accountant"
    assert dp["quantities"]["target_epsilon"] == first.params.dpsgd.target_epsilon == 8.0  # never the release's ε
    assert dp["epsilon"] <= 8.0 + 1e-6
    for spec in registry.group(first.params, "compare"):
        key = cache.input_key(spec, first.params, first.root)
        assert cache.is_current(spec, first.params, key, first.root), spec.name


def test_rerun_executes_no_stage(compare_env, first):
    before = _snapshot(first.root)
    rc, out, calls = _main(compare_env, first.root)
    assert rc == 0
    assert calls == []
    assert _snapshot(first.root) == before


def test_new_target_reruns_only_dpsgd_and_report(compare_env, first, tmp_path):
    """A new declared DP-SGD target re-runs DP-SGD and the report only: the censored SWAG-PPM arm has its own
    declared level (ppm.censor_epsilon) and keeps it."""
    root = tmp_path / "copy"
    shutil.copytree(first.root, root)
    rc, _, calls = _main(compare_env, root, "--set", "dpsgd.target_epsilon=3.0")
    assert rc == 0
    assert sorted(calls) == ["compare_report", "dpsgd", "dpsgd_sweep"]
    assert read_json(root / "metrics/swag_ppm_censored.json")["guarantee"]["epsilon"] == 8.0
    assert read_json(root / "metrics/dpsgd.json")["guarantee"]["quantities"]["target_epsilon"] == 3.0
    rc, _, calls = _main(compare_env, root, "--set", "dpsgd.target_epsilon=3.0")
    assert rc == 0 and calls == []


def test_batch_larger_than_data_stops_before_any_arm(compare_env, tmp_path, capfd, caplog, no_training):
    """The training-set size is previewed and the batch checked before Prefect starts: one error line, no stage.

    Prefect's console handler sits on the root logger and writes to the terminal's stderr; under pytest its
    stream is not the test's, so what it would print (a failed flow run logs a traceback) is checked through
    the log records it receives."""
    root = _project(tmp_path / "root")
    with caplog.at_level(logging.WARNING):
        rc, out, calls = _main(compare_env, root, "--set", "dpsgd.head.batch_size=100000")
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert rc == 2, err
    assert len(errors) == 1 and errors[0].startswith("dprelease: error:"), err
    assert "batch size" in errors[0]
    assert "Traceback" not in err, "one line, not a traceback: " + err
    assert calls == []
    for rel in ARM_OUTPUTS + ["reports/compare"]:
        assert not (root / rel).exists(), rel
    assert not written(root)
    logged = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not logged, "besides the one-line error, the console gets: " + " | ".join(logged)


@pytest.mark.parametrize(
    "override, named",
    [
        ("compare.arms=[nonprivate, bogus]", "compare.arms"),
        ("compare.arms=[]", "compare.arms"),
        ("compare.arms=[dpsgd, dpsgd]", "compare.arms"),
        ("dpsgd.target_epsilon=0", "dpsgd.target_epsilon"),
        ("released.delta=1.0", "released.delta"),
    ],
)
def test_bad_settings_rejected_before_prefect(compare_env, tmp_path, capsys, monkeypatch, override, named):
    def no_flow(*a, **k):  # pragma: no cover - only reached on failure
        raise AssertionError("compare_flow started despite invalid input")

    monkeypatch.setattr(compare_env.fc, "compare_flow", no_flow)
    root = _project(tmp_path / "root")
    rc = compare_env.fc.main(["--root", str(root), "--set", override, "--no-track"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("dprelease: error:") and "\n" not in err, err
    assert named in err, err
    assert not written(root)


def test_reweighted_arm_without_reweighting_rejected_before_prefect(compare_env, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(compare_env.fc, "compare_flow", lambda *a, **k: pytest.fail("flow started"))
    root = _project(tmp_path / "root", ppm__reweight=False)
    rc = compare_env.fc.main(["--root", str(root), "--no-track"])  # default arms include swag_ppm_reweighted
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "compare.arms" in err and "ppm.reweight" in err, err
