"""reports/gpp from metrics files: table columns, tables per dataset, missing inputs, honest claims."""

import pandas as pd

from dprelease.core.config import parse_params
from dprelease.core.io import write_json
from dprelease.mechanisms.gpp.report import COLUMNS, write_report


def _row(method, experiment="baseline", setting="centralized", **kw):
    return {
        "dataset": "digits",
        "experiment": experiment,
        "method": method,
        "setting": setting,
        "clients": 1,
        "beta": 1.0,
        "d_z": 8,
        "k": 2,
        "epochs": 3,
        "utility_auc": 0.9,
        "utility_accuracy": 0.5,
        "adversary_auc": 0.55,
        **kw,
    }


def test_report_from_digits_only(tmp_path):
    rows = [
        _row("noprivacy"),
        _row("gpp"),
        _row("gpp", "sweep_beta", beta=0.5),
        _row("gpp", "distributed", "distributed", clients=5),
    ]
    comm = {
        "distributed": {
            "clients": 5,
            "rounds": 9,
            "bytes_up_per_round": 10,
            "bytes_down_per_round": 20,
            "fedavg_bytes_per_round": 900,
            "engine_overhead_s": 1.0,
            "train_s": 2.0,
        }
    }
    write_json(tmp_path / "metrics" / "gpp_digits.json", {"rows": rows, "communication": comm})
    out = write_report(parse_params({}), tmp_path)
    assert out == {"rows": 4}
    table = pd.read_csv(tmp_path / "reports/gpp/table.csv")
    assert list(table.columns) == COLUMNS
    report = (tmp_path / "reports/gpp/report.md").read_text()
    assert "No-Privacy" in report and "centralized vs distributed" in report
    assert "GPP vs No-Privacy: adversary AUC +0.000, utility AUC +0.000" in report
    assert "900" in report and "no differential-privacy ε" in report and "beta sweep" in report
    section = (tmp_path / "reports/gpp/section.md").read_text()  # its section of docs/results.md
    assert section.startswith("## Gaussian Privacy Protector (`make gpp`)\n") and "| dataset | method |" in section
