"""tasks.dvc_record: one cache for the Prefect flow and DVC.

A git + DVC project (the package source, the slice data, ``params.yaml`` and the generated ``dvc.yaml``) runs
the release flow once. Every stage the flow ran is then recorded in ``dvc.lock`` and up to date for
``dvc status``; its outputs' bytes are objects of DVC's cache (the very objects the stage store indexes);
the randomness key is in no cache; ``dvc push`` to a private local remote and ``dvc pull`` in a second clone
(with the operator's key) give byte-identical outputs, up to date there too. A flow run with params other
than ``params.yaml`` records nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, copy_key, make_root, slice_raw

from dprelease.core.config import parse_params
from dprelease.pipeline import registry, stage_store

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="no git on PATH")]

# dvc.yaml: the release pipeline, every stage of which the flow runs and records, then the MLflow run (track)
RECORDED = [
    "secret",
    "stratify",
    "featurize",
    "finetune_r1",
    "swag_r1",
    "risk",
    "finetune_r2",
    "swag_r2",
    "sensitivity_r2",
    "reweight",
    "draw",
    "evaluate",
    "publish",
    "select",
    "track",
]
CLEAN = "Data and pipelines are up to date."


def _run(*cmd, cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)  # generous: a loaded machine
    assert done.returncode == 0, (cmd, done.stdout[-800:], done.stderr[-800:])
    return done.stdout


def _dvc(*args, cwd: Path) -> str:
    return _run(sys.executable, "-m", "dvc", *args, cwd=cwd)


def _git(*args, cwd: Path) -> str:
    return _run("git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args, cwd=cwd)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def moments_bytes(root: Path, params) -> bytes:
    return (root / params.artifacts / "round2" / "swag" / "moments.safetensors").read_bytes()


def _project(path: Path, params) -> Path:
    """A git + DVC project: the package source (dvc.yaml's code deps), the slice, params.yaml, dvc.yaml."""
    root = make_root(path)
    shutil.copytree(
        ROOT / "src" / "dprelease", root / "src" / "dprelease", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for name in (".gitignore", ".dvcignore"):
        shutil.copyfile(ROOT / name, root / name)
    (root / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))
    (root / "dvc.yaml").write_text(yaml.safe_dump(registry.dvc_yaml(params), sort_keys=False))
    _git("init", "-q", cwd=root)
    _dvc("init", "-q", cwd=root)
    _dvc("config", "core.analytics", "false", cwd=root)
    _dvc("config", "core.check_update", "false", cwd=root)
    _git("add", "-A", cwd=root)
    _git("commit", "-q", "-m", "project", cwd=root)
    return root


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The project has a Prefect home of its own (as `make run` has: .prefect/), so its stage store holds
    this project's entries only (the session's shared one may hold other roots' entries for the same keys)."""
    import flows.release as fr
    import tasks.stages as ts

    params = parse_params(slice_raw())
    root = _project(tmp_path_factory.mktemp("dvcproject"), params)
    store = tmp_path_factory.mktemp("home") / "stage-store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ts, "store_dir", lambda: store)
        fr.release_flow(params.model_dump(mode="json"), str(root), True)
        yield params, root


def _lock(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.lock").read_text(encoding="utf-8"))["stages"]


def _status(root: Path, stages: list[str]) -> dict:
    return json.loads(_dvc("status", "--json", *stages, cwd=root))


def test_every_stage_the_flow_ran_is_recorded_and_up_to_date(recorded):
    params, root = recorded
    lock = _lock(root)
    assert sorted(lock) == sorted(RECORDED)
    assert _dvc("status", cwd=root).strip() == CLEAN
    (root / "metrics" / "headline.json").write_text('{"epsilon": 0}')  # an edited output: DVC notices
    assert list(_status(root, [])) == ["evaluate"]
    import flows.release as fr  # the flow restores it (its stamp no longer matches) and records it again

    fr.release_flow(params.model_dump(mode="json"), str(root), False)
    assert _dvc("status", cwd=root).strip() == CLEAN


def test_a_no_op_rerun_asks_dvc_nothing_unless_dvc_lock_changed(recorded, monkeypatch):
    import flows.release as fr
    from tasks import dvc_record

    params, root = recorded
    commits: list[str] = []
    real = dvc_record.subprocess.run
    monkeypatch.setattr(dvc_record.subprocess, "run", lambda cmd, **kw: commits.append(cmd[-1]) or real(cmd, **kw))
    fr.release_flow(params.model_dump(mode="json"), str(root), False)
    assert commits == []  # every stamp current, every dvc.lock entry the one recorded for it
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    del lock["stages"]["risk"]  # e.g. an older dvc.lock checked out
    (root / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    fr.release_flow(params.model_dump(mode="json"), str(root), False)
    assert commits == ["risk"] and _dvc("status", cwd=root).strip() == CLEAN


def test_a_change_to_a_code_folder_outside_the_key_is_recorded(recorded, tmp_path, monkeypatch):
    """dvc.yaml's code deps are folders: a file no stage's code holds changes no key (every stage is current) but
    its folder's DVC hash, so the flow commits again every stage whose folders hold it, and DVC's status is clean;
    bytecode (.dvcignore) changes nothing."""
    import flows.release as fr
    from tasks import dvc_record

    params, root = recorded
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    (copy / "src" / "dprelease" / "core" / "__pycache__").mkdir(exist_ok=True)
    (copy / "src" / "dprelease" / "core" / "__pycache__" / "stray.cpython-311.pyc").write_bytes(b"litter")
    assert _dvc("status", cwd=copy).strip() == CLEAN
    (copy / "src" / "dprelease" / "mechanisms" / "swag_ppm" / "notes.py").write_text('"""In no stage code."""\n')
    commits: list[str] = []
    real = dvc_record.subprocess.run
    monkeypatch.setattr(dvc_record.subprocess, "run", lambda cmd, **kw: commits.append(cmd[-1]) or real(cmd, **kw))
    fr.release_flow(params.model_dump(mode="json"), str(copy), False)
    new = "src/dprelease/mechanisms/swag_ppm/notes.py"
    holding = [n for n, e in _lock(copy).items() if any(new.startswith(d["path"] + "/") for d in e["deps"])]
    # `track` (the MLflow run) lists the whole mechanisms floor and is recorded only when the flow tracks
    assert "track" in holding and sorted(commits) == sorted(set(holding) - {"track"})  # the others' entries stand
    assert _dvc("status", cwd=copy).strip().splitlines()[:2] == ["track:", "\tchanged deps:"]
    assert _dvc("status", *sorted(set(holding) - {"track"}), cwd=copy).strip() == CLEAN


def test_outputs_are_dvc_cache_objects_and_the_key_is_in_none(recorded):
    params, root = recorded
    from tasks.dvc_record import objects_dir
    from tasks.stages import store_dir

    objects = objects_dir(root, store_dir())
    assert objects == (root / ".dvc" / "cache").resolve()
    assert (objects.stat().st_mode & 0o777) == 0o700
    moments = root / params.artifacts / "round2" / "swag" / "moments.safetensors"
    key = json.loads((root / params.artifacts / ".stamps" / "swag_r2.json").read_text())["key"]
    stored = stage_store.stored_file(store_dir(), key, f"{params.artifacts}/round2/swag/moments.safetensors")
    assert stored == stage_store.object_path(objects, _md5(moments))  # the stage store's bytes: DVC's object
    assert stored.read_bytes() == moments.read_bytes()
    swag = next(o for o in _lock(root)["swag_r2"]["outs"] if o["path"].endswith("round2/swag"))
    listing = json.loads(stage_store.object_path(objects, swag["md5"]).read_text())  # DVC's .dir object
    assert {e["md5"] for e in listing} >= {_md5(moments)}
    # the randomness key: never an object of any cache (its public id file, in every release.json, is the
    # stage's only output: cache: false, hashed into dvc.lock)
    secret = root / params.artifacts / "secret"
    cached = {p.read_bytes() for c in (objects, store_dir()) for p in c.rglob("*") if p.is_file()}
    private = [f for f in secret.rglob("*") if f.is_file() and f.name != "key_id.json"]
    assert private and not any(f.read_bytes() in cached for f in private)
    assert _lock(root)["secret"]["outs"] == [
        {
            "path": f"{params.artifacts}/secret/key_id.json",
            "hash": "md5",
            "md5": _md5(secret / "key_id.json"),
            "size": 35,
        }
    ]


def test_push_then_pull_in_a_second_clone(recorded, tmp_path):
    params, root = recorded
    remote, clone = tmp_path / "remote", tmp_path / "clone"
    _dvc("remote", "add", "--local", "--default", "private", str(remote), cwd=root)
    _dvc("push", "-q", cwd=root)
    _git("add", "dvc.lock", cwd=root)
    _git("commit", "-q", "-m", "run", cwd=root)
    _git("clone", "-q", str(root), str(clone), cwd=tmp_path)
    copy_key(root / params.artifacts / "secret", clone, params.artifacts)  # the operator's key, never pushed
    shutil.copytree(root / params.artifacts / "keys", clone / params.artifacts / "keys")  # and signing key
    _dvc("remote", "add", "--local", "--default", "private", str(remote), cwd=clone)
    _dvc("pull", "-q", cwd=clone)
    # up to date but for the MLflow run id, which is not data (cache: false): that clone has logged no run
    assert _status(clone, []) == {"track": [{"changed outs": {"metrics/mlflow_run.json": "deleted"}}]}
    moments = f"{params.artifacts}/round2/swag/moments.safetensors"  # SWAG moments: in the private remote only
    for rel in (moments, "metrics/headline.json", f"{params.artifacts}/draw"):
        a, b = root / rel, clone / rel
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()) if a.is_dir() else [Path()]
        assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files), rel
    pushed = {p.read_bytes() for p in remote.rglob("*") if p.is_file()}
    assert moments_bytes(root, params) in pushed
    assert not any(f.read_bytes() in pushed for f in (root / params.artifacts / "secret").rglob("*") if f.is_file())


def test_an_entry_is_as_locked_only_when_every_file_and_param_is_the_recorded_one(recorded, tmp_path):
    """What spares a `dvc commit`: every dep and output of the entry the file dvc.lock hashed, every param its value."""
    from tasks import dvc_record

    params, root = recorded
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    assert dvc_record._as_locked(copy, "secret", params)  # what the flow recorded
    assert not dvc_record._as_locked(copy, "stratify", params)  # a folder among its outputs: DVC is asked
    key_id = copy / params.artifacts / "secret" / "key_id.json"
    good = key_id.read_bytes()
    key_id.write_bytes(good.replace(b'"', b"'", 1)[: len(good)].ljust(len(good), b" "))  # same size, other bytes
    assert not dvc_record._as_locked(copy, "secret", params)
    key_id.write_bytes(good)
    code = copy / "src" / "dprelease" / "core" / "privacy" / "secret.py"
    code.write_text(code.read_text() + "\n")  # a code dep edited
    assert not dvc_record._as_locked(copy, "secret", params)
    code.write_text(code.read_text()[:-1])
    assert dvc_record._as_locked(copy, "secret", params)
    # params: the entry's values are params.yaml's (a stage declaring `seed`, its recorded value then another)
    declared = json.loads(json.dumps(dvc_record._expected(params)))
    declared["stages"]["secret"]["params"] = ["seed"]
    lock = yaml.safe_load((copy / "dvc.lock").read_text())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dvc_record, "_expected", lambda p: declared)
        assert not dvc_record._as_locked(copy, "secret", params)  # declared, not recorded
        for seed, same in ((params.seed, True), (params.seed + 1, False)):
            lock["stages"]["secret"]["params"] = {"params.yaml": {"seed": seed}}
            (copy / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
            assert dvc_record._as_locked(copy, "secret", params) is same


def test_params_other_than_params_yaml_are_not_recorded(recorded, tmp_path):
    from tasks import dvc_record

    params, root = recorded
    other = parse_params(slice_raw(ppm__c=0.8))
    assert dvc_record.why_not("risk", other, root) == "run with params other than params.yaml"
    assert dvc_record.why_not("stratify", other, root) is None  # it does not read ppm.c
    assert dvc_record.why_not("risk", params, make_root(tmp_path)) == "not a DVC project root"
    assert set(dvc_record.unrecorded(other, ["stratify", "risk", "draw"], root)) == {"risk", "draw"}
    assert dvc_record.unrecorded(other, ["risk"], tmp_path) == {}  # not a DVC project: nothing to say


def test_a_second_operator_imports_the_keys_pulls_and_gets_the_same_release(recorded, tmp_path, monkeypatch):
    """Issue 38: keys by `dprelease key export-private` / `import-private` (never by DVC), then `dvc pull`: a clean
    `dvc status` and the identical, identically signed release; a clone with keys of its own is refused."""
    import os

    from dprelease.core.release import key_transfer

    params, root = recorded
    remote, clone, other, xfer = (tmp_path / n for n in ("remote", "clone", "other", "xfer"))
    _dvc("remote", "add", "--local", "--default", "--force", "private", str(remote), cwd=root)
    _dvc("push", "-q", cwd=root)
    _git("add", "dvc.lock", cwd=root)
    _git("commit", "-q", "-m", "run", "--allow-empty", cwd=root)
    env = {
        **os.environ,
        key_transfer.PASSPHRASE_ENV: "correct horse battery staple",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cli = [sys.executable, "-m", "dprelease.cli"]
    assert subprocess.run([*cli, "key", "export-private", "--to", str(xfer)], cwd=root, env=env).returncode == 0
    for where in (clone, other):
        _git("clone", "-q", str(root), str(where), cwd=tmp_path)
        _dvc("remote", "add", "--local", "--default", "private", str(remote), cwd=where)
        _dvc("pull", "-q", cwd=where)
    assert subprocess.run([*cli, "key", "import-private", "--from", str(xfer)], cwd=clone, env=env).returncode == 0
    assert _status(clone, []) == {"track": [{"changed outs": {"metrics/mlflow_run.json": "deleted"}}]}
    files = sorted(p.relative_to(root / params.release) for p in (root / params.release).rglob("*") if p.is_file())
    assert files and all(
        (root / params.release / f).read_bytes() == (clone / params.release / f).read_bytes() for f in files
    )
    # a clone whose operator made keys of their own: `dvc repro` (its `secret` stage) refuses, making nothing
    done = subprocess.run([*cli, "secret", "init"], cwd=other, env=env, capture_output=True, text=True)
    assert done.returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "secret"],
        cwd=other,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode != 0 and "is not the key dvc.lock was made with" in done.stdout + done.stderr
    assert _lock(other)["secret"] == _lock(root)["secret"]  # nothing recorded

    # issue 44: in the clone with the keys imported, the pulled outputs count as done: the release flow, with an
    # empty stage store (nothing to restore from), recomputes no stage whose outputs dvc.lock describes
    import flows.release as fr
    import tasks.stages as ts
    from tasks import dvc_record

    monkeypatch.setattr(ts, "store_dir", lambda: tmp_path / "clone-store")
    ts.HOW.clear()
    asked: list[list[str]] = []
    real = dvc_record.subprocess.run
    monkeypatch.setattr(dvc_record.subprocess, "run", lambda cmd, **kw: asked.append(cmd[3:]) or real(cmd, **kw))
    fr.release_flow(params.model_dump(mode="json"), str(clone), False)
    assert {n for n, how in ts.HOW.items() if how == "ran"} == {"secret"}  # the key's id file only (never in DVC)
    # DVC asked once, for its status, and to commit nothing (no MLflow run here): the key's id file the clone ran
    # is the one dvc.lock records (same bytes, same code), so its entry stands as it is
    assert asked == [["status", "--json"]], asked
    assert {n for n, how in ts.HOW.items() if how == "dvc.lock"} >= {"stratify", "featurize", "draw", "publish"}
    assert all((root / params.release / f).read_bytes() == (clone / params.release / f).read_bytes() for f in files)
