"""dprelease.pipeline.plan: a flow's plan from declared deps and outs (which stages, order, waits)."""

from __future__ import annotations

import pytest

from dprelease.contracts.stage import Stage
from dprelease.core.config import ConfigError, parse_params
from dprelease.core.data import stages as data_stages
from dprelease.pipeline import plan as pipeline
from dprelease.pipeline import registry

P = parse_params({})


def _s(name, deps, outs, **kw) -> Stage:
    return Stage(name=name, run=data_stages.stratify, params=[], deps=deps, outs=outs, **kw)


TOY = [
    _s("a", [], ["x/a"]),
    _s("b", ["x/a"], ["x/b"]),
    _s("c", ["x/a/file.npy"], ["x/c"], group="g"),
    _s("d", ["x/b", "x/c"], ["x/d"], group="g"),
    _s("e", [], ["x/e"], group="other"),
    _s("f", ["x/d"], ["x/f"], evidence=["x/e"]),
    _s("off", ["x/a"], ["x/off"], group="g", when=lambda p: False),
]


def test_producers_are_pulled_in_and_order_follows_the_graph():
    plan = pipeline.plan(TOY, P, groups=("g",))
    assert plan.order == ["a", "b", "c", "d"]  # e (other group), f (not needed), off (inactive) left out
    assert plan.waits == {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}  # c reads a file inside a's folder


def test_evidence_orders_but_never_pulls_in():
    assert "e" not in pipeline.plan(TOY, P, targets=("f",)).order
    plan = pipeline.plan(TOY, P, targets=("f", "e"))
    assert plan.waits["f"] == {"d", "e"} and plan.order.index("e") < plan.order.index("f")


def test_then_runs_last_after_everything_planned():
    plan = pipeline.plan(TOY, P, targets=("e",), then=("b",))
    assert plan.order[-1] == "b" and plan.waits["b"] == {"a", "e"}


def test_unknown_stage_and_cycle_are_one_line_errors():
    with pytest.raises(ConfigError, match="unknown stage"):
        pipeline.plan(TOY, P, targets=("nope",))
    loop = [_s("p", ["y/q"], ["y/p"]), _s("q", ["y/p"], ["y/q"])]
    with pytest.raises(ConfigError, match="cycle"):
        pipeline.plan(loop, P, targets=("p",))


def test_real_flows_plan_what_their_reports_read():
    flows = registry.flows()
    compare = pipeline.plan(registry.stages(P), P, targets=flows["compare"].targets, then=flows["compare"].then)
    assert {"nonprivate", "dpsgd", "draw", "compare_report"} <= set(compare.order) and compare.order[-1] == "publish"
    only = parse_params({"compare": {"arms": ["nonprivate", "swag_ppm"]}})
    fewer = pipeline.plan(registry.stages(only), only, targets=("compare_report",)).order
    assert "nonprivate" in fewer and "dpsgd" not in fewer and "swag_ppm_censored" not in fewer
    gpp = pipeline.plan(registry.stages(P), P, groups=("gpp",)).order
    assert gpp[:3] == ["secret", "stratify", "featurize"] and "draw" not in gpp  # roles are keyed
    no_osha = parse_params({"gpp": {"osha": {"enabled": False}}})
    assert "featurize" not in pipeline.plan(registry.stages(no_osha), no_osha, groups=("gpp",)).order
