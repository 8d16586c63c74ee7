"""The flows' task runners: threads by default, Prefect's Dask task runner with ``dask.enabled``.

* :func:`task_runner` — a ``ThreadPoolTaskRunner`` or a ``DaskTaskRunner`` (prefect-dask): a local cluster
  of ``dask.workers`` worker processes running one task at a time, or the scheduler at ``dask.address``.
  The runner depends on params, so flows get it at call time: ``flow.with_options(task_runner=...)``.
* :func:`on_dask` — entered inside a flow run. On a Dask runner it (1) points the workers at this run's
  Prefect API, and (2) installs :func:`tasks.parallel.task_mapper`, so posterior passes run their
  seeded chunks as tasks on the cluster. Elsewhere it does nothing.

Worker processes and the API: without ``PREFECT_API_URL`` Prefect runs a temporary server owned by the
flow process. Dask workers rebuild the flow's settings from the submitting context, which has no API URL
either, so each worker would start (and migrate) a temporary server of its own on the same database. The
flow run's own client URL is therefore put into the settings that tasks carry to the workers. A real
cluster (``dask.address``) needs a Prefect server its workers can reach (``PREFECT_API_URL``) and the
project's filesystem at the same path (chunks read the features and moments from the layout).

Threads: a local cluster's workers start with this process's torch thread count, so stages that run on
them (arms, tuning cells) give this process's numbers; a chunk task uses one thread while it runs (the
workers are the parallelism), which leaves the per-record losses bit for bit unchanged (checked by
tests/contracts/test_parallel.py). Results are bit-identical to the in-process run whatever the number of workers
(tests/flows/test_dask.py, benchmarks/bench_dask.py). Workers of a cluster at ``dask.address`` should be
started with the flow's thread count (``OMP_NUM_THREADS``) for the same guarantee on arms and cells.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from dprelease.contracts import parallel
from dprelease.core.config import Params

if TYPE_CHECKING:  # Prefect is imported where a runner is made or a flow runs, not by `python -m flows.X --help`
    from prefect.task_runners import TaskRunner


def task_runner(params: Params, threads: int = 2) -> TaskRunner:
    """A Dask task runner with ``dask.enabled``, else a pool of ``threads`` threads."""
    d = params.dask
    if not d.enabled:
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=threads)
    quiet_dask()
    from prefect_dask import DaskTaskRunner

    if d.address:
        return DaskTaskRunner(address=d.address)
    return DaskTaskRunner(
        cluster_class=local_cluster,
        cluster_kwargs={"n_workers": d.workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None},
    )


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def local_cluster(**kwargs):
    """A ``distributed.LocalCluster`` whose worker processes start with THIS process's torch thread count
    (Dask's default is 1). A stage that runs on a worker (a comparison arm, a tuning cell) then computes
    exactly what it computes here: torch's CPU reductions split their work by thread, so e.g. the SWAG
    temperature calibration differs in the last bit between 1 and 2 threads. Chunk tasks switch to one
    thread for their own duration (tasks/parallel.py): the per-record losses do not depend on it."""
    import dask
    import torch
    from distributed import LocalCluster

    n = str(torch.get_num_threads())
    env = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **{k: n for k in THREAD_VARS}}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        return LocalCluster(**kwargs)


def quiet_dask() -> None:
    """Dask's own INFO lines (cluster start, every worker's banner) down to warnings: here, and in worker
    processes started from here (they read the environment when they import distributed)."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    logging.getLogger("distributed").setLevel(logging.WARNING)


def is_dask(runner: TaskRunner | None) -> bool:
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:  # pragma: no cover - pinned dependency
        return False
    return isinstance(runner, DaskTaskRunner)


@contextmanager
def on_dask():
    """Inside a flow run on a Dask task runner: workers report to this run's API and posterior-pass chunks
    are tasks on the cluster (see the module docstring). A no-op on any other runner."""
    from prefect.context import FlowRunContext
    from prefect.settings import PREFECT_API_URL, temporary_settings

    ctx = FlowRunContext.get()
    if ctx is None or not is_dask(ctx.task_runner):
        yield False
        return
    from tasks.parallel import task_mapper

    with ExitStack() as stack:
        if not PREFECT_API_URL.value():
            url = str(ctx.client.api_url).rstrip("/")
            if url.startswith("http://ephemeral-prefect"):  # an in-process app: nothing a worker could reach
                raise RuntimeError("Dask workers need a Prefect API server; set PREFECT_API_URL")
            stack.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))
        stack.enter_context(parallel.use(task_mapper))
        yield True
