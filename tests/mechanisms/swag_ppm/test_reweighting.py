"""Iterative re-weighting: the damped step, the stopping rule and the acceptance rule (docs/guarantees.md, N)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import install_test_key, slice_raw

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.core.io import read_json, write_json
from dprelease.mechanisms.swag_ppm import ppm, reweighting


def test_damped_step_moves_each_bound_towards_the_target():
    w = np.array([0.0, 0.2, 0.5, 1.0, 0.9])
    L = np.array([9.0, 10.0, 2.0, 1.0, 5.0])  # bounds w·L = 0, 2, 1, 1, 4.5
    target = 3.0
    new = ppm.reweight_toward(w, L, target=target, step=0.5)
    assert new[0] == 0.0  # a zero weight stays zero
    bounds, new_bounds = w * L, new * L
    live = w > 0
    # on the log scale, each live bound moves halfway to the target (unless the weight is clipped at 1)
    unclipped = live & (new < 1)
    np.testing.assert_allclose(
        np.log(new_bounds[unclipped]), 0.5 * np.log(bounds[unclipped]) + 0.5 * np.log(target), rtol=1e-12
    )
    assert new[4] < w[4]  # above the target: down-weighted
    assert new[1] > w[1]  # slack: up-weighted
    full = ppm.reweight_toward(w, L, target=target, step=1.0)
    np.testing.assert_allclose(full[live], np.minimum(1.0, target / L[live]))


def test_damped_step_rejects_bad_arguments():
    with pytest.raises(ValueError):
        ppm.reweight_toward(np.ones(3), np.ones(3), target=1.0, step=0.0)
    with pytest.raises(ValueError):
        ppm.reweight_toward(np.ones(3), np.ones(3), target=0.0, step=0.5)
    with pytest.raises(ValueError):
        ppm.reweight_toward(np.ones(3), np.ones(2), target=1.0, step=0.5)


def test_decide_rules():
    ok, why = reweighting.decide(mode="iterative", reached=True, certified=True, f1_round2=0.58, f1_reweighted=0.59)
    assert ok and why.startswith("accepted")
    ok, why = reweighting.decide(mode="iterative", reached=True, certified=True, f1_round2=0.58, f1_reweighted=0.579)
    assert not ok and "validation weighted F1" in why and "round 2 released" in why
    ok, why = reweighting.decide(mode="iterative", reached=True, certified=False, f1_round2=None, f1_reweighted=None)
    assert not ok and "certification pass" in why
    ok, why = reweighting.decide(mode="iterative", reached=False, certified=None, f1_round2=None, f1_reweighted=None)
    assert not ok and "above the target bound" in why
    ok, why = reweighting.decide(mode="oneshot", reached=False, certified=None, f1_round2=None, f1_reweighted=None)
    assert ok and "one-shot" in why


def _private(params, root) -> dict:
    return read_json(reweighting.decision_file(Layout.from_params(params, root)))


PUBLIC_KEYS = {"mode", "accepted", "released_round", "reason", "max_refits"}


def _public_only(out: dict, root) -> None:
    """The stage's summary and metrics/reweight.json hold the outcome only: no number of an unreleased round."""
    assert set(out) == PUBLIC_KEYS and read_json(root / "metrics" / "reweight.json") == out
    assert not re.search(r"\d[.,]\d|\d\d", out["reason"])  # no real value or count (only "round 2/3")


@pytest.fixture
def scripted(tmp_path, monkeypatch):
    """The reweight stage with fitting, passes and validation scoring replaced by scripted outcomes."""
    params = parse_params(slice_raw(ppm__max_refits=4, ppm__reweight_tolerance=0.1))
    lay = Layout.from_params(params, install_test_key(tmp_path))
    n = 6
    for d in (lay.weights(2), lay.sensitivity(2), lay.features, lay.metrics):
        d.mkdir(parents=True, exist_ok=True)
    np.save(lay.weights(2) / "weights.npy", np.full(n, 0.5))
    np.save(lay.sensitivity(2) / "record_max_loss.npy", np.linspace(1, 6, n))
    (lay.features / "validation.safetensors").touch()
    write_json(lay.metrics / "sensitivity_r2.json", {"local_sensitivity": 3.0, "epsilon": 6.0, "draws": 500})
    state = {"deltas": [], "f1": {}, "saved": 0, "passes": []}
    monkeypatch.setattr(reweighting, "backend_for", lambda p, lay: type("B", (), {"device": "cpu"})())
    monkeypatch.setattr(reweighting, "features", lambda lay, split="train": (None, torch.zeros(n)))
    monkeypatch.setattr(reweighting, "fit", lambda *a, **k: {"model": None, "moments": "fit", "temperature": {}})

    def fake_pass(*a, stop_above=None, min_draws=0, **k):
        state["passes"].append((stop_above, min_draws))
        return np.linspace(1, 6, n), np.array([state["deltas"].pop(0)])

    monkeypatch.setattr(reweighting, "draw_pass", fake_pass)
    monkeypatch.setattr(reweighting.SwagMoments, "load", staticmethod(lambda *a, **k: "round2"))
    monkeypatch.setattr(reweighting, "validation_f1", lambda p, lay, b, m, moments, r: state["f1"][r])
    monkeypatch.setattr(reweighting, "_save_round3", lambda *a: state.__setitem__("saved", state["saved"] + 1))
    return params, tmp_path, state


