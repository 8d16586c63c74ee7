"""The Prefect release flow on the head slice: a full run with MLflow tracking, a no-op re-run, resume after a
crash mid-stage, and a parameter change that re-runs only the affected stages.

Stage executions are counted by wrapping ``tasks.stages.run_stage`` (what the cached task calls). One
Prefect ephemeral server serves the whole module (started by the first flow call, ~12 s).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import copy_key, make_root, slice_raw

from dprelease.contracts import source
from dprelease.core import headline
from dprelease.core.config import parse_params
from dprelease.core.io import read_json
from dprelease.pipeline import cache, registry

pytestmark = pytest.mark.slow

UPSTREAM_OF_RISK = ["stratify", "featurize", "finetune_r1", "swag_r1"]


@pytest.fixture(scope="module")
def flow_env():
    """Import the flow (Prefect home already points into a tmp dir, see conftest) with counted stages.

    ``source.code_hash`` is frozen for the module: it hashes source files, which other people may be editing
    while the suite runs (code-scoped keys have their own tests in test_cache.py)."""
    import dprelease.mechanisms.swag_ppm.rounds as stages_mod
    import flows.release as fr
    import tasks.stages as ts

    calls: list[str] = []
    real = ts.run_stage
    hooks: dict = {}

    def counted(name, params, root, **kw):
        calls.append(name)
        if name in hooks:
            return hooks.pop(name)(real, name, params, root)
        return real(name, params, root, **kw)

    frozen = source.code_hash(["."])
    store: dict = {"on": False}  # the shared stage store is off here (these tests count recomputation per root)
    real_restore = ts.stage_store.restore

    def restore(*args, **kwargs):
        return real_restore(*args, **kwargs) if store["on"] else None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ts, "run_stage", counted)
        mp.setattr(ts.stage_store, "restore", restore)
        mp.setattr(source, "code_hash", lambda paths: frozen)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield SimpleNamespace(flow=fr.release_flow, calls=calls, hooks=hooks, stages=stages_mod, store=store)


def _run(env, params, root: Path, track: bool = False) -> tuple[dict, list[str]]:
    env.calls.clear()
    out = env.flow(params.model_dump(mode="json"), str(root), track)
    return out, list(env.calls)


def _names(params) -> list[str]:
    return [s.name for s in registry.group(params, "release")]


def _snapshot(root: Path) -> dict[str, int]:
    """mtime (ns) of every output file the stages write."""
    files = {}
    for top in ("artifacts", "metrics", "plots", "reports", "release"):
        for p in (root / top).rglob("*"):
            if p.is_file() and p.name != "mlflow_run.json":
                files[p.relative_to(root).as_posix()] = p.stat().st_mtime_ns
    return files


@pytest.fixture(scope="module")
def first(flow_env, tmp_path_factory):
    params = parse_params(slice_raw())
    root = make_root(tmp_path_factory.mktemp("flow"))
    out, calls = _run(flow_env, params, root, track=True)
    return SimpleNamespace(params=params, root=root, out=out, calls=calls)


# (a) a first run ---------------------------------------------------------------------------------------------------
def test_first_run_runs_every_stage_once(first):
    names = _names(first.params)
    assert first.calls == names
    assert set(first.out) == {*names, "timings", "mlflow_run_id"}
    untimed = {s.name for s in registry.group(first.params, "release") if not s.timed}
    assert untimed == {"reweight"}  # its duration grows with a data-dependent search: never recorded
    assert list(first.out["timings"]) == [n for n in names if n not in untimed]
    for name in names:
        assert isinstance(first.out[name], dict) and first.out[name], name
    assert first.out["sensitivity_r2"] == read_json(first.root / "metrics/sensitivity_r2.json")
    assert first.out["draw"] == read_json(first.root / "metrics/swag_ppm_draw.json")
    # as JSON: a quartile with no test support is NaN (core/utility/metrics.py), equal to itself only as text
    assert json.dumps(first.out["evaluate"], sort_keys=True) == json.dumps(
        read_json(first.root / "metrics/evaluation.json"), sort_keys=True
    )


def test_first_run_writes_outputs_and_stamps(first):
    for spec in registry.group(first.params, "release"):
        for rel in [*spec.outs, *spec.metrics, *spec.plots]:
            assert (first.root / rel).exists(), f"{spec.name}: {rel}"
        key = cache.input_key(spec, first.params, first.root)
        stamp = first.root / first.params.artifacts / ".stamps" / f"{spec.name}.json"
        assert read_json(stamp)["key"] == key, spec.name
        assert cache.is_current(spec, first.params, key, first.root)


def test_first_run_tracks_to_mlflow_under_root(first):
    import mlflow

    from dprelease.pipeline.tracking import tracking_uri

    uri = tracking_uri(first.params, first.root)
    assert uri == "sqlite:///" + str((first.root / "mlflow.db").resolve())
    assert (first.root / "mlflow.db").is_file()
    run_info = read_json(first.root / "metrics/mlflow_run.json")
    assert run_info["run_id"] == first.out["mlflow_run_id"]
    assert run_info["experiment"] == first.params.tracking.experiment
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(run_info["run_id"])
    g = first.out["draw"]["guarantee"]
    audit = read_json(first.root / "metrics/evaluation.json")
    # the headline figures, and only those, are metrics (the names the registry's version tags use)
    assert set(run.data.metrics) <= set(headline.NAMES)
    assert run.data.metrics["epsilon"] == pytest.approx(g["epsilon"])
    assert run.data.metrics["weighted_f1"] == pytest.approx(audit["released_weighted_f1"])
    assert run.data.metrics["macro_f1_mean"] == pytest.approx(audit["macro_f1_mean"])
    assert run.data.metrics["records"] == read_json(first.root / "metrics/data.json")["public"]["expected_train_size"]
    assert run.data.metrics["temperature"] == pytest.approx(g["quantities"]["temperature"])
    # the rest in one JSON artifact
    details = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/details.json")
    released = read_json(first.root / "metrics/swag_ppm_draw.json")["round"]
    for r in (2, 3):  # the released round's statistics only: an unreleased round's never reach MLflow
        sens = read_json(first.root / f"metrics/sensitivity_r{r}.json")
        if r == released:
            assert details[f"round{r}"]["two_delta_hat"] == pytest.approx(2 * sens["local_sensitivity"])  # not an ε
        else:
            assert f"round{r}" not in details
    assert details["guarantee"]["local_sensitivity"] == pytest.approx(g["quantities"]["local_sensitivity"])
    assert list(details["train_loss"]) == [f"finetune_round{released}", f"swag_round{released}"]
    assert len(details["train_loss"][f"finetune_round{released}"]) == first.params.backend.finetune.epochs
    assert run.data.tags["guarantee"] == "ppm_local_asymptotic"
    assert run.data.tags["delta"] == "asymptotic, not quantified"
    # params: what the release's stages read, for the backend in use; no other mechanism's settings
    assert run.data.params["ppm.c"] == "1.0" and run.data.params["model.backend"] == "head"
    assert "model.head.hidden" in run.data.params and not any(k.startswith("model.full.") for k in run.data.params)
    assert not any(
        k.split(".")[0] in ("dpsgd", "nvdp", "gpp", "tune", "compare", "service", "dask", "tracking")
        for k in run.data.params
    )


def test_prefect_store_keeps_untimed_stages_times_and_is_operator_only(first):
    """Prefect's database holds a start and an end for every task run, the untimed stages' too (the flow never
    reports them, but the store cannot leave them out: docs/hygiene.md), so the home is 0700 and its SQLite
    files 0600 (the umask's 0644 before)."""
    import sqlite3
    import stat

    from prefect.settings import PREFECT_HOME

    untimed = sorted(s.name for s in registry.group(first.params, "release") if not s.timed)
    home = Path(PREFECT_HOME.value())
    with sqlite3.connect(home / "prefect.db") as db:
        rows = db.execute(
            f"SELECT name, start_time, end_time FROM task_run WHERE name IN ({','.join('?' * len(untimed))})", untimed
        ).fetchall()
    assert {r[0] for r in rows} == set(untimed) and all(start and end for _, start, end in rows)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in home.glob("prefect.db*")}
    assert "prefect.db" in modes and set(modes.values()) == {0o600}, modes


