"""The comparison report (Markdown, CSV tables, per-class figure) and its MLflow logging, on a copy of the head
slice after the arms ran (``arms_run`` in conftest)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import compare_raw, copy_root, run_stages

from dprelease.compare.reports import compare as report
from dprelease.contracts import plugins
from dprelease.core.config import parse_params
from dprelease.core.io import read_json

pytestmark = pytest.mark.slow

OUTPUTS = {"report.md", "table1.csv", "quartiles.csv", "delta_sweep.csv", "per_class_vs_size.png"}
# arms whose guarantee record states an ε (each arm is read from its record; these must be among them)
KNOWN_PRIVATE = {"swag_ppm", "swag_ppm_reweighted", "dpsgd"}


def _guarantee(root, arm: str) -> dict:
    """The arm's guarantee record: what the report must read (never re-derive)."""
    name = "swag_ppm_draw" if arm == "swag_ppm_reweighted" else arm
    return read_json(root / f"metrics/{name}.json")["guarantee"]


def _expected_epsilon(root, arm: str) -> float | None:
    return _guarantee(root, arm)["epsilon"]


def _expected_f1(root, arm: str) -> tuple[float, float]:
    if arm == "swag_ppm_reweighted":
        audit = read_json(root / "metrics/evaluation.json")
        return audit["released_weighted_f1"], audit["released_macro_f1"]
    m = read_json(root / f"metrics/{arm}.json")
    return m["weighted_f1"], m["macro_f1"]


@pytest.fixture
def reported(arms_run, tmp_path):
    """compare_report with every arm, on a private copy of the arms root."""
    root = copy_root(arms_run.root, tmp_path / "root")
    summary = report.compare_report(arms_run.params, root)
    return root, arms_run.params, summary


def test_report_files(reported):
    root, params, summary = reported
    out = root / "reports/compare"
    assert {p.name for p in out.iterdir()} == OUTPUTS
    assert summary == {"arms": list(params.compare.arms), "report": str(out / "report.md")}
    assert not list(out.glob(".*")), "temporary files left behind"


def test_table1_one_row_per_arm_in_order(reported):
    root, params, _ = reported
    t1 = pd.read_csv(root / "reports/compare/table1.csv")
    assert list(t1.columns) == ["model", "epsilon", "delta", "guarantee", "T̂", "weighted F1", "macro F1"]
    assert [m.split(", calibrated")[0].split(" (round")[0] for m in t1["model"]] == [
        plugins.arms()[a].label for a in params.compare.arms
    ]
    for arm, row in zip(params.compare.arms, t1.to_dict("records")):
        eps = _expected_epsilon(root, arm)
        if arm == "nonprivate":
            assert eps is None and math.isnan(row["epsilon"])
        else:
            assert row["epsilon"] == pytest.approx(eps, rel=1e-12), arm
        weighted, macro = _expected_f1(root, arm)
        assert row["weighted F1"] == pytest.approx(weighted, rel=1e-12), arm
        assert row["macro F1"] == pytest.approx(macro, rel=1e-12), arm
    rows = dict(zip(params.compare.arms, t1.to_dict("records")))
    assert rows["swag_ppm_reweighted"]["epsilon"] == _expected_epsilon(root, "swag_ppm_reweighted")
    assert rows["swag_ppm"]["delta"] == rows["swag_ppm_reweighted"]["delta"] == "asymptotic, not quantified"
    assert rows["nonprivate"]["delta"] == "none (not private)" and rows["nonprivate"]["guarantee"] == "none"
    assert float(rows["dpsgd"]["delta"]) == pytest.approx(_guarantee(root, "dpsgd")["delta"], rel=1e-12)
    assert rows["dpsgd"]["guarantee"] == "dp_accountant"
    assert rows["swag_ppm"]["guarantee"] == rows["swag_ppm_reweighted"]["guarantee"] == "ppm_local_asymptotic"


def test_quartiles_and_delta_sweep_tables(reported):
    root, params, _ = reported
    q = pd.read_csv(root / "reports/compare/quartiles.csv")
    assert list(q["model"]) == [plugins.arms()[a].label for a in params.compare.arms]
    assert ((q.drop(columns="model") >= 0) & (q.drop(columns="model") <= 1)).all().all()
    sweep = pd.read_csv(root / "reports/compare/delta_sweep.csv")
    rows = read_json(root / "metrics/dpsgd_sweep.json")["rows"]
    assert list(sweep["delta"]) == pytest.approx(params.dpsgd.delta_sweep)
    assert list(sweep["noise_multiplier"]) == pytest.approx([r["noise_multiplier"] for r in rows])
    assert list(sweep["weighted_f1"]) == pytest.approx([r["weighted_f1"] for r in rows])


