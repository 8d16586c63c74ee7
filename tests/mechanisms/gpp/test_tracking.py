"""gpp/tracking: GPP's MLflow record as plain data, from its metrics files — figures keyed by experiment,
method, setting and sweep value; a child only for the datasets that ran; only ``gpp.*`` params."""

from __future__ import annotations

from dprelease.core.config import parse_params
from dprelease.core.io import write_json
from dprelease.mechanisms.gpp.tracking import dataset_metrics, tracked_run

ROWS = {
    "rows": [
        {
            "experiment": "main",
            "method": "gpp",
            "setting": "central",
            "utility_auc": 0.9,
            "adversary_auc": 0.55,
            "utility_accuracy": None,
        },
        {
            "experiment": "sweep_d_z",
            "method": "gpp",
            "setting": "central",
            "d_z": 60,
            "utility_auc": 0.8,
            "adversary_auc": 0.52,
            "utility_accuracy": float("nan"),
        },
    ],
    "communication": {"federated": {"bytes": 1024, "rounds": 5, "note": "text"}, "skipped": "n/a"},
}


def test_dataset_metrics_keys_rows_and_drops_what_is_not_a_number():
    assert dataset_metrics(ROWS) == {
        "main.gpp.central.utility_auc": 0.9,
        "main.gpp.central.adversary_auc": 0.55,
        "sweep_d_z.gpp.central.d_z_60.utility_auc": 0.8,
        "sweep_d_z.gpp.central.d_z_60.adversary_auc": 0.52,
        "comm.federated.bytes": 1024,
        "comm.federated.rounds": 5,
    }


def test_tracked_run_has_a_child_per_dataset_that_ran(tmp_path):
    params = parse_params({})
    write_json(tmp_path / "metrics" / "gpp_digits.json", ROWS)  # gpp_osha did not run
    (tmp_path / "reports" / "gpp").mkdir(parents=True)
    (tmp_path / "reports" / "gpp" / "report.md").write_text("r", encoding="utf-8")
    run = tracked_run(params, tmp_path, {"gpp_digits": 3.5})
    assert [c.name for c in run.children] == ["gpp_digits"]
    assert run.children[0].metrics == dataset_metrics(ROWS)
    assert run.params and all(k.startswith("gpp.") for k in run.params)
    assert run.metrics == {"time_s.gpp_digits": 3.5}
    assert [(p.name, folder) for p, folder in run.artifacts] == [("report.md", "gpp")]
