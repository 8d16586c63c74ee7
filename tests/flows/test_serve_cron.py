"""`make serve CRON="…"` / `python -m flows.serve start --cron "…"`: the schedule without editing params.yaml; and
`make run`'s printed wall time is the flow's own (issue 38)."""

from __future__ import annotations

import time

import pytest
import yaml
from conftest import make_root, slice_raw

from dprelease.core.config import parse_params
from dprelease.core.errors import ConfigError


def test_cron_reaches_the_deployment_and_params_stay_unchanged(tmp_path, monkeypatch):
    import flows.serve as fs

    root = make_root(tmp_path)
    (root / "params.yaml").write_text(yaml.safe_dump(parse_params(slice_raw()).model_dump(mode="json")))
    before = (root / "params.yaml").read_bytes()
    seen = {}

    def fake_start(root_, *, deploy, **kw):
        seen["deploy"] = deploy
        return {"url": "http://127.0.0.1:0", "timings": {"server_start_s": 0, "deploy_s": 0}, "pids": {"worker": 1}}

    monkeypatch.setattr(fs.sv, "start", fake_start)
    assert fs.main(["start", "--root", str(root), "--cron", "*/5  * * * 1-5"]) == 0
    assert seen["deploy"][-2:] == ["--cron", "*/5 * * * 1-5"]
    assert (root / "params.yaml").read_bytes() == before
    p = parse_params(slice_raw())
    assert fs._schedule(p, "*/5 * * * 1-5").cron == "*/5 * * * 1-5"
    assert fs._schedule(p).cron == p.service.cron  # no --cron: service.cron
    assert fs.main(["start", "--root", str(root), "--cron", "every monday"]) == 2  # one line, nothing started
    with pytest.raises(ConfigError, match="not a cron schedule"):
        fs.check_cron("* * *")


def test_the_printed_wall_time_is_the_flows(tmp_path, monkeypatch):
    """Re-weighting is untimed (its duration depends on the data): it stays out of the per-stage list and of
    metrics/timings.json, but the wall time the operator reads is the whole flow's."""
    import flows.release as fr
    import flows.summary as summary

    params = parse_params(slice_raw())

    def slow_run(args, check, go):
        time.sleep(0.5)  # stages that are not itemised (re-weighting's refits)
        return 0, params, {"timings": {"stratify": 0.1}}

    printed = {}
    monkeypatch.setattr(fr.cli, "run", slow_run)
    monkeypatch.setattr(summary, "print_summary", lambda p, root, result, seconds: printed.update(seconds=seconds))
    assert fr.main(["--root", str(tmp_path), "--no-track"]) == 0
    assert printed["seconds"] >= 0.5
    assert any(
        not s.timed for s in __import__("dprelease.pipeline.registry", fromlist=["group"]).group(params, "release")
    )
