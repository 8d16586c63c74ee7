"""The frontier flow on a copy of the head slice's release: its plan holds every source's stage and the report,
each source writes valid points at the declared levels, and the report, plot and recommendation come out."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import copy_root, run_stages, slice_raw

from dprelease.contracts import plugins
from dprelease.core.config import parse_params
from dprelease.core.io import read_json
from dprelease.core.utility.points import points_file, read_points
from dprelease.pipeline import plan as pipeline
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

# DP-SGD: full batch and Poisson batches of 2 of the slice's 24 records (q ≈ 0.08: Opacus's RDP series at
# fractional orders converge fast; at q = 1/3, batch 8, calibrating σ took 25 s of the plan's 30)
FRONTIER = {
    "epsilons": [2.0, 8.0],
    "seeds": 3,
    "budget_epsilon": 8.0,
}
GRID = {  # dpsgd.grid
    "batch_sizes": [0, 2],
    "epochs": [3],
    "max_grad_norms": [1.0],
    "sgd_lrs": [1.0, 10.0],
    "adamw_lrs": [0.01],
}
PPM_TRACE = {"temperatures": [1.0, 2.0], "c": [1.0]}  # ppm.frontier
# the linear PPM's chains, short (its own tests check the sampler): a point per declared configuration
LINEAR_PPM = {
    "sampler": {"chains": 2, "warmup": 25, "draws": 25},
    "diagnostics": {"rhat_max": 10.0, "ess_min": 1.0, "divergences_max": 1000, "temperature_tolerance": 10.0},
    "frontier": {"risk": [{"prior_precision": 100.0, "temperature": 1.0}], "censored_epsilons": [8.0]},
}


@pytest.fixture(scope="module")
def frontier_run(head_run, tmp_path_factory):
    raw = slice_raw("head")
    raw["frontier"] = FRONTIER
    raw["dpsgd"] = {**raw.get("dpsgd", {}), "grid": GRID}
    raw["ppm"] = {**raw.get("ppm", {}), "frontier": PPM_TRACE}
    raw["linear_ppm"] = LINEAR_PPM
    params = parse_params(raw)
    root = copy_root(head_run.root, tmp_path_factory.mktemp("frontier"))
    plan = pipeline.plan(registry.stages(params), params, targets=("frontier_report",))
    run_stages(params, root, plan.order)
    return params, root, plan


def test_plan_holds_every_source_and_the_report(frontier_run):
    params, _, plan = frontier_run
    sources = plugins.frontier_sources()
    assert {"nonprivate", "swag_ppm", "dpsgd", "ncm", "linear_ppm", "public_only"} <= set(
        sources
    )  # the packages that name one
    assert set(sources.values()) <= set(plan.order) and plan.order[-1] == "frontier_report"
    assert registry.flows()["frontier"].targets == ("frontier_report",)


def test_each_source_writes_points_at_the_declared_levels(frontier_run):
    params, root, _ = frontier_run
    doc, dpsgd = read_points(points_file(root, "dpsgd"))
    assert doc["grid_size"] == 2 * 1 * 1 * 3 and "validation" in doc["selection"]
    by = {(p.mechanism, p.target_epsilon): p for p in dpsgd}
    # the public proxy always exists now (proxy.until is required): its proxy-tuned series beside the validation ones
    # and the series warm-started from the public model (ranked in the public simulation, the first accountant)
    assert set(by) == {
        (f"dpsgd_linear_{a}", e)
        for a in ("rdp", "prv", "proxy_rdp", "proxy_prv", "private_selection", "proxy_warm_rdp")
        for e in (2.0, 8.0)
    }
    warm = by[("dpsgd_linear_proxy_warm_rdp", 8.0)]
    assert warm.tuning == "public proxy" and warm.config["public_l2"] in params.public_model.l2
    assert warm.epsilon <= 8.0 and 0 < warm.config["public_proxy_score"] <= 1
    private = by[("dpsgd_linear_private_selection", 8.0)]
    assert private.epsilon <= 8.0 and private.config["per_run_epsilon"] < 8.0  # the search's cost is inside ε
    for eps in (2.0, 8.0):
        rdp, prv = by[("dpsgd_linear_rdp", eps)], by[("dpsgd_linear_prv", eps)]
        assert rdp.epsilon <= eps and prv.epsilon <= eps and rdp.kind == prv.kind == "dp_accountant"
        # side by side: the same chosen configuration, σ from each accountant (PRV is tighter: less noise)
        assert {k: v for k, v in rdp.config.items() if k != "noise_multiplier"} == {
            k: v for k, v in prv.config.items() if k != "noise_multiplier"
        }
        assert prv.config["noise_multiplier"] < rdp.config["noise_multiplier"]
        assert len(rdp.weighted_f1) == params.frontier.seeds
    _, ncm = read_points(points_file(root, "ncm"))
    plain = [p for p in ncm if p.mechanism == "dp_ncm"]  # and its proxy-centred variant at each level
    assert [p.epsilon for p in plain] == [2.0, 8.0] and plain[0].config["sigma"] > plain[1].config["sigma"]
    assert {p.mechanism for p in ncm} == {"dp_ncm", "dp_ncm_proxy_centred"}
    _, (floor,) = read_points(points_file(root, "public_only"))  # the public model: ε 0, the floor
    assert floor.kind == "public_only" and floor.epsilon == 0.0
    assert floor.proxy_weighted_f1 == warm.config["public_proxy_score"]  # the same simulation's public model
    forward = read_json(root / "metrics/forward.json")  # forward in time: the public model and both series per ε
    assert forward["forward_from"] == params.frontier.forward_from and "internal" in forward
    models = {(r["model"], r["epsilon"]) for r in forward["rows"]}
    assert ("the public model (reads no private report)", 0.0) in models
    assert {("DP-SGD proxy-tuned, from zero", 8.0), ("DP-SGD proxy-tuned, from the public model", 8.0)} <= models
    assert all(len(r["forward_weighted_f1"]) == (1 if r["epsilon"] == 0 else 3) for r in forward["rows"])
    _, (ceiling,) = read_points(points_file(root, "nonprivate"))
    assert ceiling.kind == "none" and ceiling.epsilon is None and len(ceiling.weighted_f1) == 3
    _, ppm = read_points(points_file(root, "swag_ppm"))
    assert {p.config["temperature"] for p in ppm} == {1.0, 2.0}


def test_report_table_and_recommendation(frontier_run):
    params, root, _ = frontier_run
    folder = root / "reports/frontier"
    frame = pd.read_csv(folder / "frontier.csv")
    assert set(frame["source"]) == set(plugins.frontier_sources())  # every source's points are in the report
    public = frame["kind"] == "public_only"
    assert (frame.loc[~public, "seeds"] >= 3).all() and (frame.loc[public, "seeds"] == 1).all()  # L-BFGS: one fit
    assert frame.loc[~public & frame["weighted_f1_mean"].notna(), "gain_over_public"].notna().all()
    assert (folder / "frontier.png").stat().st_size > 0 and (folder / "frontier.svg").stat().st_size > 0
    from dprelease.compare.frontier.report import recommendation_line

    line = recommendation_line(params, root)
    # a DP point, or the public model when no DP point beats it by more than its seed spread (on the public proxy)
    assert line.startswith(("at ε ≤ 8 the best defensible release on this data is ", "at ε ≤ 8 the public model wins"))
    assert "SWAG-PPM" not in line and "Non-private" not in line  # only worst-case DP kinds are recommended


def test_the_same_key_reproduces_the_points(frontier_run):
    params, root, _ = frontier_run
    before = points_file(root, "ncm").read_text()
    run_stages(params, root, ["frontier_ncm"])
    assert points_file(root, "ncm").read_text() == before