# (b) nothing changed -> nothing runs ---------------------------------------------------------------------------------
def test_rerun_with_nothing_changed_executes_no_stage(flow_env, first):
    before = _snapshot(first.root)
    out, calls = _run(flow_env, first.params, first.root)
    assert calls == []
    assert _snapshot(first.root) == before
    for name in _names(first.params):
        assert out[name] == first.out[name], name  # summaries come back from Prefect's cache


def test_deleted_output_reruns_that_stage_and_downstream_only(flow_env, first, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(first.root, root)
    (root / "metrics/evaluation.json").unlink()
    _, calls = _run(flow_env, first.params, root)
    assert calls == ["evaluate"]
    shutil.rmtree(root / first.params.artifacts / "round3/weights")
    _, calls = _run(flow_env, first.params, root)
    assert calls == ["reweight"]  # identical weights again -> downstream keys unchanged


# (c) resume after a crash -------------------------------------------------------------------------------------------
def test_resume_after_crash_mid_stage(flow_env, tmp_path):
    params = parse_params(slice_raw())
    root = make_root(tmp_path)
    names = _names(params)
    crash_at = names.index("sensitivity_r2")
    real_write_json = flow_env.stages.write_json

    def crash_after_outputs(real, name, p, r):
        """The stage commits its output folder, then dies before writing its metrics."""

        def dying_write_json(path, obj):
            if Path(path).name == "sensitivity_r2.json":
                raise RuntimeError("simulated crash in sensitivity_r2")
            return real_write_json(path, obj)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(flow_env.stages, "write_json", dying_write_json)
            return real(name, p, r)

    flow_env.hooks["sensitivity_r2"] = crash_after_outputs
    flow_env.calls.clear()
    with pytest.raises(Exception, match="simulated crash"):
        flow_env.flow(params.model_dump(mode="json"), str(root), False)
    assert flow_env.calls == names[: crash_at + 1]
    stamps = root / params.artifacts / ".stamps"
    assert not (stamps / "sensitivity_r2.json").exists()
    assert (root / params.artifacts / "round2/sensitivity").is_dir()  # partial: outputs without metrics
    assert not (root / "metrics/sensitivity_r2.json").exists()
    assert not (root / params.release).exists()

    out, calls = _run(flow_env, params, root)
    assert calls == names[crash_at:], "stages before the crash must come from the cache"
    for spec in registry.group(params, "release"):
        for rel in [*spec.outs, *spec.metrics, *spec.plots]:
            assert (root / rel).exists(), f"{spec.name}: {rel}"
    assert out["sensitivity_r2"] == read_json(root / "metrics/sensitivity_r2.json")
    _, calls = _run(flow_env, params, root)
    assert calls == []


# (d) a parameter change ---------------------------------------------------------------------------------------------
def test_changing_c_reruns_risk_and_downstream_only(flow_env, first, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(first.root, root)
    params = parse_params(slice_raw(), {"ppm.c": 0.8})
    names = _names(params)
    out, calls = _run(flow_env, params, root)
    assert calls == names[names.index("risk") :]
    assert not set(calls) & set(UPSTREAM_OF_RISK)
    w = np.load(root / params.artifacts / "round2/weights/weights.npy")
    assert w.min() == 0.0 and w.max() == pytest.approx(0.8)
    assert read_json(root / params.release / "release.json")["c"] == 0.8
    assert out["draw"] == read_json(root / "metrics/swag_ppm_draw.json")


def test_changing_audit_draws_reruns_audit_only(flow_env, first, tmp_path):
    """Only the utility evaluation, and the model card that quotes it, are recomputed."""
    root = tmp_path / "copy"
    shutil.copytree(first.root, root)
    params = parse_params(slice_raw(evaluation__draws=4))
    out, calls = _run(flow_env, params, root)
    assert calls == ["evaluate", "publish"]
    assert out["evaluate"]["draws"] == 4


def test_outputs_rewritten_outside_the_flow_are_not_trusted(flow_env, first, tmp_path):
    """`dprelease stage risk` (as `dvc repro` runs it) with c = 0.8 rewrites the weights but no stamp;
    the flow with c = 1.0 must not release a model trained on the c = 0.8 weights."""
    from dprelease.pipeline.registry import run_stage

    root = tmp_path / "copy"
    shutil.copytree(first.root, root)
    run_stage("risk", parse_params(slice_raw(), {"ppm.c": 0.8}), root)
    _, calls = _run(flow_env, first.params, root)
    w = np.load(root / first.params.artifacts / "round2/weights/weights.npy")
    assert "risk" in calls and w.max() == 1.0


# the stage store: a second root with the same inputs restores every stage instead of recomputing it ----------------
def test_second_root_restores_from_stage_store(flow_env, first, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy2(first.root / "params.yaml", other / "params.yaml") if (first.root / "params.yaml").exists() else None
    data_rel = first.params.data.path
    if not Path(data_rel).is_absolute():
        (other / data_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(first.root / data_rel, other / data_rel)
    # the same project's randomness key (the operator's): the released draw can then come from the store
    copy_key(first.root / first.params.artifacts / "secret", other, first.params.artifacts)
    flow_env.store["on"] = True
    try:
        out, calls = _run(flow_env, first.params, other)
    finally:
        flow_env.store["on"] = False
    # every stage came from the store but two: `secret` (never shared: it stands for this root's key file) and
    # publish (this root has its own agency signing key, made on first use, so the same draw is signed anew)
    assert calls == ["secret", "publish"]
    assert out["draw"]["guarantee"] == first.out["draw"]["guarantee"]
    from dprelease.core.release.signing import PUBLIC, check_signature, key_folder

    mine, theirs = (
        check_signature(r / first.params.release, key_folder(first.params, r) / PUBLIC) for r in (other, first.root)
    )
    assert mine["key_id"] != theirs["key_id"]
    assert (other / first.params.release / "model.safetensors").read_bytes() == (
        first.root / first.params.release / "model.safetensors"
    ).read_bytes()
    assert read_json(other / "metrics/evaluation.json") == read_json(first.root / "metrics/evaluation.json")


# the full backend through the same flow: a run interrupted by a crash resumes after the last finished stage --------
def test_full_backend_flow_resumes_after_interruption(flow_env, tmp_path):
    params = parse_params(slice_raw("full"))
    root = make_root(tmp_path)
    names = _names(params)

    def crash(real, name, p, r):
        raise RuntimeError("simulated interruption in swag_r2")

    flow_env.hooks["swag_r2"] = crash
    flow_env.calls.clear()
    with pytest.raises(Exception, match="simulated interruption"):
        flow_env.flow(params.model_dump(mode="json"), str(root), False)
    done = names[: names.index("swag_r2")]
    assert flow_env.calls == names[: names.index("swag_r2") + 1]

    out, calls = _run(flow_env, params, root)
    assert calls == names[len(done) :], "finished stages come from the cache"
    manifest = read_json(root / params.release / "release.json")
    assert manifest["backend"] == "full" and manifest["guarantee"] == out["draw"]["guarantee"]
    assert (root / params.release / "tokenizer" / "vocab.txt").is_file()


# the printed summary --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("t_min", [0.9999999954, 1.0, 0.5])
def test_summary_states_t_min_and_the_conservative_epsilon(first, capsys, t_min):
    """T̂ a hair below 1 after the subspace calibration (float32 deviations) crashed the summary once."""
    metrics = first.root / "metrics/swag_ppm_draw.json"
    original = metrics.read_text(encoding="utf-8")
    rel = json.loads(original)
    q = rel["guarantee"]["quantities"]
    q["temperature"], q["temperature_min"] = t_min, t_min
    rel["guarantee"]["epsilon"] = q["epsilon_at_temperature_one"] / min(1.0, t_min)
    try:
        metrics.write_text(json.dumps(rel), encoding="utf-8")
        from flows.summary import print_summary

        print_summary(first.params, str(first.root), first.out, 1.0)
    finally:
        metrics.write_text(original, encoding="utf-8")
    text = capsys.readouterr().out
    assert f"T_min = {t_min:.2f} in SWAG's subspace, ≥ {q['temperature_min_all']:.3g} over all parameters" in text
    assert f"drawn      ε = {rel['guarantee']['epsilon']:.4g} [ppm_local_asymptotic]" in text
    assert f"Certified: the sampler's temperature in all {q['parameters']:,} parameter directions" in text
    assert first.params.ppm.calibration == "subspace"  # the default: T_min a hair below 1 is its usual reading
