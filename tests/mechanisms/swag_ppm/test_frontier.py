"""SWAG-PPM's points on the privacy/utility frontier (swag_ppm/frontier.py), on a copy of the head slice's release:
the file contract, one point per (c, τ), the claim rule at τ·T, the release's own point, secret-seeded draws."""

from __future__ import annotations

import json
import time

import pytest
from conftest import copy_root, run_stages

from dprelease.compare.frontier.params import FrontierParams
from dprelease.core.config import Params
from dprelease.core.io import read_json
from dprelease.core.privacy import secret
from dprelease.core.utility.points import points_file, read_points
from dprelease.mechanisms.swag_ppm import claim
from dprelease.mechanisms.swag_ppm.params import FRONTIER
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

SEEDS = 3


def with_frontier(params, **trace) -> Params:
    """``params`` with ``frontier.seeds`` and SWAG-PPM's trace (``ppm.frontier``) set."""
    raw = params.model_dump()
    raw["frontier"] = FrontierParams(**{**raw["frontier"], "seeds": SEEDS}).model_dump()
    raw["ppm"]["frontier"] = trace
    return type(params).model_validate(raw, strict=False)


def _run(params, root) -> tuple[dict, list, float]:
    start = time.perf_counter()
    run_stages(params, root, [FRONTIER])
    took = time.perf_counter() - start
    doc, points = read_points(points_file(root, "swag_ppm"))
    return doc, points, took


@pytest.fixture(scope="module")
def traced(head_run, tmp_path_factory):
    """The release's c and one refitted c, three temperatures."""
    params = with_frontier(head_run.params, c=[head_run.params.ppm.c, 0.5], temperatures=[1.0, 2.0, 4.0])
    root = copy_root(head_run.root, tmp_path_factory.mktemp("frontier"))
    doc, points, took = _run(params, root)
    print(f"frontier_swag_ppm on the head slice: {took:.1f} s")
    return params, root, doc, points


def _by_pair(points) -> dict:
    return {(p.config["c"], p.config["temperature"]): p for p in points}


def test_stage_declaration(traced):
    params, root, _, _ = traced
    stage = registry.get(params, FRONTIER)
    assert stage.group == "frontier" and stage.metrics == ["metrics/frontier/swag_ppm.json"] and stage.outs == []
    assert {"seed", "model", "ppm", "frontier.seeds"} <= set(stage.params)
    assert all((root / d).exists() for d in stage.deps), [d for d in stage.deps if not (root / d).exists()]
    assert "mechanisms/swag_ppm/frontier.py" in stage.code


def test_one_point_per_pair_through_the_contract(traced):
    params, _, doc, points = traced
    assert doc["source"] == "swag_ppm" and doc["grid_size"] == 6 == len(points)
    assert set(_by_pair(points)) == {(c, t) for c in (params.ppm.c, 0.5) for t in (1.0, 2.0, 4.0)}
    assert "no configuration is chosen" in doc["selection"]
    for p in points:
        assert p.mechanism == "swag_ppm" and p.delta is None and p.target_epsilon is None
        assert p.kind in claim.KINDS and (p.epsilon is None) == (p.kind == "ppm_uncertified")
        assert (p.kind == "ppm_uncertified") == ("uncertified_index" in p.config)
        assert len(p.weighted_f1) == len(p.macro_f1) == SEEDS
        assert 0.0 <= p.validation_weighted_f1 <= 1.0
        assert p.label == f"SWAG-PPM (τ={p.config['temperature']:g}, c={p.config['c']:g})"
        assert 0 <= p.config["draws_above_delta"] <= SEEDS


def test_the_claim_rule_at_tau_times_T(traced):
    """T scales with τ in every direction; ε = 2Δ/min(1, T_min over all d) when every direction is certified,
    else the index 2Δ (claim.py); Δ ≥ Δ̂."""
    params, _, _, points = traced
    pairs = _by_pair(points)
    for c in (params.ppm.c, 0.5):
        base = pairs[(c, 1.0)].config
        for t in (2.0, 4.0):
            cfg = pairs[(c, t)].config
            assert cfg["temperature_min"] == pytest.approx(t * base["temperature_min"], rel=1e-12)
            assert cfg["temperature_min_all"] == pytest.approx(t * base["temperature_min_all"], rel=1e-12)
    for p in points:
        cfg = p.config
        assert cfg["local_sensitivity_bound"] >= cfg["local_sensitivity"] > 0
        if p.epsilon is not None:
            assert cfg["certified_directions"] == cfg["parameters"]
            t_min = min(cfg["temperature_min_all"], cfg["temperature_min"])
            assert p.epsilon == pytest.approx(2 * cfg["local_sensitivity_bound"] / min(1.0, t_min), rel=1e-12)
        else:
            assert cfg["certified_directions"] < cfg["parameters"]
            assert cfg["uncertified_index"] == pytest.approx(2 * cfg["local_sensitivity_bound"], rel=1e-12)


def test_the_release_point_is_the_release(traced):
    params, root, _, points = traced
    release = read_json(root / "metrics/swag_ppm_draw.json")
    g = release["guarantee"]
    exact = _by_pair(points)[(params.ppm.c, 1.0)]
    assert exact.arm == "swag_ppm_reweighted" and [p for p in points if p.arm] == [exact]
    assert exact.kind == g["kind"] and exact.epsilon == g["epsilon"]
    assert exact.config["round"] == release["round"] and not exact.config["refit"]
    assert exact.config["local_sensitivity"] == g["quantities"]["local_sensitivity"]
    if g["epsilon"] is None:
        assert exact.config["uncertified_index"] == g["quantities"]["uncertified_index"]
    for p in points:  # another c is a refitted round 2
        if p.config["c"] == 0.5:
            assert p.config["round"] == 2 and p.config["refit"]


def test_only_aggregates_are_written(traced):
    _, root, doc, _ = traced
    n_train = read_json(root / "metrics/data.json")["train_rows"]

    def lists(node):
        if isinstance(node, dict):
            for v in node.values():
                yield from lists(v)
        elif isinstance(node, list):
            yield node
            for v in node:
                yield from lists(v)

    lengths = {len(x) for point in doc["points"] for x in lists(point)}
    assert lengths <= {SEEDS} and n_train != SEEDS  # F1 per seed only: nothing per record


def test_secret_key_drives_the_draws(head_run, traced, tmp_path):
    """The same key reproduces every figure; another key gives other draws (a point that is not the release)."""
    params, _, first, _ = traced
    again = copy_root(head_run.root, tmp_path / "again")
    second, _, _ = _run(params, again)
    assert json.dumps(second, sort_keys=True) == json.dumps(first, sort_keys=True)

    rotated = copy_root(head_run.root, tmp_path / "rotated")
    secret.rotate(rotated / params.artifacts)
    _, points, _ = _run(params, rotated)
    before, after = _by_pair(read_points(points_file(again, "swag_ppm"))[1]), _by_pair(points)
    hot = (params.ppm.c, 2.0)
    assert after[hot].config["local_sensitivity"] != before[hot].config["local_sensitivity"]
    released = (params.ppm.c, 1.0)  # the release's own pass and draw: what the release claims, whatever the key now
    assert after[released].epsilon == before[released].epsilon and after[released].kind == before[released].kind
