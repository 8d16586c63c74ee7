"""tracking (unit level): the URI, the guarantee metrics, and the store housekeeping (relocation of a copied
project, abandoned runs, HTTP limits). Every store is a ``sqlite:///`` file under tmp_path; MLflow's
process-wide state (tracking URI, active experiment, the env vars it exports) is restored after each test."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import mlflow_globals

from dprelease.core.config import parse_params
from dprelease.core.privacy import guarantee
from dprelease.pipeline import tracking
from dprelease.pipeline.tracking import HTTP_LIMITS, PENDING

EXPERIMENT = "dprelease-unit-test"


def _params(**tracking_kw):
    return parse_params({"tracking": {"experiment": EXPERIMENT, **tracking_kw}})


@pytest.fixture(autouse=True)
def mlflow_state():
    with mlflow_globals():
        yield


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One initialised store (creating it runs MLflow's migrations: seconds), copied by the tests that need
    one. It holds the project experiment with one run, plus experiments whose artifacts live elsewhere."""
    import mlflow

    root = tmp_path_factory.mktemp("template")
    with mlflow_globals():
        tracking._setup(_params(), root)
        client = mlflow.MlflowClient()
        exp = client.get_experiment_by_name(EXPERIMENT)
        run = client.create_run(exp.experiment_id)
        client.set_terminated(run.info.run_id, "FINISHED")
        client.create_experiment("elsewhere", artifact_location="file:///srv/shared/artifacts")
        client.create_experiment("remote", artifact_location="s3://bucket/mlartifacts")
    return {"root": root, "run_id": run.info.run_id, "artifacts": (root / "mlartifacts").resolve().as_uri()}


def _copy_project(template: dict, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template["root"] / "mlflow.db", dst / "mlflow.db")
    return dst


def _client(root: Path):
    import mlflow

    return mlflow.MlflowClient(tracking_uri="sqlite:///" + str((root / "mlflow.db").resolve()))


# tracking_uri --------------------------------------------------------------------------------------
def test_tracking_uri_anchors_relative_sqlite_at_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri(_params(), tmp_path) == "sqlite:///" + str((tmp_path / "mlflow.db").resolve())
    nested = _params(mlflow_uri="sqlite:///stores/../runs/m.db")
    assert tracking.tracking_uri(nested, tmp_path) == "sqlite:///" + str((tmp_path / "runs" / "m.db").resolve())


def test_tracking_uri_default_root_is_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert tracking.tracking_uri(_params()) == "sqlite:///" + str((tmp_path / "mlflow.db").resolve())


@pytest.mark.parametrize(
    "uri",
    [
        "sqlite:////var/lib/mlflow/mlflow.db",
        "http://127.0.0.1:5000",
        "https://mlflow.example.org",
        "file:///tmp/mlruns",
        "databricks",
    ],
)
def test_tracking_uri_leaves_absolute_and_remote_alone(tmp_path, monkeypatch, uri):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri(_params(mlflow_uri=uri), tmp_path) == uri


def test_tracking_uri_environment_wins_and_is_anchored_too(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    assert tracking.tracking_uri(_params(), tmp_path) == "http://tracking:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///other.db")
    assert tracking.tracking_uri(_params(), tmp_path) == "sqlite:///" + str((tmp_path / "other.db").resolve())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")  # empty: the configured one
    assert tracking.tracking_uri(_params(mlflow_uri="http://h:1"), tmp_path) == "http://h:1"


# _guarantee_metrics ---------------------------------------------------------------------------------
def test_guarantee_metrics_ppm():
    g = guarantee.ppm(10.6, 5.3, posterior_draws=500, round=3, c=0.75, reweight=True, risk_norm="max")
    m = tracking._guarantee_metrics(g, "release.")
    assert m == {
        "release.epsilon": 10.6,
        "release.local_sensitivity": 5.3,
        "release.posterior_draws": 500,
        "release.round": 3,
        "release.c": 0.75,
    }
    assert not any(k.endswith("delta") for k in m)  # Δ̂ is local_sensitivity, never 'delta'; δ is not a number
    assert tracking._guarantee_metrics(g) == {k[len("release.") :]: v for k, v in m.items()}


def test_guarantee_metrics_accountant():
    g = guarantee.accountant(
        "DP-SGD", 3.0, 1e-5, accountant="RDP", noise_multiplier=1.1, sample_rate=0.01, steps=300, poisson=True
    )
    m = tracking._guarantee_metrics(g)
    assert m == {"epsilon": 3.0, "delta": 1e-5, "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 300}
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.values())