def test_report_markdown(reported):
    root, params, _ = reported
    md = (root / "reports/compare/report.md").read_text(encoding="utf-8")
    assert report.CAVEAT in md
    # the caveat says what it must: SWAG-PPM's ε is local, its δ asymptotic; DP-SGD's (ε, δ) is worst case;
    # and the two are not the same guarantee
    caveat = " ".join(report.CAVEAT.split())
    for phrase in ("local", "asymptotic", "DP-SGD's (ε, δ)", "not make them the same guarantee"):
        assert phrase in caveat, phrase
    for arm in params.compare.arms:
        assert f"| {plugins.arms()[arm].label} |" in md, arm
    assert "δ sweep" in md
    assert "![per-class F1](per_class_vs_size.png)" in md


def test_report_figure_is_a_png(reported):
    from PIL import Image

    root, _, _ = reported
    path = root / "reports/compare/per_class_vs_size.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size[0] > 100 and img.size[1] > 100


def test_arms_subset_has_no_delta_sweep(arms_run, tmp_path):
    root = copy_root(arms_run.root, tmp_path / "root")
    params = parse_params(compare_raw(compare__arms=["nonprivate", "swag_ppm_reweighted"]))
    report.compare_report(params, root)
    out = root / "reports/compare"
    assert {p.name for p in out.iterdir()} == OUTPUTS - {"delta_sweep.csv"}
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "δ sweep" not in md and "Table 4" not in md
    t1 = pd.read_csv(out / "table1.csv")
    assert list(t1["model"]) == [
        "Non-private",
        f"SWAG-PPM release (round {_guarantee(root, 'swag_ppm_reweighted')['quantities']['round']})",
    ]
    assert report.CAVEAT in md


def test_table_order_follows_params(arms_run, tmp_path):
    root = copy_root(arms_run.root, tmp_path / "root")
    arms = ["dpsgd", "swag_ppm_reweighted", "nonprivate"]
    report.compare_report(parse_params(compare_raw(compare__arms=arms)), root)
    t1 = pd.read_csv(root / "reports/compare/table1.csv")
    assert [m.split(" (round")[0] for m in t1["model"]] == [plugins.arms()[a].label for a in arms]
    assert (root / "reports/compare/delta_sweep.csv").is_file()


def test_rerun_with_fewer_arms_leaves_no_stale_sweep(reported):
    """The report folder is the stage's output: re-running without DP-SGD must not keep the old δ-sweep table
    (the Prefect flow does not clear outputs, and log_compare_run logs every file there)."""
    root, _, _ = reported
    report.compare_report(parse_params(compare_raw(compare__arms=["nonprivate", "swag_ppm_reweighted"])), root)
    assert not (root / "reports/compare/delta_sweep.csv").exists()


def test_empty_delta_sweep(arms_run, tmp_path):
    """``dpsgd.delta_sweep: []`` is either rejected by the config or gives a report without the sweep table."""
    from dprelease.core.config import ConfigError

    try:
        params = parse_params(compare_raw(dpsgd__delta_sweep=[]))
    except ConfigError as err:
        assert "dpsgd.delta_sweep" in str(err)
        return
    root = copy_root(arms_run.root, tmp_path / "root")
    run_stages(params, root, ["dpsgd_sweep", "compare_report"])
    assert "δ sweep" not in (root / "reports/compare/report.md").read_text(encoding="utf-8")


# MLflow ----------------------------------------------------------------------------------------------------------
@pytest.fixture
def logged(reported, monkeypatch):
    import mlflow

    from dprelease.pipeline.tracking import tracking_uri
    from dprelease.pipeline.tracking_experiments import log_compare_run

    root, params, _ = reported
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    params = parse_params(compare_raw(tracking={"mlflow_uri": "sqlite:///mlflow.db", "experiment": "compare-test"}))
    run_id = log_compare_run(params, root)
    uri = tracking_uri(params, root)
    assert uri.startswith("sqlite:///") and (root / "mlflow.db").is_file()
    return root, params, run_id, mlflow.MlflowClient(tracking_uri=uri)


