"""The pure parts of scripts/mlflow_screenshots.py: arguments, URLs, the Chromium command line and the
one-line error when no browser is installed. No browser and no MLflow server are started."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mlflow_screenshots", ROOT / "scripts" / "mlflow_screenshots.py")
shots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)


def test_defaults():
    args = shots.parse_args([])
    assert args.experiment == "dprelease"
    assert args.run_id is None
    assert args.out == Path("reports/ui")
    assert args.tracking_uri == f"sqlite:///{ROOT / 'mlflow.db'}"


def test_options():
    args = shots.parse_args(
        ["--experiment", "other", "--run-id", "abc123", "--out", "shots", "--tracking-uri", "sqlite:///x.db"]
    )
    assert (args.experiment, args.run_id, args.out, args.tracking_uri) == (
        "other",
        "abc123",
        Path("shots"),
        "sqlite:///x.db",
    )


def test_relative_sqlite_store_is_anchored_at_the_project(tmp_path):
    assert shots.store_uri("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert shots.store_uri("sqlite:////abs/m.db", tmp_path) == "sqlite:////abs/m.db"
    assert shots.store_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"


def test_urls():
    urls = shots.ui_urls("http://h:1", "7", "r1")
    assert list(urls) == ["runs_table.png", "run_page.png", "run_metrics.png", "run_artifacts.png"]
    # plain URLs: the view and the columns come from the app's first-visit defaults, not from the URL
    assert urls["runs_table.png"][0] == "http://h:1/#/experiments/7/runs"
    assert urls["run_page.png"][0] == "http://h:1/#/experiments/7/runs/r1"
    assert urls["run_metrics.png"][0] == "http://h:1/#/experiments/7/runs/r1/model-metrics"
    assert urls["run_artifacts.png"][0] == "http://h:1/#/experiments/7/runs/r1/artifacts"
    assert all(height >= 1000 for _, height in urls.values())
    reg = shots.ui_urls("http://h:1", "7", "r1", ("oiics autocoder", "3"))
    assert reg["registry.png"][0] == "http://h:1/#/models/oiics%20autocoder"
    assert reg["model_version.png"][0] == "http://h:1/#/models/oiics%20autocoder/versions/3"


def test_chromium_command(tmp_path):
    cmd = shots.chromium_command("/bin/chromium", "http://u", tmp_path / "a.png", tmp_path / "p", 1000, 15000)
    assert cmd[0] == "/bin/chromium" and cmd[-1] == "http://u"
    for flag in (
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--hide-scrollbars",
        "--window-size=1600,1000",
        "--virtual-time-budget=15000",
        f"--screenshot={tmp_path / 'a.png'}",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'p'}",
    ):
        assert flag in cmd
    dom = shots.chromium_command("/bin/chromium", "http://u", tmp_path / "a.png", tmp_path / "p", 1000, 15000, True)
    assert "--dump-dom" in dom and not any(f.startswith("--screenshot") for f in dom)


def test_visible_metric_columns_reads_the_rendered_header():
    def header(name, left, width=100):
        return (
            f'<div role="columnheader" tabindex="-1" aria-colindex="9" col-id="metrics.`{name}`" '
            f'aria-sort="none" style="left: {left}px; width: {width}px;">'
        )

    dom = (
        header("weighted_f1", 100)
        + header("epsilon", 0)
        + header("records", 750)
        + '<div col-id="attributes.`Models`">'
    )
    assert shots.visible_metric_columns(dom) == ["epsilon", "weighted_f1"]  # records ends past 800 px
    assert shots.visible_metric_columns(dom, within_px=900) == ["epsilon", "weighted_f1", "records"]
    assert shots.visible_metric_columns("<html></html>") == []


def test_missing_browser_is_a_one_line_error():
    with pytest.raises(SystemExit) as e:
        shots.find_browser(which=lambda name: None)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("error:")
    assert "apt-get install -y chromium" in msg


def test_browser_found_under_any_name():
    found = {"chromium-browser": "/usr/bin/chromium-browser"}
    assert shots.find_browser(which=found.get) == "/usr/bin/chromium-browser"
