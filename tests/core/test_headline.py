"""The headline figures from the release's record (``metrics/released.json``): ε and F1 every record has, the
mechanism's own figures from the record, the canary bound of the released arm only, and the Markdown table
(SWAG-PPM's own figures: tests/mechanisms/swag_ppm/test_record.py)."""

from __future__ import annotations

import json

from dprelease.core import headline


def _write(folder, name, obj):
    (folder / f"{name}.json").write_text(json.dumps(obj), encoding="utf-8")


def _metrics(tmp_path, arm="swag_ppm_reweighted", own=None):
    """A run's public metric files: the release's record (the publish step's) with a mechanism's own figures."""
    _write(
        tmp_path,
        "released",
        {
            "mechanism": "swag_ppm",
            "arm": arm,
            "guarantee": {"epsilon": 5.5, "kind": "x"},
            "weighted_f1": 0.58,
            "macro_f1": 0.31,
            "headline": {"temperature": 0.93, "macro_f1_mean": 0.30} if own is None else own,
        },
    )
    _write(tmp_path, "data", {"train_rows": 2700, "public": {"expected_train_size": 2626}})
    return tmp_path


def test_every_figure_from_the_release_record(tmp_path):
    m = _metrics(tmp_path)
    _write(
        m,
        "audit_canary",
        {"arms": {"swag_ppm": {"epsilon_lower_bound": 9.0}, "swag_ppm_reweighted": {"epsilon_lower_bound": 1.8}}},
    )
    h = headline.headline(m)
    assert list(h) == ["epsilon", "temperature", "weighted_f1", "macro_f1", "macro_f1_mean", "epsilon_lb", "records"]
    assert h["epsilon"] == 5.5 and h["epsilon_lb"] == 1.8  # the record's arm's bound only
    assert (h["weighted_f1"], h["macro_f1_mean"], h["records"], h["temperature"]) == (0.58, 0.30, 2626, 0.93)
    assert headline.released_arm(m) == "swag_ppm_reweighted"


def test_absent_figures_are_left_out(tmp_path):
    m = _metrics(tmp_path, arm="ncm", own={})
    h = headline.headline(m)
    assert set(h) == {"epsilon", "weighted_f1", "macro_f1", "records"}  # no audit, no own figures
    _write(m, "audit_canary", {"arms": {"dpsgd": {"epsilon_lower_bound": 0.5}}})
    assert "epsilon_lb" not in headline.headline(m)  # another arm's bound
    (m / "released.json").unlink()
    assert headline.headline(m) == {"records": 2626} and headline.released_arm(m) is None  # nothing published


def test_the_multi_run_audit_is_preferred_when_it_covers_the_arm(tmp_path):
    m = _metrics(tmp_path)
    _write(
        m,
        "audit_canary",
        {
            "arms": {
                "swag_ppm_reweighted": {
                    "audits": {"input": {"gate": {"epsilon_lower_bound": 1.8, "method": "steinke", "guesses": 1000}}}
                }
            }
        },
    )
    assert headline.audit_bound(m, "swag_ppm_reweighted") == (1.8, "steinke one-run canary bound, 1000 guesses")
    _write(m, "audit_tight", {"arms": {"dpsgd": {"bound": {"epsilon_lower_bound": 2.9, "runs_in": 5, "runs_out": 6}}}})
    assert headline.audit_bound(m, "swag_ppm_reweighted")[0] == 1.8  # the tight audit covers DP-SGD only
    assert headline.audit_bound(m, "dpsgd") == (2.9, "multi-run audit, 11 runs")
    _write(
        m,
        "audit_tight",
        {"arms": {"swag_ppm_reweighted": {"bound": {"epsilon_lower_bound": 3.1, "runs_in": 5, "runs_out": 6}}}},
    )
    assert headline.headline(m)["epsilon_lb"] == 3.1
    assert headline.audit_bound(m, None) is None


def test_markdown_table(tmp_path):
    text = headline.markdown(
        {"epsilon": 5.4956887, "records": 2626},
        "retrain x",
        {"gate detail": "refused by utility (0.56 | 0.57)\nsecond line"},
    )
    lines = text.splitlines()
    assert (
        lines[0] == "### retrain x"
        and "| ε | 5.496 |" in lines
        and "| training records (public expected n̂) | 2626 |" in lines
    )
    assert lines[-1] == "| gate detail | refused by utility (0.56 \\| 0.57) second line |"


def test_epsilon_sensitivity_maximum_near_the_release_settings(tmp_path):
    assert headline.epsilon_sensitivity_near(tmp_path, 1000.0) is None
    table = tmp_path / headline.SENSITIVITY_TABLE
    table.parent.mkdir(parents=True)
    table.write_text(
        "swag_lr,prior_precision,epsilon\n0.01,1000.0,7.1\n0.03,1000.0,9.44\n0.01,100.0,30.0\n0.003,1000.0,\n",
        encoding="utf-8",
    )
    near = headline.epsilon_sensitivity_near(tmp_path, 1000.0)
    assert (near["maximum"], near["minimum"], near["cells"]) == (9.44, 7.1, 2)  # λ = 100's 30.0 is not near
    assert headline.epsilon_sensitivity_near(tmp_path, 10.0) is None
