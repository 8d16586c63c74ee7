"""One cached Prefect task per registered stage (:mod:`dprelease.pipeline.registry`).

The cache key is :func:`dprelease.pipeline.cache.input_key` (params the stage reads, content hashes of its
inputs, its declared code). A completion stamp next to the artifacts says which key produced the
outputs on disk (and the summary that run returned): if they are current, the task returns that summary;
if they are missing or came from another key, it restores them from the stage store (verified) or runs
the stage. Finished outputs go to the stage store, shared by every root this Prefect home serves: an
index whose bytes are DVC cache objects (the project's ``.dvc/cache``), and in a DVC project root each
stage is then recorded in ``dvc.lock`` (:mod:`tasks.dvc_record`): one cache, which DVC pushes and pulls.

Prefect's home and database are operator-only (:mod:`tasks.prefect_home`): they keep every task run's start and
end, so the durations of the untimed stages too (docs/hygiene.md).

Prefect itself persists no result and caches nothing here (``persist_result=False``, no cache policy):
Prefect deserializes a stored result with the serializer named *inside* the file, so a replaced result
file naming pickle would run code when read back. With nothing persisted, nothing is ever read back; the
stamps and the stage store (JSON and hashed files, never unpickled) are the only cache.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE
from prefect.settings import PREFECT_HOME

from dprelease.contracts.stage import Stage
from dprelease.core import offline  # noqa: F401  (before anything loads transformers)
from dprelease.core.config import Params
from dprelease.core.io import private_dir
from dprelease.core.release import signing
from dprelease.pipeline import cache, registry, stage_store
from dprelease.pipeline.registry import run_stage
from tasks import dvc_record, prefect_home, server_guard

server_guard.install()
prefect_home.make_private()  # before the temporary server creates its database (0600, not the umask's 0644)


HOW: dict[str, str] = {}  # how each stage of this process's flows finished: current | store | dvc.lock | ran
HANDED: dict[tuple[str, str], Stage] = {}  # (name, input key) -> the declaration a plan handed on (this process)


def store_dir() -> Path:
    """Finished stage outputs by input key, shared by every root this Prefect home serves."""
    return Path(PREFECT_HOME.value()) / "stage-store"


@task(persist_result=False, cache_policy=NONE)
def stage_task(name: str, params: dict, root: str, key: str) -> dict:
    """The summary of the current outputs (stamp), or restore them from the store (verified), or run the
    stage and store them. Nothing is persisted by Prefect (see the module docstring)."""
    prefect_home.make_private()  # the store holds every task run's times (select's, reweight's): operator-only
    p = Params.model_validate(params)
    stage = HANDED.get((name, key)) or registry.get(p, name)  # looked up only in another process (Dask)
    private_dir(Path(root) / p.artifacts)
    summary = cache.current_summary(stage, p, key, root)
    current, HOW[name] = summary is not None, "current"
    # outputs DVC describes as current (e.g. `dvc pull`ed into a second clone with the keys imported); not for a stage
    # whose evidence is present (read when present, not a DVC dep: a new audit must still rebuild the card)
    # only for outputs this clone's flows never stamped (a normal re-run with changed inputs asks DVC nothing)
    if (
        summary is None
        and stage.shared
        and not any((Path(root) / e).exists() for e in stage.evidence)
        and not (Path(root) / p.artifacts / ".stamps" / f"{name}.json").exists()
        and dvc_record.restored(name, p, root)
    ):
        summary, HOW[name] = {"restored": "dvc.lock"}, "dvc.lock"
        cache.mark_done(stage, p, key, root, summary)
        dvc_record.mark_recorded(name, p, root, key)  # dvc.lock describes them already: no `dvc commit` to run
        return summary
    if summary is None:
        summary, HOW[name] = (stage_store.restore(store_dir(), key, Path(root)) if stage.shared else None), "store"
        if summary is None:
            HOW[name] = "ran"
            summary = run_stage(name, p, root, stage=stage)
            dvc_record.forget_status(root)
            if stage.shared:  # a stage standing for a private file outside its key (the secret) is never shared
                objects = dvc_record.objects_dir(root, store_dir())
                stage_store.save(store_dir(), key, stage.produced, Path(root), summary, objects)
        cache.mark_done(stage, p, key, root, summary)
    # in a DVC project root: its outputs and dvc.lock entry (else a no-op); current outputs: only if not yet recorded
    dvc_record.record(name, p, root, key if current else None)
    return summary


@task(persist_result=False, cache_policy=NONE)
def track_task(params: dict, root: str, run_name: str | None = None, timings: dict | None = None) -> str:
    from dprelease.pipeline.tracking import log_pipeline_run

    return log_pipeline_run(Params.model_validate(params), root, run_name, timings=timings)


@task(persist_result=False, cache_policy=NONE)
def track_compare_task(params: dict, root: str) -> str:
    from dprelease.pipeline.tracking_experiments import log_compare_run

    return log_compare_run(Params.model_validate(params), root)


def _prepared(name: str, params: Params, root: str | Path, stage: Stage | None = None):
    stage = stage if stage is not None else registry.get(params, name)
    if stage.signs:  # the agency key exists before its public half's hash enters the stage's key
        signing.ensure_key(signing.key_folder(params, root))
    key = cache.input_key(stage, params, root)
    HANDED[(name, key)] = stage
    t = stage_task.with_options(name=name, task_run_name=name)
    return t, (name, params.model_dump(mode="json"), str(root), key)


def run(name: str, params: Params, root: str | Path = ".", *, stage: Stage | None = None) -> dict:
    """Run (or take from the cache) one stage, in this thread; ``stage``: its declaration from the caller's plan."""
    t, args = _prepared(name, params, root, stage)
    return t(*args)


def submit(name: str, params: Params, root: str | Path = ".", *, stage: Stage | None = None):
    """Submit one stage to the flow's task runner (its inputs must already exist); returns a future."""
    t, args = _prepared(name, params, root, stage)
    return t.submit(*args)
