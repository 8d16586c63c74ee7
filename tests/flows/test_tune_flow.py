"""The tuning flow end to end on a tiny head slice: a 2 × 2 grid, then a budget-2 search in the same root,
sharing stages through the stage store; bad tuning input exits 2 with one line on stderr.

Stage executions are counted by wrapping ``tasks.stages.run_stage`` (what the cached task calls when the
stage store misses), as in test_flow.py."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import GATED, make_root, slice_raw

from dprelease.contracts import source
from dprelease.core.io import read_json

pytestmark = pytest.mark.slow

GRID_C, GRID_EPOCHS = [1.0, 0.7], [2, 3]
TUNE = {
    "grid_c": GRID_C,
    "grid_epochs": GRID_EPOCHS,
    "target_epsilon": 100.0,
    "max_drop_weighted": 0.9,
    "max_drop_macro": 0.9,
    "start_epochs": 2,
    "epoch_step": 1,
}


def _raw() -> dict:
    return slice_raw(**GATED, ppm__draws=6, ppm__draw_batch=6, nonprivate__epochs=2, tune=TUNE)


@pytest.fixture(scope="module")
def tune_env(tmp_path_factory):
    """flows.tune with counted stages and a frozen code version (others may edit the source meanwhile)."""
    import flows.tune as ft
    import tasks.stages as ts

    calls: list[str] = []
    real = ts.run_stage

    def counted(name, params, root, **kw):
        calls.append(name)
        return real(name, params, root, **kw)

    root = make_root(tmp_path_factory.mktemp("tune"))
    (root / "params.yaml").write_text(yaml.safe_dump(_raw(), sort_keys=False), encoding="utf-8")
    frozen = source.code_hash(["."])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ts, "run_stage", counted)
        mp.setattr(source, "code_hash", lambda paths: frozen)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield SimpleNamespace(main=ft.main, root=root, calls=calls)


@pytest.fixture(scope="module")
def grid(tune_env):
    tune_env.calls.clear()
    rc = tune_env.main(["--root", str(tune_env.root), "--mode", "grid", "--no-track"])
    return SimpleNamespace(rc=rc, calls=list(tune_env.calls), out=tune_env.root / "reports" / "tune")


def test_grid_runs_and_writes_the_report(grid):
    assert grid.rc == 0
    for ext in ("md", "csv", "json", "png"):
        assert (grid.out / f"grid.{ext}").is_file() and (grid.out / f"grid.{ext}").stat().st_size > 0, ext
    result = read_json(grid.out / "grid.json")
    assert result["mode"] == "grid"
    cells = {(row["c"], row["epochs"]) for row in result["trail"]}
    assert len(result["trail"]) == 4 and cells == set(itertools.product(GRID_C, GRID_EPOCHS))
    for row in result["trail"]:
        assert row["verdict"] in ("underfit", "overfit", "ok")
        assert row["epsilon"] > 0 and 0 <= row["macro_f1"] <= 1 and 0 <= row["weighted_f1"] <= 1
    chosen = result["chosen"]
    assert chosen is not None and chosen in result["trail"]
    assert result["requirements"]["target_epsilon"] == 100.0
    assert set(result["baseline"]) == {"weighted_f1", "macro_f1"}
    assert len(pd.read_csv(grid.out / "grid.csv")) == 4
    md = (grid.out / "grid.md").read_text(encoding="utf-8")
    assert f"Chosen: c = {chosen['c']:g}, FT epochs = {chosen['epochs']}" in md
    assert "![grid](grid.png)" in md


def test_the_grid_is_tracked_as_a_parent_run_and_one_child_per_cell(grid, tune_env):
    """The search's MLflow record is declared by the plug-in (``Search.track``) and logged by the runtime."""
    import mlflow

    from dprelease.core.config import load_params
    from dprelease.pipeline import registry
    from dprelease.pipeline.tracking_experiments import log_tracked

    result = read_json(grid.out / "grid.json")
    p = load_params(tune_env.root / "params.yaml")
    record = registry.flows()["tune"].search.track(p, tune_env.root, result)
    assert [c.name for c in record.children] == [f"c={r['c']:g} FT={r['epochs']}" for r in result["trail"]]
    assert record.params["chosen_c"] == result["chosen"]["c"] and record.params["tune.budget"] == p.tune.budget
    assert {folder for _, folder in record.artifacts} == {"tune"} and len(
        record.artifacts
    ) == 4  # grid.{md,csv,json,png}
    run_id = log_tracked(p, tune_env.root, record)
    client = mlflow.MlflowClient(tracking_uri=mlflow.get_tracking_uri())
    assert client.get_run(run_id).data.metrics["baseline_weighted_f1"] == result["baseline"]["weighted_f1"]


