"""dprelease.core.utility.evaluate: scoring hand-made predictions, the quartile summary, the tables, arm_dir."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.core.utility.evaluate import arm_dir, quartile_summary, score, write_tables
from dprelease.core.utility.metrics import PER_CLASS_COLUMNS, QUARTILE_COLUMNS


def _info(c: int, sizes=None) -> dict:
    return {
        "codes": [f"C{i}" for i in range(c)],
        "titles": [f"title {i}" for i in range(c)],
        "train_sizes": list(sizes) if sizes is not None else [10 * (c - i) for i in range(c)],
    }


def test_perfect_predictions():
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 0])
    f1, per_class, quartiles = score(y, y.copy(), _info(4))
    assert f1 == {"weighted_f1": 1.0, "macro_f1": 1.0}
    assert list(per_class.columns) == PER_CLASS_COLUMNS
    assert per_class["f1"].tolist() == [1.0] * 4
    assert per_class["test_support"].tolist() == [4, 2, 2, 2]  # rows ranked by train size (C0 largest)
    assert list(quartiles.columns) == QUARTILE_COLUMNS
    assert quartiles["group"].tolist() == ["top quartile", "bottom quartile", "all classes"]
    assert quartiles["macro_f1"].tolist() == [1.0, 1.0, 1.0]


def test_never_predicted_class_counts_in_macro_f1():
    y = np.array([0, 0, 1, 1, 2, 2])
    pred = np.array([0, 0, 1, 1, 1, 1])  # class 2 is never predicted
    f1, per_class, _ = score(y, pred, _info(3))
    by_code = per_class.set_index("code")
    assert by_code.loc["C0", "f1"] == 1.0
    assert by_code.loc["C1", "f1"] == pytest.approx(2 / 3)  # precision 1/2, recall 1
    assert by_code.loc["C2", "f1"] == 0.0
    assert f1["macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert f1["weighted_f1"] == pytest.approx((2 * 1 + 2 * 2 / 3 + 2 * 0) / 6)


def test_class_absent_from_test_and_predictions_still_counts():
    y = np.array([0, 1, 1, 0])
    f1, per_class, _ = score(y, y.copy(), _info(3))  # class 2 neither in y nor predicted
    assert len(per_class) == 3
    assert per_class.set_index("code").loc["C2", ["test_support", "f1"]].tolist() == [0, 0.0]
    assert f1["macro_f1"] == pytest.approx(2 / 3)
    assert f1["weighted_f1"] == 1.0  # no test support: no weight


def _per_class_8() -> tuple[pd.DataFrame, pd.DataFrame]:
    # 8 classes, train sizes 80..10; perfect on the two largest, zero on the two smallest
    y = np.repeat(np.arange(8), 2)
    pred = y.copy()
    pred[y == 6] = 0
    pred[y == 7] = 1
    _, per_class, quartiles = score(y, pred, _info(8))
    return per_class, quartiles


def test_quartile_summary_on_small_table():
    per_class, quartiles = _per_class_8()
    assert quartiles.set_index("group").loc["top quartile", "n_classes"] == 2  # q = 8 // 4
    summary = quartile_summary(quartiles)
    assert list(summary) == [
        "top_quartile_weighted_f1",
        "top_quartile_macro_f1",
        "bottom_quartile_weighted_f1",
        "bottom_quartile_macro_f1",
    ]
    assert all(type(v) is float for v in summary.values())
    # top quartile = C0, C1: both predicted wherever true, but C0/C1 also get the false positives
    f1 = per_class.set_index("code")["f1"]
    assert summary["top_quartile_macro_f1"] == pytest.approx((f1["C0"] + f1["C1"]) / 2)
    assert summary["top_quartile_macro_f1"] == pytest.approx(2 / 3)  # precision 1/2, recall 1 each
    assert summary["top_quartile_weighted_f1"] == pytest.approx(2 / 3)  # equal support
    assert summary["bottom_quartile_macro_f1"] == 0.0
    assert summary["bottom_quartile_weighted_f1"] == 0.0


def test_quartile_summary_reads_the_named_rows_in_any_order():
    quartiles = pd.DataFrame(
        {
            "group": ["all classes", "bottom quartile", "top quartile"],
            "n_classes": [4, 1, 1],
            "train_size_range": ["1-4", "1-1", "4-4"],
            "test_support": [8, 2, 2],
            "macro_f1": [0.5, 0.25, 0.75],
            "weighted_f1": [0.6, 0.2, 0.8],
        }
    )
    assert quartile_summary(quartiles) == {
        "top_quartile_weighted_f1": 0.8,
        "top_quartile_macro_f1": 0.75,
        "bottom_quartile_weighted_f1": 0.2,
        "bottom_quartile_macro_f1": 0.25,
    }


def test_quartile_summary_with_fewer_than_four_classes_is_nan():
    _, _, quartiles = score(np.array([0, 1, 2]), np.array([0, 1, 2]), _info(3))
    summary = quartile_summary(quartiles)
    assert all(math.isnan(v) for v in summary.values())


def test_write_tables(tmp_path):
    per_class, quartiles = _per_class_8()
    folder = tmp_path / "reports" / "arms" / "x"
    write_tables(folder, per_class, quartiles)
    assert sorted(p.name for p in folder.iterdir()) == ["per_class_f1.csv", "quartiles.csv"]
    back = pd.read_csv(folder / "per_class_f1.csv", keep_default_na=False)
    assert list(back.columns) == PER_CLASS_COLUMNS
    assert back["code"].tolist() == per_class["code"].tolist()
    np.testing.assert_allclose(back["f1"].to_numpy(), per_class["f1"].to_numpy())
    q = pd.read_csv(folder / "quartiles.csv")
    assert list(q.columns) == QUARTILE_COLUMNS
    assert q["group"].tolist() == ["top quartile", "bottom quartile", "all classes"]
    assert quartile_summary(q) == pytest.approx(quartile_summary(quartiles))
    # writing again replaces the files
    write_tables(folder, per_class.head(3), quartiles)
    assert len(pd.read_csv(folder / "per_class_f1.csv")) == 3
    assert sorted(p.name for p in folder.iterdir()) == ["per_class_f1.csv", "quartiles.csv"]


def test_arm_dir(tmp_path):
    lay = Layout.from_params(parse_params({}), tmp_path)
    assert arm_dir(lay, "dpsgd") == tmp_path / "reports" / "arms" / "dpsgd"
    assert arm_dir(lay, "nonprivate") == lay.reports / "arms" / "nonprivate"
    assert not (tmp_path / "reports").exists()