def test_guarantee_metrics_none_and_zero_delta():
    assert tracking._guarantee_metrics(guarantee.none(epochs=3)) == {"epochs": 3}
    g = guarantee.accountant("Laplace", 0.0, 0.0)
    assert tracking._guarantee_metrics(g, "x.") == {"x.epsilon": 0.0, "x.delta": 0.0}  # zeros are numbers


def test_guarantee_tags(monkeypatch):
    tags = {}

    class Fake:
        @staticmethod
        def set_tags(d):
            tags.update(d)

    tracking._guarantee_tags(Fake, guarantee.ppm(2.0, 1.0, round=2))
    assert tags == {
        "mechanism": "SWAG-PPM",
        "guarantee": "ppm_local_asymptotic",
        "delta": "asymptotic, not quantified",
        "claim": "ε = 2",
    }
    tracking._guarantee_tags(Fake, guarantee.uncertified(7.1, 3.55, certified_directions=19, parameters=126_316))
    assert tags["guarantee"] == "ppm_uncertified" and "ε" not in tags["claim"].replace("not an ε", "")
    assert tags["claim"] == "index 2Δ̂ = 7.1 (not DP; certified in 19 of 126,316 directions)"
    tracking._guarantee_tags(Fake, guarantee.accountant("DP-SGD", 3.0, 1e-5))
    assert tags["delta"] == "1e-05" and tags["guarantee"] == "dp_accountant"


# the store --------------------------------------------------------------------------------------------
def test_setup_creates_the_experiment_at_the_roots_mlartifacts(template):
    exp = _client(template["root"]).get_experiment_by_name(EXPERIMENT)
    assert exp.artifact_location == template["artifacts"]
    assert (template["root"] / PENDING).is_file()
    assert json.loads((template["root"] / PENDING).read_text(encoding="utf-8")) == []


def test_relocate_points_a_copied_store_at_its_own_mlartifacts(template, tmp_path):
    import mlflow

    b = _copy_project(template, tmp_path / "B")
    before = _client(b).get_experiment_by_name(EXPERIMENT)
    assert before.artifact_location == template["artifacts"]  # the copy still points at the original project
    tracking._setup(_params(), b)
    assert mlflow.get_tracking_uri() == "sqlite:///" + str((b / "mlflow.db").resolve())
    client = _client(b)
    own = (b / "mlartifacts").resolve().as_uri()
    assert own != template["artifacts"]
    assert client.get_experiment_by_name(EXPERIMENT).artifact_location == own
    run = client.get_run(template["run_id"])
    assert run.info.artifact_uri == f"{own}/{template['run_id']}/artifacts"
    # experiments whose artifacts are not a project's mlartifacts/ folder are left alone
    assert client.get_experiment_by_name("elsewhere").artifact_location == "file:///srv/shared/artifacts"
    assert client.get_experiment_by_name("remote").artifact_location == "s3://bucket/mlartifacts"
    # the original store is untouched
    assert _client(template["root"]).get_experiment_by_name(EXPERIMENT).artifact_location == template["artifacts"]
    # and an artifact logged to the copied run lands in the copy's own folder
    client.log_text(template["run_id"], "hello", "note.txt")
    assert (b / "mlartifacts" / template["run_id"] / "artifacts" / "note.txt").read_text() == "hello"
    assert not (template["root"] / "mlartifacts" / template["run_id"] / "artifacts" / "note.txt").exists()


def test_relocate_is_idempotent_and_tolerates_non_stores(template, tmp_path):
    b = _copy_project(template, tmp_path / "B")
    own = (b / "mlartifacts").resolve()
    tracking._relocate(b / "mlflow.db", own)
    tracking._relocate(b / "mlflow.db", own)
    assert _client(b).get_experiment_by_name(EXPERIMENT).artifact_location == own.as_uri()
    assert _client(b).get_run(template["run_id"]).info.artifact_uri.startswith(own.as_uri() + "/")
    tracking._relocate(tmp_path / "missing.db", own)  # no store yet: nothing to do
    assert not (tmp_path / "missing.db").exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    tracking._relocate(empty, own)  # a sqlite file without MLflow tables
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    tracking._relocate(garbage, own)  # not sqlite at all: MLflow will say so later


