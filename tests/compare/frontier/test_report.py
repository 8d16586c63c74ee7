"""The frontier's table, recommendation, plot and MLflow record from synthetic point files: the recommendation
reads validation (never test), names only worst-case DP kinds within the budget, and says so when none is."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import make_root, slice_raw

from dprelease.compare.frontier import report, tracking
from dprelease.core.config import parse_params
from dprelease.core.utility.points import Point, read_points, write_points


def _pt(mech, eps, val, test, *, kind="dp_accountant", arm=None, config=None, tuning="private selection", proxy=None):
    return Point(
        mechanism=mech,
        label=mech.upper(),
        kind=kind,
        epsilon=eps,
        delta=1e-4 if eps else None,
        accountant="RDP",
        weighted_f1=[test, test + 0.01, test - 0.01],
        macro_f1=[test / 2] * 3,
        target_epsilon=eps if kind == "dp_accountant" else None,
        validation_weighted_f1=val,
        config=config or {},
        arm=arm,
        tuning=tuning,
        proxy_weighted_f1=proxy,
    )


@pytest.fixture
def root(tmp_path):
    root = make_root(tmp_path)
    # the best TEST point (b at ε 4) is not the best VALIDATION point (a at ε 8): the recommendation must read validation
    write_points(
        root,
        "dpsgd",
        [_pt("a", 8.0, 0.60, 0.45), _pt("a", 16.0, 0.70, 0.60), _pt("b", 4.0, 0.50, 0.55)],
        grid_size=40,
        selection="best on validation",
    )
    write_points(
        root,
        "swag_ppm",
        [
            _pt("ppm", 2.0, 0.99, 0.99, kind="ppm_local_asymptotic", arm="swag_ppm_reweighted"),
            _pt("ppm_u", None, 0.99, 0.99, kind="ppm_uncertified", config={"uncertified_index": 7.5}),
        ],
        grid_size=2,
        selection="all reported",
    )
    write_points(root, "nonprivate", [_pt("nonprivate", None, 0.99, 0.99, kind="none")], grid_size=1, selection="-")
    (root / "reports/privacy").mkdir(parents=True)
    pd.DataFrame(
        [
            {"arm": "swag_ppm_reweighted", "attack": "loss", "epsilon_lower_bound": 9.0},
            {"arm": "swag_ppm_reweighted", "attack": "canary_input", "epsilon_lower_bound": 0.4},
        ]
    ).to_csv(root / "reports/privacy/audit.csv", index=False)
    return root


def _params(**frontier):
    raw = slice_raw("head")
    raw["frontier"] = {"sources": ["dpsgd", "swag_ppm", "nonprivate"], **frontier}
    return parse_params(raw)


def test_an_uncovered_tuning_is_never_recommended_and_the_proxy_score_ranks_first(root):
    """A point chosen on the private validation split (tuning not covered) is never recommended, however good; when
    covered points carry a public-proxy score, the choice among them reads that score, not the validation split."""
    write_points(
        root,
        "dpsgd",
        [
            _pt("a", 8.0, 0.60, 0.45),
            _pt("v", 8.0, 0.95, 0.70, tuning="private validation"),
            _pt("p", 8.0, 0.50, 0.44, tuning="public proxy", proxy=0.52),
            _pt("q", 8.0, 0.58, 0.46, tuning="public proxy", proxy=0.49),
        ],
        grid_size=40,
        selection="-",
    )
    frame = report.table(root, _params())
    assert set(frame["tuning"].dropna()) >= {"private validation", "public proxy", "private selection"}
    rec = report.recommend(frame, budget=8.0)
    assert (
        rec["mechanism"] == "p" and rec["tuning"] == "public proxy" and "public proxy weighted F1 0.520" in rec["line"]
    )
    write_points(root, "dpsgd", [_pt("v", 8.0, 0.95, 0.70, tuning="private validation")], grid_size=40, selection="-")
    assert not report.recommend(report.table(root, _params()), budget=8.0)["found"]
    with pytest.raises(ValueError, match="tuning 'tuned on test'"):
        _pt("x", 8.0, 0.5, 0.5, tuning="tuned on test")


def test_recommendation_reads_validation_within_budget_and_dp_kinds_only(root):
    frame = report.table(root, _params())
    assert len(frame) == 6 and frame["grid_size"].max() == 40
    rec = report.recommend(frame, budget=8.0)
    assert rec["found"] and (rec["mechanism"], rec["epsilon"]) == ("a", 8.0)  # not b (best test), not ppm (not DP)
    assert "at ε ≤ 8 the best defensible release on this data is A at ε 8" in rec["line"]
    assert report.recommend(frame, budget=16.0)["epsilon"] == 16.0
    none = report.recommend(frame, budget=1.0)
    assert not none["found"] and "release nothing" in none["line"]
    assert report.winners(frame) == [
        {"target_epsilon": 4.0, "mechanism": "b", "weighted_f1_mean": pytest.approx(0.55)},
        {"target_epsilon": 8.0, "mechanism": "a", "weighted_f1_mean": pytest.approx(0.45)},
        {"target_epsilon": 16.0, "mechanism": "a", "weighted_f1_mean": pytest.approx(0.60)},
    ]


def test_audit_bound_is_the_strongest_non_heuristic_one_of_the_same_arm(root):
    frame = report.table(root, _params()).set_index("mechanism")
    assert frame.loc["ppm", "audit_bound"] == 0.4  # the loss attack's 9.0 is a heuristic figure, not a bound
    assert pd.isna(frame.loc["a", "audit_bound"]).all()


def test_report_writes_every_file_and_mlflow_gets_a_child_per_point(root):
    params = _params()
    out = report.frontier_report(params, root)
    folder = root / "reports/frontier"
    assert {p.name for p in folder.iterdir()} == {
        "frontier.csv",
        "frontier.png",
        "frontier.svg",
        "report.md",
        "recommendation.json",
    }
    csv = pd.read_csv(folder / "frontier.csv")
    assert list(csv.columns) == report.COLUMNS and len(csv) == 6
    assert out["recommendation"] == json.loads((folder / "recommendation.json").read_text())["line"]
    assert "**Recommendation:**" in (folder / "report.md").read_text()
    assert (folder / "frontier.svg").read_text().lstrip().startswith("<?xml")
    run = tracking.tracked_run(params, root)
    assert len(run.children) == 6
    child = next(c for c in run.children if c.tags["mechanism"] == "a" and c.metrics["epsilon"] == 16.0)
    assert child.params["kind"] == "dp_accountant" and child.metrics["weighted_f1_mean"] == pytest.approx(0.60)
    ppm = next(c for c in run.children if c.tags["mechanism"] == "ppm")
    assert ppm.metrics["epsilon_lb"] == 0.4  # the audit bound under the headline's name
    unc = next(c for c in run.children if c.tags["mechanism"] == "ppm_u")
    assert unc.metrics["uncertified_index"] == 7.5 and "epsilon" not in unc.metrics  # an index is never an ε
    assert "epsilon" not in next(c for c in run.children if c.tags["mechanism"] == "nonprivate").metrics


def test_points_are_validated(tmp_path):
    with pytest.raises(ValueError, match="one weighted and one macro F1 per seed"):
        Point(
            mechanism="x",
            label="x",
            kind="none",
            epsilon=None,
            delta=None,
            accountant="-",
            weighted_f1=[0.1],
            macro_f1=[],
        )
    with pytest.raises(ValueError, match="outside"):
        _pt("x", 1.0, 0.5, 1.5)
    with pytest.raises(ValueError, match="ε must be"):
        _pt("x", -1.0, 0.5, 0.5)
    write_points(tmp_path, "s", [_pt("x", 1.0, 0.5, 0.5)], grid_size=1, selection="-")
    doc, points = read_points(tmp_path / "metrics/frontier/s.json")
    assert doc["grid_size"] == 1 and points[0].weighted_f1 == [0.5, 0.51, 0.49]


def test_unknown_source_is_a_one_line_error():
    from dprelease.compare.frontier.stages import check
    from dprelease.core.errors import ConfigError

    with pytest.raises(ConfigError, match="frontier.sources: unknown nope"):
        check(_params(sources=["nope"]))


def test_make_run_line_needs_a_frontier_of_the_same_data_and_key(root):
    params = _params()
    assert "no frontier for this data yet" in report.recommendation_line(params, root)
    report.frontier_report(params, root)
    assert report.recommendation_line(params, root).startswith("at ε ≤ 8 the best defensible release on this data is A")
    assert report.recommendation_line(_params(budget_epsilon=16.0), root).startswith(
        "at ε ≤ 16 the best defensible release on this data is A at ε 16"
    )  # the budget is read now, not stored
    (root / "metrics").mkdir(exist_ok=True)
    (root / "metrics/data.json").write_text('{"rows": 1}')  # another data set
    assert "computed on other data or another key" in report.recommendation_line(params, root)


def _public(proxy: float, test: float) -> Point:
    return Point(
        mechanism="public_model",
        label="the public model",
        kind="public_only",
        epsilon=0.0,
        delta=None,
        accountant="—",
        weighted_f1=[test],
        macro_f1=[test / 2],
        validation_weighted_f1=test,
        tuning="public proxy",
        proxy_weighted_f1=proxy,
    )


def test_a_dp_point_is_named_only_above_the_public_floor_by_its_seed_spread(root):
    """The public model (ε 0) is the floor: a DP point whose public-proxy gain over it is within its seed spread
    (here 0.01) loses to it; one that clears the spread is named, with its gain over public beside it."""
    dp = [_pt("p", 8.0, 0.50, 0.60, tuning="public proxy", proxy=0.605)]
    write_points(root, "dpsgd", dp, grid_size=40, selection="-")
    write_points(root, "public_only", [_public(0.600, 0.59)], grid_size=3, selection="-")
    params = _params(sources=["dpsgd", "public_only", "nonprivate"])
    frame = report.table(root, params)
    assert frame.loc[frame["mechanism"] == "p", "gain_over_public"].iloc[0] == pytest.approx(0.01)
    rec = report.recommend(frame, budget=8.0)
    assert rec["mechanism"] == "public_model" and rec["epsilon"] == 0.0 and rec["kind"] == "public_only"
    assert "the public model wins" in rec["line"] and "gain +0.005, not above its seed spread 0.010" in rec["line"]
    write_points(root, "public_only", [_public(0.580, 0.57)], grid_size=3, selection="-")
    rec = report.recommend(report.table(root, params), budget=8.0)
    assert rec["mechanism"] == "p" and "gain over public +0.030 on test" in rec["line"]
    assert "WARNING" not in rec["line"]  # the test split agrees: +0.030 is above the seed spread 0.010
    write_points(root, "public_only", [_public(0.580, 0.62)], grid_size=3, selection="-")
    rec = report.recommend(report.table(root, params), budget=8.0)  # the proxy says DP, the test split disagrees
    assert rec["mechanism"] == "p" and "gain over public -0.020 on test (WARNING: on the test split" in rec["line"]
    write_points(root, "dpsgd", [_pt("v", 8.0, 0.9, 0.9, tuning="private validation")], grid_size=40, selection="-")
    rec = report.recommend(report.table(root, params), budget=8.0)  # no covered DP point: the floor stands
    assert rec["mechanism"] == "public_model" and "no DP point on the frontier covers its tuning" in rec["line"]
    report.plot(report.table(root, params), root, budget=8.0)  # ε 0 is drawn as a line, not on the log axis
    assert (root / "frontier.png").stat().st_size > 0
