"""The replay audit (swag_ppm/replay.py): the standard adversary re-fits the released mechanism on D and D∖{x}.

On main before this audit existed, training took its randomness from the public seed: the adversary's re-fit
on D reproduced the released sampler bit for bit and its likelihood ratio named every target a member. The
end-to-end tests build that situation (training seeds swapped for the public ones) and the product's
(secret key), and check the audit convicts the first and not the second."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import copy_root, make_root, run_stages, slice_raw

from dprelease.core.privacy import guarantee
from dprelease.mechanisms.swag_ppm import replay


def test_decision_bound_is_the_clopper_pearson_ratio():
    # all k members called member, no non-member: TPR_low = (α/2)^(1/k), FPR_high = 1 − (α/2)^(1/k)
    k, alpha = 10, 0.05
    low = (alpha / 2) ** (1 / k)
    assert replay.decision_bound(k, 0, k, alpha) == pytest.approx(math.log(low / (1 - low)), rel=1e-9)
    assert replay.decision_bound(5, 5, k, alpha) == 0.0  # no separation: no bound


def test_an_exact_sampler_whose_loss_exceeds_the_claim_is_convicted_and_a_mere_score_is_not():
    member, non_member, kl = np.array([9.0, 2.0]), np.array([-3.0, 1.0]), np.array([0.5, 0.4])
    exact = replay.verdict(llr_member=member, llr_nonmember=non_member, kl=kl, reproduces=True, claimed=7.0, alpha=0.05)
    assert exact["convicted"] and exact["max_privacy_loss"] == 9.0
    score = replay.verdict(
        llr_member=member, llr_nonmember=non_member, kl=kl, reproduces=False, claimed=7.0, alpha=0.05
    )
    assert not score["convicted"] and score["max_privacy_loss"] is None
    assert score["members_called_member"] == 2 and score["non_members_called_member"] == 1
    big_kl = replay.verdict(
        llr_member=np.array([1.0]),
        llr_nonmember=np.array([-1.0]),
        kl=np.array([8.0]),
        reproduces=True,
        claimed=7.0,
        alpha=0.05,
    )
    assert big_kl["convicted"]  # an ε-DP mechanism's KL is at most ε


def test_a_release_is_held_to_its_epsilon_and_an_uncertified_one_to_its_index():
    assert replay.claimed_number(guarantee.ppm(7.5, 3.75)) == 7.5
    g = guarantee.uncertified(9.0, 4.5, certified_directions=19, parameters=126316)
    assert g.epsilon is None and replay.claimed_number(g) == 9.0


def _rows(root) -> dict:
    return json.loads((root / "metrics" / "audit_replay.json").read_text())


@pytest.mark.slow
def test_the_secret_seeded_release_is_not_convicted_by_the_standard_adversary(head_run, tmp_path):
    root = copy_root(head_run.root, tmp_path / "replay")
    run_stages(head_run.params, root, ["audit_replay"])
    d = _rows(root)
    public, operator = d["views"]["public"], d["views"]["operator"]
    print(
        "public LLRs (released draw, non-member draw):",
        [(round(r["llr_released_draw"]), round(r["llr_non_member_draw"])) for r in d["public_per_record"]],
    )
    assert not public["reproduces_release"] and public["centre_distance"] > 0  # the centre is not public
    assert not public["convicted"]
    # the operator (key known) re-fits the release exactly: the guarantee does not cover that adversary
    assert operator["reproduces_release"] and operator["centre_distance"] == 0.0
    # its privacy loss is the mechanism's given the key: far above any ε worth claiming (convicted when above this
    # release's claim; the default calibration's certified ε is ~10⁹, so here it is not)
    assert operator["max_privacy_loss"] > 1e3
    assert operator["convicted"] == (operator["max_privacy_loss"] > d["claimed"] or operator["max_kl"] > d["claimed"])
    assert public["targets"] == head_run.params.privacy_audit.replay_targets
    assert "per_record" not in json.dumps(d["views"])  # the operator's per-record figures stay private


@pytest.mark.slow
def test_a_release_trained_from_the_public_seed_is_convicted(tmp_path, monkeypatch):
    """Main's situation: every fit seeded from the public seed (the key drew only the released noise), and main's
    claim, ε = 2Δ̂ / min(1, T_min over SWAG's subspace) — with the subspace calibration T_min = 1, so 2Δ̂."""
    from dprelease.core.config import parse_params
    from dprelease.core.privacy import secret
    from dprelease.core.seeds import public_seeds
    from dprelease.pipeline import registry

    params = parse_params(slice_raw("head", ppm__reweight=False))
    monkeypatch.setattr(secret, "training_seeds", lambda artifacts: public_seeds(params.seed))
    monkeypatch.setattr(replay, "claimed_number", lambda g: g.quantities["epsilon_at_temperature_one"])
    root = make_root(tmp_path / "main")
    run_stages(params, root, [s.name for s in registry.group(params, "release", active_only=True)] + ["audit_replay"])
    d = _rows(root)
    public = d["views"]["public"]
    print(
        "public LLRs (released draw, non-member draw):",
        [(round(r["llr_released_draw"]), round(r["llr_non_member_draw"])) for r in d["public_per_record"]],
    )
    assert public["reproduces_release"] and public["centre_distance"] == 0.0
    assert public["convicted"] and public["max_privacy_loss"] > d["claimed"]
    assert all(r["says_member"] for r in d["public_per_record"])
    assert public["non_members_called_member"] == 0