def test_compare_run_has_one_child_per_arm(logged):
    import mlflow

    root, params, parent_id, client = logged
    exp = client.get_experiment_by_name("compare-test")
    mlflow.set_tracking_uri(client.tracking_uri)
    children = mlflow.search_runs(
        experiment_ids=[exp.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
        output_format="list",
    )
    everything = mlflow.search_runs(experiment_ids=[exp.experiment_id], output_format="list")
    assert len(everything) == 1 + len(params.compare.arms)
    assert sorted(c.data.tags["arm"] for c in children) == sorted(params.compare.arms)
    assert "mlflow.parentRunId" not in client.get_run(parent_id).data.tags
    for child in children:
        arm, metrics = child.data.tags["arm"], child.data.metrics
        assert child.info.run_name == plugins.arms()[arm].label
        weighted, macro = _expected_f1(root, arm)
        assert metrics["weighted_f1"] == pytest.approx(weighted)
        assert metrics["macro_f1"] == pytest.approx(macro)
        expected = _expected_epsilon(root, arm)  # the arm's own guarantee record: an ε, or none to log
        if expected is not None:
            assert metrics["epsilon"] == pytest.approx(expected), arm
        else:
            assert "epsilon" not in metrics, arm
        if arm == "dpsgd":
            dp = _guarantee(root, "dpsgd")
            assert metrics["noise_multiplier"] == pytest.approx(dp["quantities"]["noise_multiplier"])
            assert metrics["target_epsilon"] == pytest.approx(dp["quantities"]["target_epsilon"])
            assert metrics["delta"] == pytest.approx(dp["delta"])
        assert any("quartile" in k for k in metrics), arm
        assert child.data.tags["delta"] and child.data.tags["guarantee"] == _guarantee(root, arm)["kind"]
    with_epsilon = {c.data.tags["arm"] for c in children if "epsilon" in c.data.metrics}
    assert KNOWN_PRIVATE & set(params.compare.arms) <= with_epsilon and "nonprivate" not in with_epsilon


def test_compare_run_params_and_guarantees_come_from_the_arms(logged):
    """The parent run logs the settings each compared arm declares it reads, and each arm's guarantee kind."""
    root, params, parent_id, client = logged
    run = client.get_run(parent_id)
    logged_keys = set(run.data.params)
    for arm in params.compare.arms:
        for key in plugins.arms()[arm].params:
            assert any(k.startswith(f"{key}.") for k in logged_keys), (arm, key)
        assert f"{plugins.arms()[arm].label}: {_guarantee(root, arm)['kind']}" in run.data.tags["guarantees"]
    assert not any(k.startswith("frontier.") for k in logged_keys)  # no arm of the comparison reads it


def test_compare_run_logs_no_per_record_data(logged):
    root, params, parent_id, client = logged
    top = client.list_artifacts(parent_id)
    assert [a.path for a in top] == ["compare"] and top[0].is_dir
    files = {a.path for a in client.list_artifacts(parent_id, "compare")}
    assert files == {f"compare/{name}" for name in OUTPUTS}
    exp = client.get_experiment_by_name("compare-test")
    runs = client.search_runs([exp.experiment_id])
    private = ("weights", "risk", "moments", "theta", "record", "safetensors", ".npy", "train.csv", "test.csv")
    for run in runs:
        if run.info.run_id != parent_id:  # a child run logs only its arm's per-class F1 table (aggregates)
            assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["per_class_f1.csv"]
        for key, value in run.data.params.items():
            assert len(str(value)) < 200, key  # scalars and short lists only
            assert not key.startswith(("data.", "artifacts", "release", "tracking.")), key
        for key in run.data.metrics:
            assert not any(word in key for word in private), key
    for path in files:
        assert not any(word in path for word in private), path
    # no narrative of the training data appears in any logged file
    texts = pd.read_csv(root / f"{params.artifacts}/data/train.csv", dtype=str, keep_default_na=False)["text"]
    local = client.download_artifacts(parent_id, "compare", str(root / "downloaded"))
    logged_text = "".join(
        p.read_text(encoding="utf-8")
        for p in sorted(root.joinpath("downloaded", "compare").glob("*"))
        if p.suffix in {".md", ".csv"}
    )
    assert local and logged_text
    assert not [t for t in texts if t and t in logged_text]
