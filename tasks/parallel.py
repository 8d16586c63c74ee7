"""Chunks of a posterior pass as Prefect tasks on the flow's task runner (the Dask cluster).

:func:`task_mapper` is a :mod:`dprelease.contracts.parallel` mapper: each item becomes one ``chunk`` task run
submitted to the current flow run's task runner; results come back in item order. A chunk's inputs
(SWAG moments, weights) and result (per-record maxima) are private: the task never persists its result,
never caches (no input hashing), prints nothing, and its arguments travel sealed so Prefect neither
inspects nor records them (task runs store no parameter values; the name is ``chunk <index>``).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from prefect import task
from prefect.cache_policies import NONE


@contextmanager
def _one_thread():
    """Inside a Dask worker process: one torch thread while the chunk runs (the workers are the
    parallelism), then the worker's own setting again (stages may run there too: flows/runners.py).
    Elsewhere (a chunk run in the flow process) the process's setting is left alone."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        yield
        return
    from dprelease.core.threads import torch_threads

    with torch_threads(1):
        yield


class Sealed:
    """(fn, item) opaque to Prefect's parameter walk (it descends into tuples, dataclasses and models, and
    ``prefect.utilities.annotations.quote`` does not survive pickling to a worker: it comes back nested)."""

    __slots__ = ("call",)

    def __init__(self, fn: Callable, item) -> None:
        self.call = (fn, item)

    def __repr__(self) -> str:  # never the item itself in a log line or an error
        return f"Sealed({getattr(self.call[0], '__qualname__', 'fn')})"


@task(name="chunk", task_run_name="chunk {index}", persist_result=False, cache_policy=NONE, log_prints=False, retries=0)
def chunk_task(sealed: Sealed, index: int):
    fn, item = sealed.call
    with _one_thread():
        return fn(item)


def task_mapper(fn: Callable, items: Iterable) -> Iterator:
    """Submit every item (consumed lazily: each is submitted as soon as it exists), then yield the results
    in item order; a failed chunk raises its error here."""
    futures = [chunk_task.submit(Sealed(fn, item), i) for i, item in enumerate(items)]
    finished = False
    try:
        for future in futures:
            yield future.result()
        finished = True
    finally:
        if not finished:  # a chunk failed (or the caller stopped early): release the others
            for future in futures:
                future.wrapped_future.cancel()
