"""Stage ``audit`` (swag_ppm/evaluate.py): the released draw's utility evaluation on the head and full-tiny
slices — F1s in [0, 1] over the configured draws, one per-class row per class, the quartile table and the plots."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import SliceRun

from dprelease.core.io import read_json
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(params=["head", "full"])
def run(request) -> SliceRun:
    return request.getfixturevalue(f"{request.param}_run")


def _metrics(run: SliceRun, name: str) -> dict:
    return read_json(run.path(f"metrics/{name}.json"))


def test_audit_metrics_in_unit_interval(run):
    audit = _metrics(run, "evaluation")
    assert audit["draws"] == run.params.evaluation.draws
    assert audit["verdict"] in {"underfit", "overfit", "ok"}
    values = {k: v for k, v in audit.items() if k not in {"draws", "verdict", "released_round"}}
    assert values and all(0.0 <= v <= 1.0 for v in values.values()), values
    assert audit == run.summaries["evaluate"]


def test_per_class_f1_one_row_per_class(run):
    labels = read_json(run.path(f"{run.params.artifacts}/data/labels.json"))
    tables = run.path(registry.get(run.params, "evaluate").outs[0])  # the evaluate stage's report folder
    per_class = pd.read_csv(tables / "per_class_f1.csv", dtype={"code": str})
    assert len(per_class) == len(labels["codes"])
    assert sorted(per_class["code"]) == sorted(labels["codes"])
    assert per_class["f1"].between(0, 1).all()
    assert (tables / "quartiles.csv").is_file()


def test_plots_are_pngs(run):
    plots = registry.get(run.params, "evaluate").plots
    assert {
        "plots/max_delta.png",
        "plots/f1_violin.png",
        "plots/loss_curves.png",
        "plots/confusion_top_classes.png",
    } <= set(plots)
    for rel in plots:
        data = run.path(rel).read_bytes()
        assert data[:8] == PNG_MAGIC, rel
        assert len(data) > 1000, rel


def test_its_results_section_is_written_inside_the_stage_s_report_folder(run):
    from dprelease.mechanisms.swag_ppm.params import RESULTS_SECTION

    folder = registry.get(run.params, "evaluate").outs[0]
    assert RESULTS_SECTION.path.startswith(folder + "/")  # inside its declared outs: DVC's outs unchanged
    text = run.path(RESULTS_SECTION.path).read_text(encoding="utf-8")
    assert text.startswith(RESULTS_SECTION.heading)
    f1 = _metrics(run, "evaluation")["released_weighted_f1"]
    assert f"| weighted / macro F1, its draw (test split) | {f1:.4f} / " in text
    # the selection row comes from the declared settings, whatever order the stages ran in
    on = run.params.selection.enabled and run.params.data.validation_size > 0
    assert ("| private selection | on |" if on else "| private selection | off |") in text
