"""dprelease.compare.reports.tune: the tuning report (Markdown, CSV, JSON and the grid figure) from a
hand-made result shaped as ``flows/tune.py`` builds it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dprelease.compare.reports.tune import write_tune_report
from dprelease.core.config import parse_params
from dprelease.core.io import read_json

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQ = {"target_epsilon": 10.0, "max_drop_weighted": 0.1, "max_drop_macro": 0.2}
BASE = {"weighted_f1": 0.8, "macro_f1": 0.5}


def _cell(c, e, eps, wf1, mf1, verdict):
    return {"c": c, "epochs": e, "epsilon": eps, "weighted_f1": wf1, "macro_f1": mf1, "verdict": verdict}


def _grid_result(chosen: bool = True) -> dict:
    trail = [
        _cell(1.0, 7, 12.5, 0.78, 0.45, "ok"),
        _cell(1.0, 10, 14.0, 0.79, 0.47, "overfit"),
        _cell(0.85, 7, 9.25, 0.74, 0.41, "ok"),
        _cell(0.85, 10, 11.0, 0.70, 0.35, "underfit"),
    ]
    return {
        "mode": "grid",
        "requirements": dict(REQ),
        "baseline": dict(BASE),
        "trail": trail,
        "chosen": dict(trail[2]) if chosen else None,
    }


@pytest.fixture
def params():
    return parse_params({"tune": {"target_epsilon": 10.0, "max_drop_weighted": 0.1, "max_drop_macro": 0.2}})


def test_grid_report_files(tmp_path, params):
    result = _grid_result()
    out = write_tune_report(params, tmp_path, result)
    assert out == tmp_path / "reports" / "tune"
    assert sorted(p.name for p in out.iterdir()) == ["grid.csv", "grid.json", "grid.md", "grid.png"]
    assert (out / "grid.png").read_bytes()[:8] == PNG_MAGIC
    assert read_json(out / "grid.json") == result
    frame = pd.read_csv(out / "grid.csv")
    assert list(frame.columns) == ["c", "epochs", "epsilon", "weighted_f1", "macro_f1", "verdict"]
    assert frame.to_dict("records") == result["trail"]


def test_grid_markdown_states_requirements_and_choice(tmp_path, params):
    out = write_tune_report(params, tmp_path, _grid_result())
    md = (out / "grid.md").read_text(encoding="utf-8")
    lines = md.splitlines()
    assert lines[0] == "# SWAG-PPM tuning (grid)"
    req = next(line for line in lines if line.startswith("Requirements:"))
    assert "ε < 10;" in req
    assert "weighted F1 ≥ 0.720" in req  # (1 - 0.1) · 0.8
    assert "macro F1 ≥ 0.400" in req  # (1 - 0.2) · 0.5
    assert "10% / 20%" in req and "0.800 / 0.500" in req
    # the table: header, separator and one row per cell
    header = "| c | epochs | epsilon | weighted_f1 | macro_f1 | verdict |"
    i = lines.index(header)
    assert lines[i + 1] == "|---|---|---|---|---|---|"
    assert lines[i + 2 : i + 6] == [
        "| 1.000 | 7 | 12.500 | 0.780 | 0.450 | ok |",
        "| 1.000 | 10 | 14.000 | 0.790 | 0.470 | overfit |",
        "| 0.850 | 7 | 9.250 | 0.740 | 0.410 | ok |",
        "| 0.850 | 10 | 11.000 | 0.700 | 0.350 | underfit |",
    ]
    assert "Chosen: c = 0.85, FT epochs = 7 (ε 9.250, F1 0.740 / 0.410)" in lines
    assert "none" not in md.lower().split("chosen:")[1]
    assert "![grid](grid.png)" in lines


def test_no_choice_says_none_met_both_requirements(tmp_path, params):
    out = write_tune_report(params, tmp_path, _grid_result(chosen=False))
    md = (out / "grid.md").read_text(encoding="utf-8")
    assert "Chosen: none — no run met both requirements." in md.splitlines()
    assert "FT epochs =" not in md
    assert read_json(out / "grid.json")["chosen"] is None
    assert (out / "grid.png").read_bytes()[:8] == PNG_MAGIC


def test_search_mode_with_decision_trail(tmp_path, params):
    trail = [
        _cell(1.0, 7, 12.0, 0.75, 0.42, "underfit") | {"decision": "more_epochs", "reason": "under-fit"},
        _cell(1.0, 10, 9.0, 0.76, 0.44, "ok") | {"decision": "accept", "reason": "both requirements met"},
    ]
    result = {
        "mode": "search",
        "requirements": dict(REQ),
        "baseline": dict(BASE),
        "trail": trail,
        "chosen": {k: trail[1][k] for k in ("c", "epochs", "epsilon", "weighted_f1", "macro_f1", "verdict")},
    }
    out = write_tune_report(params, tmp_path, result)
    assert sorted(p.name for p in out.iterdir()) == ["search.csv", "search.json", "search.md", "search.png"]
    md = (out / "search.md").read_text(encoding="utf-8")
    assert md.splitlines()[0] == "# SWAG-PPM tuning (search)"
    assert "| 1.000 | 10 | 9.000 | 0.760 | 0.440 | ok | accept | both requirements met |" in md
    assert "Chosen: c = 1, FT epochs = 10 (ε 9.000, F1 0.760 / 0.440)" in md
    assert json.loads((out / "search.json").read_text(encoding="utf-8"))["trail"][0]["decision"] == "more_epochs"
    # a second mode's report sits beside the first
    write_tune_report(params, tmp_path, _grid_result())
    assert {p.stem for p in out.iterdir()} == {"search", "grid"}
