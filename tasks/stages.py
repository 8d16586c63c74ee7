"""One cached Prefect task per registered stage (:mod:`dprelease.registry`).

The cache key is :func:`dprelease.cache.input_key` (params the stage reads, content hashes of its
inputs, its declared code). A completion stamp next to the artifacts says which key produced the
outputs on disk; if they are missing or came from another key, the task runs again and refreshes the
cache. Finished outputs go to the stage store, shared by every root this Prefect home serves.
"""

from __future__ import annotations

from pathlib import Path

from dprelease import offline  # noqa: F401  (before anything loads transformers)
from dprelease import cache, registry, stage_store
from dprelease.config import Params
from dprelease.io import private_dir
from dprelease.registry import run_stage
from prefect import task
from prefect.settings import PREFECT_HOME

from . import server_guard

server_guard.install()


def _cache_key(_context, parameters: dict) -> str:
    return parameters["key"]


def store_dir() -> Path:
    """Finished stage outputs by input key, shared by every root this Prefect home serves."""
    return Path(PREFECT_HOME.value()) / "stage-store"


@task(cache_key_fn=_cache_key, persist_result=True, result_serializer="json")
def stage_task(name: str, params: dict, root: str, key: str) -> dict:
    """Restore the stage's outputs from the store (verified) or run it and store them. Results are
    persisted as JSON (never pickle: a replaced result file must not be able to run code)."""
    p = Params.model_validate(params)
    stage = registry.get(p, name)
    private_dir(Path(root) / p.artifacts)
    summary = stage_store.restore(store_dir(), key, Path(root)) if stage.shared else None
    if summary is None:
        summary = run_stage(name, p, root)
        if stage.shared:
            stage_store.save(store_dir(), key, stage.produced, Path(root), summary)
    cache.mark_done(stage, p, key, root)
    return summary


@task(persist_result=False)
def track_task(params: dict, root: str, run_name: str | None = None, timings: dict | None = None) -> str:
    from dprelease.tracking import log_pipeline_run

    return log_pipeline_run(Params.model_validate(params), root, run_name, timings=timings)


@task(persist_result=False)
def track_compare_task(params: dict, root: str) -> str:
    from dprelease.tracking import log_compare_run

    return log_compare_run(Params.model_validate(params), root)


def _prepared(name: str, params: Params, root: str | Path):
    stage = registry.get(params, name)
    key = cache.input_key(stage, params, root)
    fresh = not cache.is_current(stage, params, key, root)
    t = stage_task.with_options(name=name, task_run_name=name, refresh_cache=fresh)
    return t, (name, params.model_dump(mode="json"), str(root), key)


def run(name: str, params: Params, root: str | Path = ".") -> dict:
    """Run (or take from the cache) one stage, in this thread."""
    t, args = _prepared(name, params, root)
    return t(*args)


def submit(name: str, params: Params, root: str | Path = "."):
    """Submit one stage to the flow's task runner (its inputs must already exist); returns a future."""
    t, args = _prepared(name, params, root)
    return t.submit(*args)
