"""SWAG-PPM's own headline figures (``record.own_figures``, what its ``figures`` hook puts in the release's record
and its ``evaluate`` stage writes to ``metrics/headline.json``): the ε interval only for the asymptotic
mechanism, scaled like ε by the certified temperature; an uncertified draw's index, never an ε."""

from __future__ import annotations

import json

from dprelease.core import headline
from dprelease.mechanisms.swag_ppm.record import DRAW, own_figures


def _write(folder, name, obj):
    (folder / name).write_text(json.dumps(obj), encoding="utf-8")


def _metrics(tmp_path, kind="ppm_local_asymptotic", round_=3, quantities=None):
    _write(
        tmp_path,
        DRAW,
        {
            "round": round_,
            "guarantee": {"epsilon": 5.5, "kind": kind, "quantities": quantities or {"temperature": 0.93}},
            "local_sensitivity_tail": {"ci_low": 2.6, "ci_high": 3.1},
        },
    )
    _write(
        tmp_path,
        "evaluation.json",
        {"released_weighted_f1": 0.58, "released_macro_f1": 0.31, "weighted_f1_mean": 0.57, "macro_f1_mean": 0.30},
    )
    _write(tmp_path, "data.json", {"train_rows": 2700, "public": {"expected_train_size": 2626}})
    return tmp_path


def test_every_figure_of_the_draw(tmp_path):
    m = _metrics(
        tmp_path, quantities={"temperature": 0.93, "epsilon_point_estimate": 4.4, "epsilon_at_temperature_one": 4.4}
    )
    h = headline.figures(own_figures(m), m, arm=None, canary=False)
    assert list(h) == [n for n in headline.NAMES if n not in ("uncertified_index", "epsilon_lb")]
    assert h["epsilon"] == 5.5 and h["epsilon_point"] == 4.4  # the headline, the point beside it
    assert h["epsilon_ci_low"] == 5.2 and h["epsilon_ci_high"] == 6.2  # 2 × Δ̂'s interval
    assert (h["weighted_f1"], h["macro_f1_mean"], h["records"], h["temperature"]) == (0.58, 0.30, 2626, 0.93)


def test_a_censored_draw_has_no_interval(tmp_path):
    m = _metrics(tmp_path, kind="ppm_censored", round_=2)
    assert "epsilon_ci_low" not in own_figures(m)  # censored ε is fixed
    (m / "evaluation.json").unlink()
    assert "weighted_f1" not in own_figures(m) and own_figures(m)["epsilon"] == 5.5


def test_the_interval_is_divided_by_the_certified_temperature_like_epsilon(tmp_path):
    m = _metrics(
        tmp_path, quantities={"temperature": 1.0, "epsilon_point_estimate": 40.0, "epsilon_at_temperature_one": 4.0}
    )  # min(1, T_min) = 0.1
    h = own_figures(m)
    assert (h["epsilon_ci_low"], h["epsilon_ci_high"]) == (52.0, 62.0)


def test_an_uncertified_release_has_no_epsilon_figure_only_its_index(tmp_path):
    _write(
        tmp_path,
        DRAW,
        {
            "round": 2,
            "guarantee": {
                "epsilon": None,
                "kind": "ppm_uncertified",
                "quantities": {"uncertified_index": 9.3, "uncertified_index_point": 7.1, "temperature": 1.0},
            },
            "local_sensitivity_tail": {"ci_low": 2.6, "ci_high": 3.1},
        },
    )
    h = headline.figures(own_figures(tmp_path), tmp_path, arm=None, canary=False)
    assert h == {"uncertified_index": 9.3, "temperature": 1.0}
    assert not any(k.startswith("epsilon") for k in h)
    assert "NOT an ε" in headline.LABELS["uncertified_index"]
