"""The headline figures from a run's public metric files: which appear when, the ε interval only for the
asymptotic mechanism, the canary bound of the released arm only, and the Markdown table."""

from __future__ import annotations

import json

from dprelease.core import headline


def _write(folder, name, obj):
    (folder / f"{name}.json").write_text(json.dumps(obj), encoding="utf-8")


def _metrics(tmp_path, kind="ppm_local_asymptotic", round_=3, quantities=None):
    _write(tmp_path, "release", {"round": round_, "guarantee": {"epsilon": 5.5, "kind": kind,
                                                               "quantities": quantities or {"temperature": 0.93}},
                                 "local_sensitivity_tail": {"ci_low": 2.6, "ci_high": 3.1}})
    _write(tmp_path, "evaluation", {"released_weighted_f1": 0.58, "released_macro_f1": 0.31, "weighted_f1_mean": 0.57,
                               "macro_f1_mean": 0.30})
    _write(tmp_path, "data", {"train_rows": 2700, "public": {"expected_train_size": 2626}})
    return tmp_path


def test_every_figure_from_a_full_run(tmp_path):
    m = _metrics(tmp_path, quantities={"temperature": 0.93, "epsilon_point_estimate": 4.4,
                                       "epsilon_at_temperature_one": 4.4})
    _write(m, "audit_canary", {"arms": {"swag_ppm": {"epsilon_lower_bound": 9.0},
                                        "swag_ppm_reweighted": {"epsilon_lower_bound": 1.8}}})
    h = headline.headline(m)
    assert list(h) == [n for n in headline.NAMES if n != "uncertified_index"]     # an ε record has no index
    assert h["epsilon"] == 5.5 and h["epsilon_point"] == 4.4                    # the headline, the point beside it
    assert h["epsilon_ci_low"] == 5.2 and h["epsilon_ci_high"] == 6.2              # 2 × Δ̂'s interval
    assert h["epsilon_lb"] == 1.8                                                 # round 3's arm, not round 2's
    assert (h["weighted_f1"], h["macro_f1_mean"], h["records"], h["temperature"]) == (0.58, 0.30, 2626, 0.93)


def test_absent_figures_are_left_out(tmp_path):
    m = _metrics(tmp_path, kind="ppm_censored", round_=2)
    h = headline.headline(m)
    assert "epsilon_ci_low" not in h and "epsilon_lb" not in h                   # censored ε is fixed; no audit
    _write(m, "audit_canary", {"arms": {"dpsgd": {"epsilon_lower_bound": 0.5}}})
    assert "epsilon_lb" not in headline.headline(m)                               # another arm's bound
    (m / "evaluation.json").unlink()
    assert "weighted_f1" not in headline.headline(m) and headline.headline(m)["epsilon"] == 5.5


def test_the_multi_run_audit_is_preferred_when_it_covers_the_arm(tmp_path):
    m = _metrics(tmp_path)
    _write(m, "audit_canary", {"arms": {"swag_ppm_reweighted": {"audits": {"input": {"gate": {
        "epsilon_lower_bound": 1.8, "method": "steinke", "guesses": 1000}}}}}})
    assert headline.audit_bound(m, "swag_ppm_reweighted") == (1.8, "steinke one-run canary bound, 1000 guesses")
    _write(m, "audit_tight", {"arms": {"dpsgd": {"bound": {"epsilon_lower_bound": 2.9, "runs_in": 5, "runs_out": 6}}}})
    assert headline.audit_bound(m, "swag_ppm_reweighted")[0] == 1.8             # the tight audit covers DP-SGD only
    assert headline.audit_bound(m, "dpsgd") == (2.9, "multi-run audit, 11 runs")
    _write(m, "audit_tight", {"arms": {"swag_ppm_reweighted": {"bound": {"epsilon_lower_bound": 3.1, "runs_in": 5,
                                                                         "runs_out": 6}}}})
    assert headline.headline(m)["epsilon_lb"] == 3.1
    assert headline.audit_bound(m, None) is None


def test_markdown_table(tmp_path):
    text = headline.markdown({"epsilon": 5.4956887, "records": 2626}, "retrain x",
                             {"gate detail": "refused by utility (0.56 | 0.57)\nsecond line"})
    lines = text.splitlines()
    assert lines[0] == "### retrain x" and "| ε | 5.496 |" in lines and "| training records (public expected n̂) | 2626 |" in lines
    assert lines[-1] == "| gate detail | refused by utility (0.56 \\| 0.57) second line |"


def test_the_interval_is_divided_by_the_certified_temperature_like_epsilon(tmp_path):
    m = _metrics(tmp_path, quantities={"temperature": 1.0, "epsilon_point_estimate": 40.0,
                                       "epsilon_at_temperature_one": 4.0})  # min(1, T_min) = 0.1
    h = headline.headline(m)
    assert (h["epsilon_ci_low"], h["epsilon_ci_high"]) == (52.0, 62.0)


def test_an_uncertified_release_has_no_epsilon_figure_only_its_index(tmp_path):
    _write(tmp_path, "release", {"round": 2, "guarantee": {"epsilon": None, "kind": "ppm_uncertified", "quantities": {
        "uncertified_index": 9.3, "uncertified_index_point": 7.1, "temperature": 1.0}},
        "local_sensitivity_tail": {"ci_low": 2.6, "ci_high": 3.1}})
    h = headline.headline(tmp_path, canary=False)
    assert h == {"uncertified_index": 9.3, "temperature": 1.0}
    assert not any(k.startswith("epsilon") for k in h)
    assert "NOT an ε" in headline.LABELS["uncertified_index"]


def test_epsilon_sensitivity_maximum_near_the_release_settings(tmp_path):
    assert headline.epsilon_sensitivity_near(tmp_path, 1000.0) is None
    table = tmp_path / headline.SENSITIVITY_TABLE
    table.parent.mkdir(parents=True)
    table.write_text("swag_lr,prior_precision,epsilon\n0.01,1000.0,7.1\n0.03,1000.0,9.44\n0.01,100.0,30.0\n"
                     "0.003,1000.0,\n", encoding="utf-8")
    near = headline.epsilon_sensitivity_near(tmp_path, 1000.0)
    assert (near["maximum"], near["minimum"], near["cells"]) == (9.44, 7.1, 2)   # λ = 100's 30.0 is not near
    assert headline.epsilon_sensitivity_near(tmp_path, 10.0) is None