def test_grid_cells_are_full_runs_with_their_c_and_epochs(grid, tune_env):
    for c, e in itertools.product(GRID_C, GRID_EPOCHS):
        where = tune_env.root / "runs" / "tune" / f"c{c:g}_ft{e}"
        rel = read_json(where / "release" / "release.json")
        assert rel["c"] == c
        audit = read_json(where / "metrics" / "evaluation.json")
        assert audit["verdict"] in ("underfit", "overfit", "ok")
        row = next(r for r in read_json(grid.out / "grid.json")["trail"] if (r["c"], r["epochs"]) == (c, e))
        assert row["epsilon"] == pytest.approx(
            read_json(where / "metrics" / "swag_ppm_draw.json")["guarantee"]["epsilon"]
        )
        assert row["macro_f1"] == pytest.approx(audit["macro_f1_mean"])


def test_grid_shares_stages_between_cells(grid):
    counts = {name: grid.calls.count(name) for name in set(grid.calls)}
    # the split and the embeddings: once for baseline + all cells (0 if another test already stored them)
    assert counts.get("stratify", 0) <= 1, counts
    assert counts.get("featurize", 0) <= 1, counts
    assert counts.get("nonprivate", 0) <= 1, counts
    # round 1 depends on the epochs, not on c
    assert counts.get("finetune_r1", 0) <= len(GRID_EPOCHS), counts
    assert counts.get("swag_r1", 0) <= len(GRID_EPOCHS), counts
    # everything else at most once per cell
    assert max(counts.values()) <= len(GRID_C) * len(GRID_EPOCHS), counts
    assert counts.get("draw", 0) == len(GRID_C) * len(GRID_EPOCHS), counts


def test_search_with_budget_two(grid, tune_env):
    tune_env.calls.clear()
    rc = tune_env.main(["--root", str(tune_env.root), "--mode", "search", "--no-track", "--set", "tune.budget=2"])
    assert rc == 0
    out = tune_env.root / "reports" / "tune"
    for ext in ("md", "csv", "json", "png"):
        assert (out / f"search.{ext}").is_file(), ext
    result = read_json(out / "search.json")
    assert 1 <= len(result["trail"]) <= 2
    first = result["trail"][0]
    assert (first["c"], first["epochs"]) == (1.0, 2)  # tune.start_c, tune.start_epochs
    for row in result["trail"]:
        assert row["decision"] in ("accept", "more_epochs", "fewer_epochs", "lower_c", "stop") and row["reason"]
    last = result["trail"][-1]
    if last["decision"] == "accept":
        assert result["chosen"] == {k: v for k, v in last.items() if k not in ("decision", "reason")}
    else:
        assert result["chosen"] is None
        if len(result["trail"]) == 2 and last["decision"] != "stop":
            assert "budget 2 spent" in last["reason"]
    # the first search cell is the grid's (1.0, 2): nothing of it is recomputed
    assert "stratify" not in tune_env.calls and "finetune_r1" not in tune_env.calls


def test_search_spends_its_budget_when_privacy_is_unreachable(grid, tune_env):
    rc = tune_env.main(
        [
            "--root",
            str(tune_env.root),
            "--mode",
            "search",
            "--no-track",
            "--set",
            "tune.budget=2",
            "--set",
            "tune.target_epsilon=0.001",
        ]
    )
    assert rc == 0
    result = read_json(tune_env.root / "reports" / "tune" / "search.json")
    trail = result["trail"]
    assert result["chosen"] is None
    assert 1 <= len(trail) <= 2 and all(row["decision"] != "accept" for row in trail)
    if trail[-1]["decision"] != "stop":
        assert len(trail) == 2 and trail[-1]["reason"].endswith("(run budget 2 spent)")
    assert "Chosen: none" in (tune_env.root / "reports" / "tune" / "search.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "setting, key",
    [
        ("tune.target_epsilon=0", "tune.target_epsilon"),
        ("tune.grid_c=[]", "tune.grid_c"),
        ("tune.budget=0", "tune.budget"),
        ("tune.max_drop_macro=1.5", "tune.max_drop_macro"),
    ],
)
def test_bad_input_exits_2_with_one_line(tune_env, capsys, setting, key):
    capsys.readouterr()
    tune_env.calls.clear()
    rc = tune_env.main(["--root", str(tune_env.root), "--mode", "grid", "--no-track", "--set", setting])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dprelease: error:") and key in lines[0], captured.err
    assert captured.out == ""
    assert tune_env.calls == []


def test_missing_data_exits_2(tune_env, capsys, tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_raw()), encoding="utf-8")
    capsys.readouterr()
    rc = tune_env.main(["--root", str(tmp_path), "--mode", "grid", "--no-track"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "data.path" in err[0]
    assert not Path(tmp_path / "reports").exists()
