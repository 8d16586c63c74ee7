"""The privacy-audit stages on the head slice (after the comparison arms): outputs, no per-record data,
the sanity rule, and the model card kept in step with release.json."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import compare_raw, copy_root, run_stages

from dprelease.core.config import parse_params
from dprelease.core.io import read_json
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

SMALL = {"pool_size": 300, "references": 3, "canaries": 40, "input_canaries": 200, "guess_grid": [10, 40]}
REQUIRED = [
    "arm",
    "claimed_epsilon",
    "delta",
    "attack",
    "method",
    "epsilon_lower_bound",
    "confidence",
    "guesses",
    "correct",
    "canaries",
    "ceiling",
    "convicted",
    "gate",
    "auc",
    "tpr_at_fpr_0.01",
    "tp_0.01",
    "fp_0.01",
    "null_tpr_95_0.01",
    "tpr_at_fpr_0.001",
]
CANARY_ROWS = sorted(f"canary_{k}/{m}" for k in ("input", "mislabelled") for m in ("steinke", "fdp"))


def _params():
    return parse_params(compare_raw(privacy_audit=SMALL))


@pytest.fixture(scope="module")
def audited(arms_run, tmp_path_factory):
    params = _params()
    root = copy_root(arms_run.root, tmp_path_factory.mktemp("audit"))
    names = [s.name for s in registry.group(params, "audit")] + ["publish"]
    return SimpleNamespace(params=params, root=root, summaries=run_stages(params, root, names))


def test_audit_csv_has_a_row_per_arm_attack_and_bound(audited):
    table = pd.read_csv(audited.root / "reports/privacy/audit.csv")
    assert REQUIRED == [c for c in table.columns if c in REQUIRED]
    arms = audited.params.privacy_audit.arms
    for arm in arms:
        rows = table[table["arm"] == arm]
        mi = rows[rows["method"] == "heuristic_l3"]
        assert sorted(mi["attack"]) == ["lira_offline", "lira_online", "loss"], arm
        assert mi["auc"].between(0, 1).all() and mi["tpr_at_fpr_0.01"].between(0, 1).all()
        assert (mi["tp_0.01"] <= mi["members"]).all() and (mi["fp_0.01"] <= 0.01 * mi["non_members"]).all()
        can = rows[rows["method"] != "heuristic_l3"]
        assert sorted(f"{a}/{m.split('_')[0]}" for a, m in zip(can["attack"], can["method"])) == CANARY_ROWS, arm
        assert (can["epsilon_lower_bound"] >= 0).all() and (can["epsilon_lower_bound"] <= can["ceiling"] + 1e-9).all()
        assert (can["correct"] <= can["guesses"]).all() and (can["confidence"] == 0.95).all()
        assert can["gate"].sum() == 2  # one bound per canary set, fixed in advance
    claimed = table.set_index(["arm", "attack", "method"])["claimed_epsilon"]
    release = read_json(audited.root / "metrics/swag_ppm_draw.json")["guarantee"]["epsilon"]
    assert claimed[("swag_ppm_reweighted", "loss", "heuristic_l3")] == pytest.approx(release)
    assert math.isnan(claimed[("nonprivate", "loss", "heuristic_l3")])
    dp = table[(table["arm"] == "dpsgd") & (table["method"] != "heuristic_l3")]
    assert set(dp["method"]) == {"steinke_delta", "fdp_gaussian"} and (dp["delta"] > 0).all()
    planted = table[table["arm"].str.startswith("planted:")]
    assert set(planted["arm"]) == {"planted:nonprivate_labelled_eps1", "planted:dpsgd_noise_div4"}
    eps1 = planted[planted["arm"] == "planted:nonprivate_labelled_eps1"]
    assert (eps1["claimed_epsilon"] == 1.0).all() and set(eps1["method"]) == {"steinke_pure", "fdp_pure"}


def test_report_and_roc_figure(audited):
    out = audited.root / "reports/privacy"
    assert (out / "roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "heuristic" in md and "one-run" in md and "under-represented" in md
    assert f"**mislabelled** {SMALL['canaries']} (" in md and f"**input** {SMALL['input_canaries']} (" in md
    assert "null band" in md and "false-alarm rate" in md


def test_reference_confidences_cover_every_target(audited):
    phi = np.load(audited.root / audited.params.artifacts / "audit/references/phi.npy")
    data = read_json(audited.root / "metrics/data.json")
    assert phi.shape == (SMALL["references"], data["train_rows"] + data["test_rows"])
    assert np.isfinite(phi).all()


def test_canary_bound_never_exceeds_what_the_guesses_allow(audited):
    canary = read_json(audited.root / "metrics/audit_canary.json")
    assert canary["guess_grid"] == SMALL["guess_grid"]
    sets = canary["canary_sets"]
    assert sets["mislabelled"]["canaries"] == SMALL["canaries"] and sets["input"]["canaries"] == SMALL["input_canaries"]
    assert canary["added_to_training"] == sum(v["included"] for v in sets.values())
    for arm, r in {**canary["arms"], **canary["planted"]}.items():
        for kind, d in r["audits"].items():
            for method in ("steinke", "fdp"):
                b = d[method]
                assert b["guesses"] in SMALL["guess_grid"] and 0 <= b["correct"] <= b["guesses"], (arm, kind)
                assert 0 <= b["epsilon_lower_bound"] <= b["ceiling"] + 1e-12, (arm, kind)


def test_public_outputs_hold_no_per_record_data(audited):
    """Aggregates only: no membership vectors, scores or narratives in metrics or reports."""
    texts = pd.read_csv(audited.root / audited.params.artifacts / "data/train.csv")["text"].head(20)
    for path in [*(audited.root / "reports/privacy").glob("*"), *(audited.root / "metrics").glob("*audit*.json")]:
        if path.suffix == ".png":
            continue
        content = path.read_text(encoding="utf-8")
        assert not any(t in content for t in texts), path
        if path.suffix == ".json":

            def longest(o):
                if isinstance(o, list):
                    return max([len(o), *(longest(x) for x in o)])
                if isinstance(o, dict):
                    return max([0, *(longest(x) for x in o.values())])
                return 0

            assert longest(json.loads(content)) <= 41, path  # the fixed FPR grid is the longest list


def test_dpsgd_bound_above_its_accountant_epsilon_fails_loudly(audited, tmp_path, monkeypatch):
    from dprelease.compare.mia import canary

    root = copy_root(audited.root, tmp_path / "root")
    real = canary.onerun.canary_audit

    def inflated(*args, **kwargs):
        out = real(*args, **kwargs)
        for method in ("steinke", "fdp"):
            out[method]["epsilon_lower_bound"] = 1e6
        return out

    monkeypatch.setattr(canary.onerun, "canary_audit", inflated)
    with pytest.raises(canary.AuditError, match="exceeds its accountant") as info:
        canary.canary_runs(audited.params, root, stages=registry.ACCESS)
    assert "\n" not in str(info.value) and "dpsgd" in str(info.value)


def test_model_card_is_in_step_with_the_manifest(audited):
    from dprelease.core.release.folder import verify_release

    folder = audited.root / audited.params.release
    manifest = verify_release(folder)  # the card is covered by the manifest's sha256 list
    assert "README.md" in manifest["files"]
    card = (folder / "README.md").read_text(encoding="utf-8")
    g = manifest["guarantee"]
    assert card.startswith("<!-- Generated by dprelease")
    assert f"ε = {g['epsilon']:.3f}" in card and "locally" in card and "asymptotically" in card
    assert f"Δ̂ = {g['quantities']['local_sensitivity']:.3f}" in card
    assert "ε + 2ε" in card and "dprelease predict" in card
    table = pd.read_csv(audited.root / "reports/privacy/audit.csv")
    rows = table[(table["arm"] == "swag_ppm_reweighted") & (table["method"] != "heuristic_l3")]
    best = rows.loc[rows["epsilon_lower_bound"].idxmax()]
    assert f"**Strongest audit lower bound: ε_LB = {best['epsilon_lower_bound']:.3f}** (this release: ε = " in card
    assert f"| {best['attack']} | {best['method']} | – | – | – | {best['epsilon_lower_bound']:.3f} |" in card
    nonprivate = read_json(audited.root / "metrics/nonprivate.json")
    assert f"{nonprivate['top_quartile_weighted_f1']:.3f} / {nonprivate['top_quartile_macro_f1']:.3f}" in card


def test_card_before_any_audit_says_how_to_get_one(head_run):
    card = (Path(head_run.root) / head_run.params.release / "README.md").read_text(encoding="utf-8")
    assert "Not audited yet: run `make audit`" in card and "not measured (`make compare`)" in card


def test_audit_mlflow_run_holds_figures_and_aggregates(audited):
    import mlflow

    from dprelease.compare.mia.tracking import tracked_run
    from dprelease.pipeline.tracking import tracking_uri
    from dprelease.pipeline.tracking_experiments import log_tracked

    run_id = log_tracked(audited.params, audited.root, tracked_run(audited.params, audited.root))
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(audited.params, audited.root))
    files = {a.path for a in client.list_artifacts(run_id, "privacy")}
    assert files == {"privacy/audit.csv", "privacy/roc.png", "privacy/report.md"}
    exp = client.get_run(run_id).info.experiment_id
    children = client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
    assert sorted(c.data.tags["arm"] for c in children) == sorted(audited.params.privacy_audit.arms)
    for c in children:
        assert {"loss.auc", "lira_offline.auc", "canary_input.epsilon_lower_bound"} <= set(c.data.metrics)
        assert not any(k.endswith("roc_tpr") for k in c.data.metrics)  # lists are not metrics


def test_the_audit_runs_the_replay_and_its_rows_reach_audit_csv_and_the_card(audited):
    table = pd.read_csv(audited.root / "reports/privacy/audit.csv")
    replay = table[table["attack"] == "replay"]
    assert sorted(replay["method"]) == ["replay_operator", "replay_public"]
    public = replay[replay["method"] == "replay_public"].iloc[0]
    assert not public["convicted"]  # the standard adversary cannot re-fit the centre
    assert "re-fit does not reproduce the release" in public["bound"]
    card = (audited.root / audited.params.release / "README.md").read_text(encoding="utf-8")
    assert "**Replay audit**" in card and "| public | no |" in card and "| operator | yes |" in card