def test_close_abandoned_kills_running_runs_and_empties_the_list(template, tmp_path):
    import mlflow

    root = _copy_project(template, tmp_path / "C")
    tracking._setup(_params(), root)
    client = _client(root)
    exp_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    abandoned = client.create_run(exp_id).info.run_id
    finished = client.create_run(exp_id).info.run_id
    client.set_terminated(finished, "FINISHED")
    unlisted = client.create_run(exp_id).info.run_id  # RUNNING but not ours to close
    (root / PENDING).write_text(json.dumps([abandoned, finished, "0" * 32]), encoding="utf-8")
    tracking._close_abandoned(mlflow, root)
    assert client.get_run(abandoned).info.status == "KILLED"
    assert client.get_run(abandoned).info.end_time is not None
    assert client.get_run(finished).info.status == "FINISHED"
    assert client.get_run(unlisted).info.status == "RUNNING"
    assert json.loads((root / PENDING).read_text(encoding="utf-8")) == []


def test_setup_closes_abandoned_runs(template, tmp_path):
    root = _copy_project(template, tmp_path / "D")
    client = _client(root)
    abandoned = client.create_run(client.get_experiment_by_name(EXPERIMENT).experiment_id).info.run_id
    (root / PENDING).write_text(json.dumps([abandoned]), encoding="utf-8")
    tracking._setup(_params(), root)
    assert client.get_run(abandoned).info.status == "KILLED"
    assert json.loads((root / PENDING).read_text(encoding="utf-8")) == []


def test_pending_tolerates_a_missing_or_broken_file(tmp_path):
    assert tracking._pending(tmp_path) == []
    (tmp_path / PENDING).write_text("{not json", encoding="utf-8")
    assert tracking._pending(tmp_path) == []


def test_run_is_pending_only_while_open(template, tmp_path):
    root = _copy_project(template, tmp_path / "E")
    mlflow = tracking._setup(_params(), root)
    with tracking._run(mlflow, root, run_name="unit") as run:
        run_id = run.info.run_id
        assert tracking._pending(root) == [run_id]
    assert tracking._pending(root) == []
    assert _client(root).get_run(run_id).info.status == "FINISHED"
    with pytest.raises(RuntimeError):
        with tracking._run(mlflow, root, run_name="failing") as run:
            failed = run.info.run_id
            raise RuntimeError("boom")
    assert tracking._pending(root) == []
    assert _client(root).get_run(failed).info.status == "FAILED"


def test_http_limits_are_defaults_an_explicit_env_wins(template, tmp_path, monkeypatch):
    assert set(HTTP_LIMITS) == {
        "MLFLOW_HTTP_REQUEST_TIMEOUT",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    }
    assert all(int(v) >= 1 for v in HTTP_LIMITS.values())
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "42")
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", raising=False)
    tracking._setup(_params(), _copy_project(template, tmp_path / "F"))
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "42"
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == HTTP_LIMITS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == HTTP_LIMITS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"]


def test_setup_for_a_second_root_uses_that_roots_store(template, tmp_path):
    import mlflow

    a = _copy_project(template, tmp_path / "A")
    b = _copy_project(template, tmp_path / "B")
    tracking._setup(_params(), a)
    assert mlflow.get_tracking_uri() == "sqlite:///" + str((a / "mlflow.db").resolve())
    tracking._setup(_params(), b)
    assert mlflow.get_tracking_uri() == "sqlite:///" + str((b / "mlflow.db").resolve())


def test_experiment_is_marked_as_model_training(tmp_path):
    """MLflow 3's UI opens an experiment without this tag on its GenAI overview (traces, token usage)."""
    from dprelease.pipeline import tracking

    params = parse_params({"tracking": {"mlflow_uri": "sqlite:///mlflow.db", "experiment": "kind-check"}})
    mlflow = tracking._setup(params, tmp_path)
    exp = mlflow.get_experiment_by_name("kind-check")
    assert exp.tags[tracking.EXPERIMENT_KIND] == tracking.MODEL_TRAINING == "custom_model_development"


def test_release_run_name_says_what_ran():
    from dprelease.core.privacy import guarantee

    params = parse_params({"released": {"mechanism": "swag_ppm"}})  # its ReleaseSpec's run_name words the name
    g = guarantee.ppm(5.496, 2.748, round=2, temperature=1.0)
    name = tracking.release_run_name(params, g)
    assert name == "SWAG-PPM · head · round 2 · ε=5.496 · c=1 · calibration=subspace · reweight=iterative"
    u = guarantee.uncertified(7.1452, 3.5726, certified_directions=19, parameters=126_316, round=2)
    assert tracking.release_run_name(params, u) == (
        "SWAG-PPM · head · round 2 · index=7.145 (not DP) · c=1 · calibration=subspace · reweight=iterative"
    )
    d = guarantee.Guarantee.from_dict(
        {"kind": "dp_accountant", "epsilon": 7.996, "delta": 2.9e-4, "mechanism": "DP-SGD (Opacus)", "quantities": {}}
    )
    assert (
        tracking.release_run_name(parse_params({}), d) == "DP-SGD (Opacus) · head · ε=7.996 · dp_accountant · δ=0.00029"
    )