def test_stops_at_the_first_refit_within_the_bound_and_accepts_on_validation(scripted):
    params, root, state = scripted
    # bound = 3.0 · 1.1 = 3.3: reached at the third refit, then a fresh certification pass reads 3.25
    state["deltas"] = [4.0, 3.5, 3.2, 3.25, 9.9]
    state["f1"] = {2: 0.50, 3: 0.51}
    out = reweighting.reweight(params, root)
    _public_only(out, root)
    assert out["accepted"] and out["released_round"] == 3
    private = _private(params, root)
    assert private["refits"] == 3 and private["reached"] and private["certified"]
    assert [t["local_sensitivity"] for t in private["trail"]] == [4.0, 3.5, 3.2]
    assert private["certified_local_sensitivity"] == 3.25
    assert state["deltas"] == [9.9] and state["saved"] == 1
    stops = [stop for stop, _ in state["passes"]]
    assert stops[:3] == [pytest.approx(3.3)] * 3 and stops[3] is None  # refits exit early; certification never does
    # round 3's Δ̂ is the certification pass's, not the (winner's-curse) pass that triggered the stop
    assert read_json(root / "metrics" / "sensitivity_r3.json")["epsilon"] == pytest.approx(6.5)
    assert oct(reweighting.decision_file(Layout.from_params(params, root)).stat().st_mode & 0o777) == "0o600"


def test_a_certification_pass_above_the_bound_rejects(scripted):
    params, root, state = scripted
    state["deltas"] = [3.2, 3.6]  # the stop rule fired at 3.2, the fresh pass reads 3.6 > 3.3
    state["f1"] = {2: 0.50, 3: 0.51}
    out = reweighting.reweight(params, root)
    _public_only(out, root)
    assert not out["accepted"] and out["released_round"] == 2 and "certification" in out["reason"]
    assert _private(params, root)["certified"] is False


def test_rejects_when_validation_utility_drops(scripted):
    params, root, state = scripted
    state["deltas"] = [3.1, 3.0]
    state["f1"] = {2: 0.50, 3: 0.49}
    out = reweighting.reweight(params, root)
    _public_only(out, root)
    assert _private(params, root)["refits"] == 1 and not out["accepted"] and out["released_round"] == 2
    lay = Layout.from_params(params, root)
    assert reweighting.released_round(params, lay) == 2


def test_gives_up_after_max_refits(scripted):
    params, root, state = scripted
    state["deltas"] = [5.0, 4.0, 3.6, 3.4]
    out = reweighting.reweight(params, root)
    _public_only(out, root)
    private = _private(params, root)
    assert private["refits"] == 4 == params.ppm.max_refits and not private["reached"] and not out["accepted"]
    assert private["validation_weighted_f1"] == {"round_2": None, "round_3": None}  # never scored
    assert private["certified"] is None and "within the refit budget" in out["reason"]


def test_oneshot_is_one_refit_without_a_check(scripted):
    params, root, state = scripted
    params = params.model_copy(update={"ppm": params.ppm.model_copy(update={"reweight_mode": "oneshot"})})
    state["deltas"] = [7.0]
    out = reweighting.reweight(params, root)
    _public_only(out, root)
    assert out["accepted"] and out["released_round"] == 3
    assert _private(params, root)["refits"] == 1 and _private(params, root)["target"] is None
    assert [stop for stop, _ in state["passes"]] == [None]  # the paper's full pass: no early exit
