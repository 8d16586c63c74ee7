"""mia.canary: the bound fixed in advance for the gate, the claim a canary run is audited against, a canary
run whose drawn subset is empty (a one-line error before any stage runs), and the canary run's plan: only the
stages the audited arms need, the stage untimed when they include a data-dependent search."""

from __future__ import annotations

import pytest

from dprelease.compare.mia.canary import AuditError, _claim, gate_method
from dprelease.core.errors import OneLineError
from dprelease.pipeline import registry


@pytest.mark.parametrize("delta, method", [(0.0, "steinke"), (1.9e-4, "fdp"), (0.5, "fdp")])
def test_gate_method_is_steinke_without_delta_and_fdp_with_it(delta, method):
    assert gate_method(delta) == method


def test_the_claim_is_read_from_the_manifest_guarantee():
    manifest = {"guarantee": {"epsilon": 7.14, "delta": None, "kind": "ppm_local_asymptotic", "quantities": {}}}
    assert _claim(manifest) == {"epsilon": 7.14, "delta": None, "guarantee": "ppm_local_asymptotic"}


def test_an_audit_contradiction_is_a_one_line_error():
    assert issubclass(AuditError, OneLineError)
    assert str(AuditError("honest DP-SGD\nbound above its ε")) == "honest DP-SGD bound above its ε"


def _pool(root, params, members: dict[str, list[bool]]):
    import numpy as np
    import torch

    from dprelease.compare.mia.canary import SETS
    from dprelease.compare.mia.population import audit_dir
    from dprelease.contracts.layout import Layout
    from dprelease.core.backends.base import save_features

    pool = audit_dir(Layout.from_params(params, root)) / "pool"
    pool.mkdir(parents=True)
    for kind, member in members.items():
        feats, flags = SETS[kind]
        save_features(pool / feats, {"x": torch.randn(len(member), 384)}, torch.zeros(len(member), dtype=torch.long))
        np.save(pool / flags, np.array(member, dtype=bool))


def test_a_canary_run_with_no_included_canary_is_a_one_line_error_before_any_stage(tmp_path, monkeypatch):
    """The secret coins can leave every canary out (probability 2^-m): the canary run would audit nothing."""
    from conftest import slice_raw

    from dprelease.compare.mia import canary
    from dprelease.core.config import parse_params

    params = parse_params(slice_raw())
    _pool(tmp_path, params, {"mislabelled": [False] * 5, "input": [False] * 3})
    monkeypatch.setattr(canary.workers, "run_graph", lambda *a, **k: pytest.fail("a stage ran for an empty canary run"))
    with pytest.raises(AuditError, match="none of the 8 canaries was drawn into the canary run") as info:
        canary.canary_runs(params, tmp_path, stages=registry.ACCESS)
    assert "\n" not in str(info.value) and not (tmp_path / params.artifacts / "audit" / "canary_run").exists()


def test_a_set_with_none_included_is_audited_beside_one_that_has_some():
    import numpy as np

    from dprelease.compare.mia.canary import check_included

    check_included({"input": (None, None, np.zeros(3, bool)), "mislabelled": (None, None, np.array([0, 1], bool))})
    with pytest.raises(AuditError, match="none of the 0 canaries"):
        check_included({})


def _plan(**audit):
    from dprelease.compare.mia import canary
    from dprelease.core.config import parse_params

    params = parse_params({"ppm": {"reweight": True}, "privacy_audit": audit})
    sp = canary._sub_params(params)
    return canary.timed(params), *canary.plan(
        params, sp, list(params.privacy_audit.arms) + canary.extra_arms(params), access=registry.ACCESS
    )


def test_the_retrain_audit_runs_only_the_round_2_chain_and_stays_timed():
    timed, order, waits = _plan(arms=["swag_ppm"], planted_bugs=False)
    assert timed and "reweight" not in order and "draw" not in order
    assert {"finetune_r1", "swag_r2", "sensitivity_r2", "swag_ppm"} <= set(order) and order[-1] == "swag_ppm"
    assert not set(order) & {"featurize", "stratify", "evaluate", "publish", "nonprivate", "dpsgd"}
    assert waits["swag_ppm"] >= {"swag_r2", "sensitivity_r2"} and all(w <= set(order) for w in waits.values())


def test_auditing_the_release_arm_re_weights_so_the_stage_is_untimed_and_its_arms_do_not_wait_on_the_chain():
    from dprelease.core.config import parse_params
    from dprelease.pipeline import registry

    timed, order, waits = _plan()  # the default arms, with the planted bugs
    assert not timed and {"reweight", "draw", "nonprivate", "dpsgd", "swag_ppm"} <= set(order)
    assert not waits["nonprivate"] and waits["dpsgd"] <= {"secret"}  # they run beside the SWAG-PPM rounds
    stage = registry.get(parse_params({"ppm": {"reweight": True}}), "canary_runs")
    assert stage.timed is False  # flows never record, print or log its duration
