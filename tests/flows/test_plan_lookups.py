"""Every stage looked up once per plan: a flow's plan declares every plug-in's stages once and hands the
declarations to the runner, so the tasks, the stage runs and the summary look nothing up again. Counted by
wrapping each plug-in's ``declare``; the stages themselves are stubs (nothing trains), the cache says none is
current and Prefect's task is called as a plain function."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from conftest import make_root

from dprelease.contracts import plugins
from dprelease.core.config import parse_params
from dprelease.core.release import stages as release_stages
from dprelease.pipeline import cache, registry, stage_store


def _ran(params, root, **kw) -> dict:
    return {}


@pytest.fixture
def declares(monkeypatch) -> Counter:
    """Each plug-in's ``declare`` calls (its stages' run functions stubbed), and a stage run without Prefect."""
    import tasks.stages as ts
    from tasks import dvc_record

    calls: Counter = Counter()
    real, wrapped = registry.plugin, {}

    def plugin(package):
        if package not in wrapped:
            m = real(package)

            def declare(params, _m=m, _p=package):
                calls[_p] += 1
                return [replace(s, run=_ran, runs_stages=False) for s in _m.declare(params)]

            checked = None if m.check is None else (lambda params, root: None)  # preflight reads no data here
            wrapped[package] = replace(m, declare=declare, check=checked)
        return wrapped[package]

    monkeypatch.setattr(registry, "plugin", plugin)
    publish_stage = release_stages.publish_stage
    monkeypatch.setattr(release_stages, "publish_stage", lambda *a: [replace(s, run=_ran) for s in publish_stage(*a)])
    monkeypatch.setattr(cache, "input_key", lambda stage, params, root=".": f"key-{stage.name}")
    monkeypatch.setattr(cache, "current_summary", lambda *a, **k: None)
    monkeypatch.setattr(cache, "mark_done", lambda *a, **k: None)
    monkeypatch.setattr(stage_store, "restore", lambda *a, **k: None)
    monkeypatch.setattr(stage_store, "save", lambda *a, **k: None)
    monkeypatch.setattr(dvc_record, "objects_dir", lambda *a, **k: None)
    monkeypatch.setattr(ts.signing, "ensure_key", lambda *a, **k: None)

    fn = ts.stage_task.fn

    class Plain:  # the Prefect task's function, called in this thread
        def with_options(self, **kw):
            return fn

    monkeypatch.setattr(ts, "stage_task", Plain())
    return calls


def test_the_release_flow_declares_each_plug_in_once(declares, tmp_path):
    from flows.release import _release_flow

    params = parse_params({})
    out = _release_flow(params.model_dump(mode="json"), str(make_root(tmp_path)), track=False)
    ran = [n for n in out if n != "timings"]
    assert "publish" in ran and len(ran) > 3
    assert declares == Counter(dict.fromkeys(plugins.PACKAGES, 1)), declares


def test_a_plug_in_flow_plan_declares_each_plug_in_once(declares, tmp_path):
    from flows.run import plan_of, preflight, run_plan

    params, root = parse_params({}), str(make_root(tmp_path))
    spec = registry.flows()["release"]
    plan = plan_of(spec, params)
    preflight(spec, params, root, plan=plan)
    run_plan(plan, params, root, {})
    assert len(plan.order) > 3
    assert declares == Counter(dict.fromkeys(plugins.PACKAGES, 1)), declares
