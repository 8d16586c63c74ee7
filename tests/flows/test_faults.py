"""Fault injection: ordinary accidents a hostile-but-honest operator can cause. Every case ends in the
SAME release and ε as an undisturbed run, or in a one-line error with nothing (new) released — never a
different ε with exit code 0. Run with ``make faults`` (this file, verbose).

The undisturbed reference is one run of the release flow on the tiny slice (``clean``); each case works
on a copy of its root, in process (``flows.release.main``); the kill cases, which need a real process to kill,
are in test_faults_kill.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT, copy_key, make_root, slice_raw

from dprelease.core.io import read_json

pytestmark = pytest.mark.slow

# How long a case waits for what it waits on (a process, a stamp file, a server's guard) before it fails: generous,
# for a loaded 2-core machine; each wait polls for the event and returns as soon as it happens. No case asserts on
# how long anything took.
WAIT_S = 900


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _project(root: Path, key_from: Path | None = None, **overrides) -> Path:
    """A project root; ``key_from``: the operator's randomness key of that root (the same release is expected)."""
    make_root(root)
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw(**overrides)), encoding="utf-8")
    return root if key_from is None else copy_key(key_from / "artifacts" / "secret", root)


def _main(root: Path, *extra: str, track: bool = False) -> SimpleNamespace:
    import flows.release as fr

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fr.main(["--root", str(root), *([] if track else ["--no-track"]), *extra])
    return SimpleNamespace(rc=rc, out=out.getvalue(), err=err.getvalue())


def _outcome(root: Path, release: str = "release") -> tuple[str, float]:
    return _sha(root / release / "model.safetensors"), read_json(root / "metrics/swag_ppm_draw.json")["guarantee"][
        "epsilon"
    ]


def _wait_until(
    event, what: str, *, proc: subprocess.Popen | None = None, timeout: float = WAIT_S, every: float = 0.05
):
    """``event()`` once it is truthy, polled every ``every`` seconds; fails naming ``what`` after ``timeout``
    seconds, or as soon as ``proc`` (the run the event belongs to) has exited without it."""
    deadline = time.monotonic() + timeout
    while not (found := event()):
        if proc is not None and proc.poll() is not None:
            found = event()  # it may have happened just before the process ended
            assert found, f"the run exited (code {proc.returncode}) before {what}"
            return found
        assert time.monotonic() < deadline, f"not after {timeout:.0f} s: {what}"
        time.sleep(every)
    return found


def _one_error_line(res, *needles: str) -> None:
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    assert res.rc == 2 and len(lines) == 1 and lines[0].startswith("dprelease: error:"), res.err
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module", autouse=True)
def _no_env_tracking():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = _project(tmp_path_factory.mktemp("clean"))
    res = _main(root)
    assert res.rc == 0, res.err
    return SimpleNamespace(root=root, outcome=_outcome(root))


@pytest.fixture
def copy(clean, tmp_path) -> Path:
    dst = tmp_path / "root"
    shutil.copytree(clean.root, dst)
    return dst


def _store() -> Path:
    from tasks.stages import store_dir

    return store_dir()


