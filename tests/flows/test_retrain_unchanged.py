"""A retrain whose snapshot, release-stage code and params are those of the registered ``production``
version ends at once — Completed, message ``unchanged: …`` — and registers, copies, versions and runs
nothing; any change (a param of a release stage, the audit asked of an unaudited version) goes on to a real
retrain (here it stops at the first step that would run: the snapshot's DVC versioning). The fingerprint
itself: tests/pipeline/service/test_fingerprint.py; a real retrain leaves it in its version's tags:
tests/flows/test_retrain_flow.py."""

from __future__ import annotations

import time

import pytest
import yaml
from conftest import SLICE_DATA, make_root, slice_raw

from dprelease.core.config import load_params


class WouldRun(Exception):
    """The retrain went past the check: it would copy and version the snapshot now."""


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A project whose registry holds one promoted version made from exactly its current snapshot, code and
    params (tags as a retrain writes them), and the retrain's first real step replaced by :class:`WouldRun`."""
    import flows.retrain as fr
    from dprelease.pipeline.service import model_registry as mr
    from dprelease.pipeline.tracking import open_store

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root = make_root(tmp_path)
    (root / "params.yaml").write_text(
        yaml.safe_dump(slice_raw(service={"audit": False}), sort_keys=False), encoding="utf-8"
    )
    p = load_params(root / "params.yaml")
    fp, same = fr._unchanged(p, root, root / SLICE_DATA)
    assert same is None  # an empty registry: nothing to compare
    model = tmp_path / "model"
    model.mkdir()
    (model / "MLmodel").write_text("flavors: {}\n", encoding="utf-8")
    mlflow = open_store(p, root)
    tags = fp | {
        "release.digest": "d1",
        "epsilon": 2.0,
        "guarantee": "ppm_local_asymptotic",
        "weighted_f1": 0.5,
        "cumulative_epsilon": 2.0,
        "gate.decision": "promoted",
        "audited": "false",
    }
    version = mr.register(mlflow, p.service.registered_model, model.as_uri(), tags)
    mlflow.MlflowClient().set_registered_model_alias(p.service.registered_model, mr.PRODUCTION, version)

    def would_run(*args, **kwargs):
        raise WouldRun("version_snapshot")

    from dprelease.pipeline.service import snapshots

    monkeypatch.setattr(snapshots, "version_snapshot", would_run)  # what the retrain calls to copy the snapshot
    return root, p, mlflow.MlflowClient()


def _versions(client, p) -> list[str]:
    return sorted(str(v.version) for v in client.search_model_versions(f"name = '{p.service.registered_model}'"))


def test_unchanged_snapshot_code_and_params_end_at_once_with_nothing_registered(served, capsys):
    import flows.retrain as fr

    root, p, client = served
    runs = len(client.search_runs([client.get_experiment_by_name(p.tracking.experiment).experiment_id]))
    t0 = time.monotonic()
    assert fr.main(["--root", str(root)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "version 1 ε=2.000" in line and line.endswith("→ unchanged, already promoted"), line
    seconds = float(line.split(": ", 1)[1].split(" s")[0])  # the check alone (hashes, registry): nothing ran, below
    print(f"unchanged retrain: {seconds:.1f} s of flow work, {time.monotonic() - t0:.1f} s with Prefect's start")
    state = fr.retrain_flow(root=str(root), return_state=True)
    assert (
        state.is_completed()
        and state.message.startswith("unchanged: snapshot sir-")
        and "are those of version 1 (promoted); nothing registered, nothing run" in state.message
    ), state.message
    assert _versions(client, p) == ["1"]  # nothing registered ...
    assert len(client.search_runs([client.get_experiment_by_name(p.tracking.experiment).experiment_id])) == runs
    assert not (root / "data" / "snapshots").exists() and not (root / "runs").exists()  # ... copied or run


def test_a_changed_param_or_a_missing_audit_goes_on_to_retrain(served):
    import flows.retrain as fr

    root, p, client = served
    with pytest.raises(WouldRun):  # a param a release stage reads
        fr.retrain_flow(root=str(root), overrides={"ppm.c": 0.9})
    with pytest.raises(WouldRun):  # the audit asked, never run on v1
        fr.retrain_flow(root=str(root), overrides={"service.audit": True})
    with pytest.raises(WouldRun):  # not registering: nothing to compare
        fr.retrain_flow(root=str(root), track=False)
    assert _versions(client, p) == ["1"]


def test_a_busy_root_on_the_command_line_is_still_one_line_exit_2(served, capsys):
    """Only a deployment run turns a busy root into a Cancelled state (tests/flows/test_serve.py)."""
    import flows.retrain as fr
    from dprelease.core.locks import root_lock

    root, _, _ = served
    with root_lock(root, "make run"):
        assert fr.main(["--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dprelease: error: {root} is in use by another dprelease run: pid ") and err.count("\n") == 1
