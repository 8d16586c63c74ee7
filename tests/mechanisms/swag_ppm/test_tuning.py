"""The practical guide's tuning rules (dprelease.tuning): every row of the decision table, the guide's
case-study path, the requirement boundaries, grid choice, and validation of the tune/selection params."""

from __future__ import annotations

import pytest

from dprelease.core.config import ConfigError, parse_params
from dprelease.mechanisms.swag_ppm.tuning import Outcome, Requirements, Steps, assess, choose, decide

BASE = {"weighted_f1": 0.8, "macro_f1": 0.5}  # non-private baseline
REQ = Requirements(target_epsilon=10.0, max_drop_weighted=0.10, max_drop_macro=0.10)
STEPS = Steps(start_epochs=7, epoch_step=3, c_step=0.15)
GOOD = {"weighted_f1": 0.78, "macro_f1": 0.49}  # within 10 % of the baseline
POOR = {"weighted_f1": 0.50, "macro_f1": 0.20}


def out(c: float, epochs: int, verdict: str, epsilon: float = 20.0, utility: dict = POOR) -> Outcome:
    return Outcome(c=c, epochs=epochs, epsilon=epsilon, verdict=verdict, **utility)


# --- the decision table, row by row ------------------------------------------------------------------------------------
CASES = {
    # name: (history, expected action, next c, next epochs)
    "accept": ([out(1.0, 7, "ok", 5.0, GOOD)], "accept", None, None),
    "accept-any-verdict-underfit": ([out(1.0, 7, "underfit", 5.0, GOOD)], "accept", None, None),
    "accept-any-verdict-overfit": ([out(1.0, 7, "overfit", 5.0, GOOD)], "accept", None, None),
    "underfit-more-epochs": ([out(1.0, 7, "underfit")], "more_epochs", 1.0, 10),
    "underfit-up-to-max-epochs": ([out(1.0, 37, "underfit")], "more_epochs", 1.0, 40),
    "underfit-at-max-epochs-lower-c": ([out(1.0, 40, "underfit")], "lower_c", 0.85, 7),
    "underfit-epochs-would-exceed-max": ([out(1.0, 38, "underfit")], "lower_c", 0.85, 7),
    "overfit-unbracketed-fewer-epochs": ([out(1.0, 10, "overfit")], "fewer_epochs", 1.0, 7),
    "overfit-bracketed-lower-c": ([out(1.0, 7, "underfit"), out(1.0, 10, "overfit")], "lower_c", 0.85, 7),
    "overfit-underfit-at-other-c-not-bracketed": (
        [out(0.85, 7, "underfit"), out(1.0, 10, "overfit")],
        "fewer_epochs",
        1.0,
        7,
    ),
    "overfit-underfit-at-more-epochs-not-bracketed": (
        [out(1.0, 13, "underfit"), out(1.0, 10, "overfit")],
        "fewer_epochs",
        1.0,
        7,
    ),
    "overfit-at-min-epochs-lower-c": ([out(1.0, 3, "overfit")], "lower_c", 0.85, 7),
    "overfit-down-to-min-epochs": ([out(1.0, 4, "overfit")], "fewer_epochs", 1.0, 1),
    "ok-privacy-unmet-lower-c": ([out(1.0, 10, "ok", 12.0, GOOD)], "lower_c", 0.85, 7),
    "ok-privacy-unmet-utility-unmet-lower-c": ([out(1.0, 10, "ok", 12.0, POOR)], "lower_c", 0.85, 7),
    "ok-privacy-met-utility-unmet-stop": ([out(1.0, 10, "ok", 5.0, POOR)], "stop", None, None),
    "lower-c-below-c-min-stop": ([out(0.2, 10, "ok", 12.0)], "stop", None, None),
    "lower-c-exactly-c-min": ([out(0.25, 10, "ok", 12.0)], "lower_c", 0.1, 7),
    "underfit-exhausted-below-c-min-stop": ([out(0.2, 40, "underfit")], "stop", None, None),
    "next-config-tried-fewer-epochs-stop": ([out(1.0, 4, "overfit"), out(1.0, 7, "overfit")], "stop", None, None),
    "next-config-tried-more-epochs-stop": ([out(1.0, 10, "ok", 12.0), out(1.0, 7, "underfit")], "stop", None, None),
    "next-config-tried-lower-c-stop": ([out(0.85, 7, "ok", 12.0), out(1.0, 7, "ok", 12.0)], "stop", None, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decision_table(name):
    history, action, next_c, next_epochs = CASES[name]
    d = decide(history, REQ, BASE, STEPS)
    assert d.action == action, d
    if action in ("accept", "stop"):
        assert d.next_c is None and d.next_epochs is None
    else:
        assert d.next_c == pytest.approx(next_c) and d.next_epochs == next_epochs
    assert d.reason


def test_stop_reasons_name_the_cause():
    assert "already tried" in decide(CASES["next-config-tried-fewer-epochs-stop"][0], REQ, BASE, STEPS).reason
    assert "c would fall below 0.1" in decide(CASES["lower-c-below-c-min-stop"][0], REQ, BASE, STEPS).reason
    assert "utility" in decide(CASES["ok-privacy-met-utility-unmet-stop"][0], REQ, BASE, STEPS).reason


def test_lower_c_is_rounded_not_drifting():
    c, seen = 1.0, []
    for _ in range(6):
        d = decide([out(c, 7, "ok", 50.0)], REQ, BASE, STEPS)
        c = d.next_c
        seen.append(c)
    assert seen == [0.85, 0.7, 0.55, 0.4, 0.25, 0.1]
    assert decide([out(0.1, 7, "ok", 50.0)], REQ, BASE, STEPS).action == "stop"


def test_case_study_path_seed_001():
    """c = 1 FT 7 under-fit → FT 10; FT 10 over-fit (bracketed) → c = 0.85 FT 7; fit ok but ε too high
    → c = 0.7 FT 7; under-fit → FT 10; both requirements met → accept."""
    results = {  # what each run "observes"
        (1.0, 7): ("underfit", 14.0, POOR),
        (1.0, 10): ("overfit", 13.0, POOR),
        (0.85, 7): ("ok", 11.0, GOOD),
        (0.7, 7): ("underfit", 9.5, POOR),
        (0.7, 10): ("ok", 8.0, GOOD),
    }
    history, path = [], []
    c, e = STEPS.start_c, STEPS.start_epochs
    for _ in range(10):
        verdict, eps, util = results[(c, e)]
        history.append(out(c, e, verdict, eps, util))
        d = decide(history, REQ, BASE, STEPS)
        path.append((c, e, d.action))
        if d.action in ("accept", "stop"):
            break
        c, e = d.next_c, d.next_epochs
    assert path == [
        (1.0, 7, "more_epochs"),
        (1.0, 10, "lower_c"),
        (0.85, 7, "lower_c"),
        (0.7, 7, "more_epochs"),
        (0.7, 10, "accept"),
    ]


# --- assess boundaries ---------------------------------------------------------------------------------------------
def test_epsilon_equal_to_target_is_not_met():
    privacy, _ = assess(out(1.0, 7, "ok", 10.0, GOOD), REQ, BASE)
    assert privacy is False
    assert assess(out(1.0, 7, "ok", 9.999, GOOD), REQ, BASE)[0] is True


def test_drop_exactly_at_the_limit_is_met():
    req = Requirements(10.0, 0.25, 0.25)
    base = {"weighted_f1": 1.0, "macro_f1": 0.5}
    at = Outcome(1.0, 7, 5.0, weighted_f1=0.75, macro_f1=0.375, verdict="ok")  # drops exactly 0.25 (exact binary)
    assert assess(at, req, base) == (True, True)
    below_w = Outcome(1.0, 7, 5.0, weighted_f1=0.7499, macro_f1=0.375, verdict="ok")
    below_m = Outcome(1.0, 7, 5.0, weighted_f1=0.75, macro_f1=0.3749, verdict="ok")
    assert assess(below_w, req, base) == (True, False)
    assert assess(below_m, req, base) == (True, False)


def test_better_than_baseline_is_met():
    assert assess(out(1.0, 7, "ok", 5.0, {"weighted_f1": 0.9, "macro_f1": 0.6}), REQ, BASE) == (True, True)


# --- choose --------------------------------------------------------------------------------------------------------
def test_choose_best_macro_among_accepted():
    cells = [
        out(1.0, 7, "ok", 12.0, {"weighted_f1": 0.8, "macro_f1": 0.50}),  # best F1, privacy unmet
        out(0.85, 7, "ok", 9.0, {"weighted_f1": 0.75, "macro_f1": 0.46}),
        out(0.7, 7, "ok", 7.0, {"weighted_f1": 0.76, "macro_f1": 0.48}),  # best among accepted
        out(0.7, 10, "ok", 6.0, POOR),  # utility unmet
    ]
    assert choose(cells, REQ, BASE) == cells[2]


def test_choose_tie_goes_to_lower_epsilon():
    cells = [out(1.0, 7, "ok", 9.0, GOOD), out(0.85, 7, "ok", 6.0, GOOD), out(0.7, 7, "ok", 8.0, GOOD)]
    assert choose(cells, REQ, BASE) == cells[1]


def test_choose_none_when_nothing_meets_both():
    cells = [out(1.0, 7, "ok", 12.0, GOOD), out(0.7, 7, "ok", 5.0, POOR)]
    assert choose(cells, REQ, BASE) is None
    assert choose([], REQ, BASE) is None


# --- validation -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"target_epsilon": 0.0}, "target_epsilon"),
        ({"target_epsilon": -1.0}, "target_epsilon"),
        ({"max_drop_weighted": 0.0}, "max_drop_weighted"),
        ({"max_drop_weighted": 1.0}, "max_drop_weighted"),
        ({"max_drop_macro": 1.5}, "max_drop_macro"),
        ({"max_drop_macro": -0.1}, "max_drop_macro"),
    ],
)
def test_requirements_validation(kwargs, match):
    args = {"target_epsilon": 10.0, "max_drop_weighted": 0.1, "max_drop_macro": 0.1} | kwargs
    with pytest.raises(ValueError, match=match):
        Requirements(**args)


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"tune": {"target_epsilon": 0}}, "tune.target_epsilon"),
        ({"tune": {"max_drop_macro": 1.5}}, "tune.max_drop_macro"),
        ({"tune": {"max_drop_weighted": 0.0}}, "tune.max_drop_weighted"),
        ({"tune": {"grid_c": []}}, "tune.grid_c"),
        ({"tune": {"grid_epochs": []}}, "tune.grid_epochs"),
        ({"tune": {"grid_c": [1.0, 2.5]}}, "c must lie in (0, 2]"),
        ({"tune": {"grid_epochs": [0]}}, "epochs be >= 1"),
        ({"tune": {"budget": 0}}, "tune.budget"),
        ({"tune": {"unknown": 1}}, "tune.unknown"),
        ({"selection": {"gamma": 0}}, "selection.gamma"),
        ({"selection": {"gamma": 0.0}}, "selection.gamma"),
        ({"selection": {"gamma": 1.5}}, "selection.gamma"),
        ({"selection": {"tau": 1.01}}, "selection.tau"),
        ({"selection": {"split": "train"}}, "selection.split"),
        ({"data": {"validation_size": 1.0}}, "data.validation_size"),
        ({"data": {"validation_size": -0.1}}, "data.validation_size"),
    ],
)
def test_bad_tune_and_selection_params_one_line(raw, key):
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("params.yaml: ")
    assert key in msg


def test_good_tune_and_selection_params():
    p = parse_params(
        {
            "tune": {"grid_c": [1.0, 0.7], "grid_epochs": [2, 3], "budget": 1},
            "selection": {"gamma": 1.0, "tau": 0.0},
            "data": {"validation_size": 0.3},
        }
    )
    assert p.tune.grid_c == [1.0, 0.7] and p.selection.gamma == 1.0 and p.data.validation_size == 0.3
    assert parse_params({}).data.validation_size == 0.2 and parse_params({}).selection.split == "validation"