# 1. in-place changes never poison the stage store ----------------------------------------------------------
def test_output_changed_in_place_is_recomputed(clean, copy):
    moments = copy / "artifacts/round2/swag/moments.safetensors"
    good = _sha(moments)
    with open(moments, "r+b") as fh:  # dd conv=notrunc: zeros in the middle, same size
        fh.seek(moments.stat().st_size // 3)
        fh.write(b"\0" * (moments.stat().st_size // 3))
    res = _main(copy)
    assert res.rc == 0, res.err
    assert _outcome(copy) == clean.outcome and _sha(moments) == good


def test_truncated_output_is_recomputed(clean, copy):
    moments = copy / "artifacts/round2/swag/moments.safetensors"
    good = _sha(moments)
    os.truncate(moments, 1000)
    res = _main(copy)
    assert res.rc == 0 and _outcome(copy) == clean.outcome and _sha(moments) == good


def test_corrupt_store_entry_is_discarded_never_reused(clean, copy):
    from dprelease.pipeline import stage_store

    key = read_json(copy / "artifacts/.stamps/swag_r2.json")["key"]
    stored = stage_store.stored_file(_store(), key, "artifacts/round2/swag/moments.safetensors")
    os.chmod(stored, 0o600)
    with open(stored, "r+b") as fh:
        fh.seek(100)
        fh.write(os.urandom(64))
    assert stage_store.verify(_store(), key) is None
    os.truncate(copy / "artifacts/round2/swag/moments.safetensors", 10)  # forces a restore attempt
    res = _main(copy)
    assert res.rc == 0 and _outcome(copy) == clean.outcome
    assert stage_store.verify(_store(), key) is not None  # recomputed and stored again, verified


# 2. one run per root ----------------------------------------------------------------------------------------------
def test_second_run_on_a_busy_root_is_refused(copy):
    from dprelease.core.locks import root_lock

    before = {p: p.stat().st_mtime_ns for p in copy.rglob("*") if p.is_file() and p.name != ".dprelease.lock"}
    with root_lock(copy, "the first run"):
        res = _main(copy, "--set", "ppm.c=0.8")
    _one_error_line(res, "in use by another dprelease run", f"pid {os.getpid()}", "the first run")
    after = {p: p.stat().st_mtime_ns for p in copy.rglob("*") if p.is_file() and p.name != ".dprelease.lock"}
    assert after == before  # nothing written


def test_concurrent_mlflow_store_creation(tmp_path):
    """Two processes creating mlflow.db at once (the probe saw `_alembic_tmp_experiments already exists`)."""
    code = (
        "import sys; from dprelease.core.config import parse_params; from dprelease.pipeline.tracking import _setup; "
        "_setup(parse_params({}), sys.argv[1]); print('ok')"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=WAIT_S) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert all(r[0].strip() == "ok" for r in results)


# 3. release paths -------------------------------------------------------------------------------------------------
def test_release_into_the_data_folder_is_refused(copy):
    data = copy / "data/sir.csv.gz"
    good = _sha(data)
    res = _main(copy, "--set", "release=data")
    _one_error_line(res, "release path", "protected")
    assert _sha(data) == good and sorted(p.name for p in (copy / "data").iterdir()) == ["sir.csv.gz"]


def test_foreign_folder_needs_the_explicit_flag(clean, copy):
    foreign = copy / "shipping/v2"
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("not a release", encoding="utf-8")
    _one_error_line(_main(copy, "--set", "release=shipping/v2"), "not a release folder", "force_release_path")
    assert (foreign / "notes.txt").is_file()
    res = _main(copy, "--set", "release=shipping/v2", "--set", "force_release_path=true")
    assert res.rc == 0 and (foreign / "release.json").is_file() and not (foreign / "notes.txt").exists()


def test_new_release_path_on_a_warm_cache_is_written(clean, copy):
    res = _main(copy, "--set", "release=shipping/v3")
    assert res.rc == 0, res.err
    assert _outcome(copy, "shipping/v3") == clean.outcome
    assert "shipping/v3" in res.out


# 5. MLflow unreachable / killed while logging ----------------------------------------------------------------
def test_mlflow_unreachable_still_releases_and_says_so(clean, copy, monkeypatch):
    from dprelease.pipeline.tracking import HTTP_LIMITS

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    for name in HTTP_LIMITS:  # the tracking step sets its own bounds (a user's values would stand)
        monkeypatch.delenv(name, raising=False)
    (copy / "metrics/mlflow_run.json").write_text('{"run_id": "an-older-run"}', encoding="utf-8")
    res = _main(copy, track=True)
    assert res.rc == 3, res.err
    warnings = [ln for ln in res.err.splitlines() if ln.strip()]
    assert len(warnings) == 1 and "dprelease track" in warnings[0] and "release is written" in warnings[0]
    assert "Release (swag_ppm)" in res.out and "SWAG-PPM, the design's chain" in res.out  # the summary is still printed
    assert _outcome(copy) == clean.outcome
    assert not (copy / "metrics/mlflow_run.json").exists()  # never names an older run
    # the attempt was bounded (a timeout per request, one retry), not left to MLflow's defaults: the bounds the
    # tracking step sets (their values: tests/pipeline/test_tracking.py), not a wall-clock margin, say it ends
    assert {name: os.environ.get(name) for name in HTTP_LIMITS} == HTTP_LIMITS


def test_a_run_left_running_by_a_killed_logger_is_closed(clean, copy):
    import mlflow

    from dprelease.core.config import load_params
    from dprelease.pipeline.tracking import PENDING, log_pipeline_run, tracking_uri

    params = load_params(copy / "params.yaml")
    log_pipeline_run(params, copy)  # creates the store and the experiment
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(params, copy))
    exp = client.get_experiment_by_name(params.tracking.experiment)
    abandoned = client.create_run(exp.experiment_id).info.run_id  # as if the process died mid-logging
    (copy / PENDING).write_text(json.dumps([abandoned]), encoding="utf-8")
    run_id = log_pipeline_run(params, copy)
    assert client.get_run(abandoned).info.status == "KILLED"
    assert client.get_run(run_id).info.status == "FINISHED"
    assert json.loads((copy / PENDING).read_text(encoding="utf-8")) == []


def test_a_copied_project_logs_into_its_own_artifact_folder(clean, copy, tmp_path):
    import mlflow

    from dprelease.core.config import load_params
    from dprelease.pipeline.tracking import log_pipeline_run, tracking_uri

    params = load_params(copy / "params.yaml")
    log_pipeline_run(params, copy)
    moved = tmp_path / "moved"
    shutil.copytree(copy, moved)
    run_id = log_pipeline_run(params, moved)
    run = mlflow.MlflowClient(tracking_uri=tracking_uri(params, moved)).get_run(run_id)
    assert run.info.artifact_uri.startswith((moved / "mlartifacts").resolve().as_uri())
    assert list((moved / "mlartifacts").rglob("release.json"))


# 6. one line, whatever fails inside a stage ---------------------------------------------------------------------------
def test_data_error_inside_a_stage_is_one_line(tmp_path):
    """The real command, its whole output captured (Prefect's console handler writes to the process's own stderr,
    which redirecting sys.stderr in process does not catch): the stage's DataError is the one stderr line; Prefect's
    ERROR lines and tracebacks stay in its store; stdout holds the progress lines only. The data pass the preflight
    (columns, rows, classes); only the stage finds that no report is private."""
    root = _project(tmp_path, proxy__until="2030-12-31")
    res = subprocess.run(
        [sys.executable, "-m", "flows.release", "--root", str(root), "--no-track"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("dprelease: error: proxy.until 2030-12-31"), res.stderr
    assert "data/sir.csv.gz" in res.stderr and "set proxy.until between" in res.stderr, res.stderr
    assert "Traceback" not in res.stdout and "ERROR" not in res.stdout, res.stdout
    assert all(line.startswith(("[", " ")) for line in res.stdout.splitlines()), res.stdout
    assert not (root / "release").exists() and not (root / "artifacts/data").exists()


# 7. smaller ones -------------------------------------------------------------------------------------------------------
def test_leftovers_of_interrupted_swaps_are_cleaned(clean, copy):
    (copy / ".release.old").mkdir()
    (copy / ".release.old/model.safetensors").write_bytes(b"old")
    stale = copy / "artifacts/round2/.swag.x1y2.tmp"
    stale.mkdir()
    (stale / "moments.safetensors").write_bytes(b"private moments")
    (copy / "metrics/.release.json.abc.tmp").write_text("{}", encoding="utf-8")
    res = _main(copy)
    assert res.rc == 0 and _outcome(copy) == clean.outcome
    assert not (copy / ".release.old").exists() and not stale.exists()
    assert not (copy / "metrics/.release.json.abc.tmp").exists()


def test_private_artifacts_are_owner_only(clean, copy):
    os.truncate(copy / "artifacts/round2/swag/moments.safetensors", 10)
    old = os.umask(0o022)
    try:
        assert _main(copy).rc == 0  # swag_r2 restored from the store
    finally:
        os.umask(old)
    for root in (clean.root, copy):
        art = root / "artifacts"
        assert stat.S_IMODE(art.stat().st_mode) == 0o700
        assert (art / "keys/agency.key").is_file()  # the signing key is among them
        for p in art.rglob("*"):  # every path: stamps, keys and stage outputs alike
            assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600), p
    assert stat.S_IMODE(_store().stat().st_mode) == 0o700


def _storage() -> Path:
    from prefect.settings import PREFECT_HOME

    return Path(PREFECT_HOME.value()) / "storage"


def test_no_task_result_is_persisted(clean):
    """No stage's result is persisted, so none is read back: the stamps and the stage store are the only
    cache. (Prefect still writes the exception of a failed flow run, under a random name, whatever the
    settings; nothing reads those back.)"""
    keys = {read_json(p)["key"] for p in (clean.root / "artifacts/.stamps").glob("*.json")}
    assert len(keys) > 5
    stored = [p for p in _storage().rglob("*") if p.is_file()] if _storage().exists() else []
    assert not [p.name for p in stored if p.name in keys]
    for p in stored:
        assert "__exc_type__" in json.loads(p.read_text(encoding="utf-8")), p  # a failed flow's exception
    assert read_json(clean.root / "artifacts/.stamps/stratify.json")["summary"]  # what a re-run returns


class _Payload:
    """Runs a shell command when unpickled (what a replaced result file could carry)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def test_a_result_file_naming_pickle_never_runs(clean, copy, tmp_path):
    """The probe: a stored result under a stage's cache key (``<storage>/stratify-<key>``) whose metadata names
    the pickle serializer, with a payload that runs a command when unpickled. Prefect reads the serializer
    named inside a stored result, so reading it back would run the payload; the re-run must not."""
    from prefect.results import ResultRecord, ResultRecordMetadata
    from prefect.serializers import PickleSerializer

    marker = tmp_path / "payload-ran"
    planted = []
    for stage in ("stratify", "featurize", "publish"):
        key = read_json(copy / f"artifacts/.stamps/{stage}.json")["key"]
        path = _storage() / key
        path.parent.mkdir(parents=True, exist_ok=True)
        record = ResultRecord(
            metadata=ResultRecordMetadata(storage_key=str(path), serializer=PickleSerializer()), result=_Payload(marker)
        )
        path.write_bytes(record.serialize())
        planted.append(path)
    try:
        assert json.loads(planted[0].read_bytes())["metadata"]["serializer"]["type"] == "pickle"
        res = _main(copy)
        assert not marker.exists(), "a stored pickle result was deserialized: its payload ran"
        assert res.rc == 0 and _outcome(copy) == clean.outcome, res.err
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