def test_guarantee_metrics_of_an_uncertified_record_have_no_epsilon():
    u = guarantee.uncertified(
        7.1452, 3.5726, certified_directions=19, parameters=126_316, round=2, uncertified_index_point=6.0
    )
    m = tracking._guarantee_metrics(u)
    assert not any(k.startswith("epsilon") or k == "delta" for k in m)
    assert m["uncertified_index"] == 7.1452 and (m["certified_directions"], m["parameters"]) == (19, 126_316)


@pytest.mark.parametrize(
    "raw",
    [{}, {"ppm": {"reweight": False}}, {"model": {"backend": "full"}}]
    + [{"released": {"mechanism": m}} for m in ("swag_ppm", "ncm", "linear_ppm", "public_only")],
)
def test_logged_sections_are_what_the_release_stages_read(raw):
    """The shared sections and each staged release's own settings (its ReleaseSpec's hook): every section a release
    stage reads is logged, and nothing else beyond the shared sections (output paths aside)."""
    from dprelease.pipeline import registry

    p = parse_params(raw)
    read = {k.split(".")[0] for s in registry.group(p, "release") for k in s.params} - {"release", "force_release_path"}
    logged = {k.split(".")[0] for k in tracking.mechanism_params(p)}
    assert read <= logged <= read | set(tracking.SHARED_SECTIONS)


def test_mechanism_params_keep_what_the_mechanism_reads():
    iterative = tracking.mechanism_params(parse_params({}))
    assert {"seed", "ppm.c", "ppm.reweight_step", "model.backend", "model.head.hidden", "evaluation.draws"} <= set(
        iterative
    )
    assert not any(
        k.startswith(
            ("model.full.", "ppm.censor_", "dpsgd.full.", "dpsgd.delta_sweep", "nvdp", "gpp", "service", "tune")
        )
        for k in iterative
    )
    assert {"released.mechanism", "released.epsilon", "dpsgd.head.lr", "dpsgd.target_epsilon"} <= set(iterative)
    assert "ppm.k" not in iterative  # one-shot strength: not read when iterative
    oneshot = tracking.mechanism_params(parse_params({"ppm": {"reweight_mode": "oneshot"}}))
    assert "ppm.k" in oneshot and "ppm.reweight_step" not in oneshot
    plain = tracking.mechanism_params(parse_params({"ppm": {"reweight": False}, "model": {"backend": "full"}}))
    assert not any(k.startswith(("ppm.reweight_", "model.head.")) for k in plain) and "model.full.tiny" in plain
    censored = tracking.mechanism_params(parse_params({"ppm": {"mechanism": "censored", "censor_epsilon": 4.0}}))
    assert censored["ppm.censor_epsilon"] == 4.0
    # the declared release (DP-SGD) reads its run settings, its accountant, the public proxy and the grid its
    # configuration is chosen from: those join the release's own (was < 60 before DP-SGD was what `make run` releases;
    # 75 with features.encoder, which every embedding reads)
    assert len(iterative) < 78
    swag = tracking.mechanism_params(parse_params({"released": {"mechanism": "swag_ppm"}}))
    assert not any(k.startswith(("dpsgd.", "frontier.")) for k in swag) and len(swag) < 60
    # the grid the release's configuration is chosen from (dpsgd.grid), not its private selection nor the frontier's trace
    assert {"dpsgd.grid.epochs", "dpsgd.grid.sgd_lrs", "frontier.accountants"} <= set(iterative)
    assert not any(
        k.startswith(("dpsgd.grid.private_selection", "ppm.frontier", "frontier.epsilons")) for k in iterative
    )
    linear = tracking.mechanism_params(parse_params({"released": {"mechanism": "linear_ppm"}}))
    assert {"linear_ppm.variant", "linear_ppm.sampler.kind"} <= set(linear)
    assert not any(k.startswith(("linear_ppm.frontier", "linear_ppm.release", "linear_ppm.censor_")) for k in linear)
