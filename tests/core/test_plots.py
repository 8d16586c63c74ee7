import matplotlib
import numpy as np
import pandas as pd
import pytest

from dprelease.core.plots import f1_violin_plot, max_delta_plot, per_class_plot


def _check_png(path):
    assert path.read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no leftover temp files


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_max_delta_plot_rounds(tmp_path, rng):
    series = {"round 2": rng.gamma(2.0, 0.1, 200), "round 3": rng.gamma(2.0, 0.05, 200)}
    eps = {k: 2 * float(v.max()) for k, v in series.items()}
    out = tmp_path / "max_delta.png"
    max_delta_plot(series, eps, out)
    _check_png(out)


def test_max_delta_plot_single_round_single_draw(tmp_path):
    out = tmp_path / "one.png"
    max_delta_plot({"round 1": np.array([0.3])}, {}, out)  # eps falls back to 2*Delta
    _check_png(out)
    max_delta_plot({"round 1": np.array([0.3])}, {}, out)  # overwrite in place
    _check_png(out)


def test_f1_violin_plot(tmp_path, rng):
    out = tmp_path / "violin.png"
    f1_violin_plot(rng.normal(0.8, 0.01, 50), rng.normal(0.4, 0.02, 50), (0.81, 0.39), out, title="round 3")
    _check_png(out)


def test_f1_violin_plot_single_draw(tmp_path):
    out = tmp_path / "violin1.png"
    f1_violin_plot(np.array([0.8]), np.array([0.4]), (0.8, 0.4), out)
    _check_png(out)


def test_per_class_plot(tmp_path):
    df = pd.DataFrame(
        {
            "code": ["a", "b", "c", "d"],
            "train_size": [1000, 50, 3, 0],
            "test_support": [300, 20, 1, 0],
            "f1": [0.9, 0.5, 0.0, 0.0],
        }
    )
    out = tmp_path / "per_class.png"
    per_class_plot(df, out)
    _check_png(out)
    one = tmp_path / "single" / "pc.png"  # parent created
    per_class_plot(df.iloc[:1], one)
    _check_png(one)


def test_no_global_pyplot_state(tmp_path):
    backend = matplotlib.get_backend()
    max_delta_plot({"r": np.array([0.1, 0.2])}, {"r": 0.4}, tmp_path / "x.png")
    assert matplotlib.get_backend() == backend
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []
