import math

import numpy as np
import pandas as pd
import pytest

from dprelease.core.utility.metrics import f1_summary, mean_sd, per_class_f1, quartile_table

# Tiny example, classes 0..2:
#   y_true = 0 0 0 1 1 2 ; y_pred = 0 0 1 1 1 1
#   class 0: TP=2 FP=0 FN=1 -> P=1,   R=2/3 -> F1 = 2*1*(2/3)/(1+2/3) = 4/5
#   class 1: TP=2 FP=2 FN=0 -> P=1/2, R=1   -> F1 = 2*(1/2)/(3/2)     = 2/3
#   class 2: never predicted, TP=0           -> F1 = 0 (zero_division=0)
#   supports 3, 2, 1 (total 6)
#   macro    = (4/5 + 2/3 + 0) / 3             = 22/45
#   weighted = (3*4/5 + 2*2/3 + 1*0) / 6       = (56/15)/6 = 28/45
Y_TRUE = np.array([0, 0, 0, 1, 1, 2])
Y_PRED = np.array([0, 0, 1, 1, 1, 1])


def test_f1_summary_hand_computed():
    out = f1_summary(Y_TRUE, Y_PRED, labels=[0, 1, 2])
    assert set(out) == {"weighted_f1", "macro_f1"}
    assert out["macro_f1"] == pytest.approx(22 / 45)
    assert out["weighted_f1"] == pytest.approx(28 / 45)
    assert all(isinstance(v, float) for v in out.values())


def test_never_predicted_class_lowers_macro():
    # Without class 2 in the label set: macro = (4/5 + 2/3) / 2 = 11/15 > 22/45.
    assert f1_summary(Y_TRUE, Y_PRED, labels=[0, 1])["macro_f1"] == pytest.approx(11 / 15)
    # A class of the problem absent from test set and predictions still counts as 0: 22/15 / 4.
    four = f1_summary(Y_TRUE, Y_PRED, labels=[0, 1, 2, 3])
    assert four["macro_f1"] == pytest.approx((22 / 15) / 4)
    assert four["weighted_f1"] == pytest.approx(28 / 45)  # zero support -> zero weight


def test_per_class_f1_columns_and_values():
    df = per_class_f1(
        Y_TRUE,
        Y_PRED,
        labels=[0, 1, 2],
        train_sizes=[50, 100, 10],
        codes=["10", "11", "12"],
        titles=["cut", "sprain", "burn"],
    )
    assert list(df.columns) == ["code", "title", "train_size", "test_support", "precision", "recall", "f1"]
    assert list(df["code"]) == ["11", "10", "12"]  # train_size desc
    assert list(df["title"]) == ["sprain", "cut", "burn"]
    assert list(df["train_size"]) == [100, 50, 10]
    assert list(df["test_support"]) == [2, 3, 1]
    np.testing.assert_allclose(df["precision"], [0.5, 1.0, 0.0])
    np.testing.assert_allclose(df["recall"], [1.0, 2 / 3, 0.0])
    np.testing.assert_allclose(df["f1"], [2 / 3, 4 / 5, 0.0])


def test_per_class_f1_ties_sorted_by_code_and_mapping_inputs():
    df = per_class_f1(
        Y_TRUE,
        Y_PRED,
        labels=[0, 1, 2],
        train_sizes={0: 7, 1: 7, 2: 7},
        codes={0: "c", 1: "a", 2: "b"},
        titles={0: "x", 1: "y", 2: "z"},
    )
    assert list(df["code"]) == ["a", "b", "c"]
    with pytest.raises(ValueError):
        per_class_f1(Y_TRUE, Y_PRED, [0, 1, 2], [1, 2], ["a", "b", "c"], ["x", "y", "z"])


def _synthetic_per_class():
    # 8 classes; F and G tie on train_size 200 -> the tie is broken by code, so G (after F) is bottom.
    rows = [  # code, train_size, test_support, f1  (deliberately shuffled)
        ("E", 400, 40, 0.5),
        ("A", 800, 90, 0.9),
        ("H", 100, 5, 0.0),
        ("C", 600, 60, 0.7),
        ("G", 200, 10, 0.2),
        ("B", 700, 70, 0.8),
        ("F", 200, 20, 0.4),
        ("D", 500, 50, 0.6),
    ]
    return pd.DataFrame(
        {
            "code": [r[0] for r in rows],
            "title": [r[0].lower() for r in rows],
            "train_size": [r[1] for r in rows],
            "test_support": [r[2] for r in rows],
            "precision": [r[3] for r in rows],
            "recall": [r[3] for r in rows],
            "f1": [r[3] for r in rows],
        }
    )


def test_quartile_table_exact():
    t = quartile_table(_synthetic_per_class())
    assert list(t.columns) == ["group", "n_classes", "train_size_range", "test_support", "macro_f1", "weighted_f1"]
    assert list(t["group"]) == ["top quartile", "bottom quartile", "all classes"]
    top, bottom, everything = (t.iloc[i] for i in range(3))
    # q = 8 // 4 = 2. Top: A (800, f1 .9, n 90), B (700, .8, 70).
    assert top["n_classes"] == 2 and top["train_size_range"] == "700-800" and top["test_support"] == 160
    assert top["macro_f1"] == pytest.approx((0.9 + 0.8) / 2)
    assert top["weighted_f1"] == pytest.approx((0.9 * 90 + 0.8 * 70) / 160)  # 137/160
    # Bottom: G (200, .2, 10), H (100, .0, 5); F loses the tie with G on code order.
    assert bottom["n_classes"] == 2 and bottom["train_size_range"] == "100-200" and bottom["test_support"] == 15
    assert bottom["macro_f1"] == pytest.approx(0.1)
    assert bottom["weighted_f1"] == pytest.approx(2 / 15)
    # All: macro = 4.1/8; weighted = (81+56+42+30+20+8+2+0)/345 = 239/345.
    assert everything["n_classes"] == 8 and everything["train_size_range"] == "100-800"
    assert everything["test_support"] == 345
    assert everything["macro_f1"] == pytest.approx(4.1 / 8)
    assert everything["weighted_f1"] == pytest.approx(239 / 345)


def test_quartile_table_few_classes():
    t = quartile_table(_synthetic_per_class().iloc[:3])
    assert list(t["n_classes"]) == [0, 0, 3]
    assert math.isnan(t.iloc[0]["macro_f1"])


def test_mean_sd():
    m, s = mean_sd([1.0, 2.0, 3.0, 4.0])
    assert m == pytest.approx(2.5)
    assert s == pytest.approx(np.sqrt(5 / 3))  # sum of squares 5, ddof=1 -> 5/3
    assert mean_sd([0.7]) == (0.7, 0.0)
    assert mean_sd(np.array([2, 2])) == (2.0, 0.0)
    with pytest.raises(ValueError):
        mean_sd([])
