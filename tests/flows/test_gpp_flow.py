"""``make gpp`` (``flows.gpp.main``) end to end on the head slice with tiny GPP settings and MLflow on: the
data stages then the gpp group, the report printed, a parent MLflow run with one child per dataset holding
aggregates only; a re-run executes no stage. The Flower run is off here (tested in tests/mechanisms/gpp/federated/)."""

from __future__ import annotations

import contextlib
import io
import shutil
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT, make_root, slice_raw

pytestmark = pytest.mark.slow

TINY_GPP = {
    "epochs": 1,
    "sweep_epochs": 1,
    "encoder_hidden": [16, 8],
    "head_hidden": [8],
    "batch_size": 16,
    "probe": {"epochs": 1, "lr": 0.01, "batch_size": 16},
    "noise_grid": [1.0],
    "sweep_beta": [1.0],
    "sweep_d_z": [4],
    "sweep_k": [1],
    "digits": {"n_train": 80, "n_test": 40, "d_z": 4, "clients": 2},
    "osha": {"d_z": 4, "min_client_rows": 1, "min_sector_rows": 1},
    "distributed": {"enabled": False},
}


@pytest.fixture(scope="module")
def gpp_flow(tmp_path_factory):
    import flows.gpp as fg
    import tasks.stages as ts

    root = make_root(tmp_path_factory.mktemp("gppflow"))
    shutil.copyfile(ROOT / "data/osha_regions.csv", root / "data/osha_regions.csv")
    (root / "params.yaml").write_text(
        yaml.safe_dump(slice_raw("head") | {"gpp": TINY_GPP}, allow_unicode=True), encoding="utf-8"
    )
    calls: list[str] = []
    real = ts.run_stage

    def counted(name, params, r, **kw):
        calls.append(name)
        return real(name, params, r, **kw)

    runs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ts, "run_stage", counted)
        store = tmp_path_factory.mktemp("gpp-store")
        mp.setattr(ts, "store_dir", lambda: store)  # a stage store of its own: no other test's entries
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        for _ in range(2):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = fg.main(["--root", str(root), "--params", "params.yaml"])
            runs.append(SimpleNamespace(rc=rc, out=out.getvalue(), calls=list(calls)))
            calls.clear()
    return root, runs


def test_flow_runs_the_gpp_stages_and_prints_the_report(gpp_flow):
    root, (first, second) = gpp_flow
    assert first.rc == 0, first.out
    # a stage store of its own (the session's holds whatever this process's earlier tests stored): all run
    assert first.calls == ["secret", "stratify", "featurize", "gpp_digits", "gpp_osha", "gpp_release", "gpp_report"]
    assert (root / "reports/gpp/report.md").read_text(encoding="utf-8") in first.out
    assert second.rc == 0 and second.calls == []  # every stage a cache hit


def test_mlflow_gets_aggregates_only(gpp_flow):
    import mlflow

    root, _ = gpp_flow
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")  # no global state changed
    runs = client.search_runs([client.get_experiment_by_name("dprelease").experiment_id])
    parents = [r for r in runs if r.info.run_name == "gpp"]
    children = {r.info.run_name: r for r in runs if r.info.run_name in ("gpp_digits", "gpp_osha")}
    assert parents and set(children) == {"gpp_digits", "gpp_osha"}
    metrics = children["gpp_osha"].data.metrics
    assert "baseline.gpp.centralized.adversary_auc" in metrics
    assert all(0.0 <= v <= 1.0 for k, v in metrics.items() if k.endswith("_auc"))
