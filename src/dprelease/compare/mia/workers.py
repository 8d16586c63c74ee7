"""Where the audit's independent fits run: a pool of worker processes sized to the cores, ONE torch thread each.

Torch's intra-op threads spin while they wait, so N busy processes × N threads slow each other many times over (issue
34); here each piece of work (pool embedding batches, LiRA reference fits, the canary run's stages) runs with one
thread in a ``spawn`` pool of ``count`` processes. Results do not depend on the number of workers: each piece is
seeded by itself and results come back in item order. The count: ``DPRELEASE_AUDIT_WORKERS``, else the usable cores,
at most the pieces of work; 1 (in this process) on a GPU or in a daemonic process.

See docs/audit.md, "Notes from the code", `compare/mia/workers.py`."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, TypeVar

import torch

from dprelease.core.errors import ConfigError
from dprelease.core.threads import torch_threads

T = TypeVar("T")
R = TypeVar("R")
ENV = "DPRELEASE_AUDIT_WORKERS"
_USED = {"workers": 0}  # the largest pool this process used (benchmarks/bench_audit.py prints it)
STATE: dict = {}  # what a worker's initialiser loaded once (features, the backend): read by the work functions


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def count(tasks: int, device: torch.device | str | None = None) -> int:
    """Worker processes for ``tasks`` independent pieces of work (module docstring)."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(f"{ENV} must be a whole number ≥ 1, got {raw!r}")
    else:
        n = cores()
    if device is not None and torch.device(device).type != "cpu":
        n = 1
    if multiprocessing.current_process().daemon:
        n = 1
    return max(1, min(n, tasks))


def ship(params, workers: int):
    """``params`` as a piece of work carries it: the object itself when the work runs here (no re-validation: the
    stage reads the values it was given), its JSON for fresh worker processes (validated again there by
    :func:`params_of`)."""
    return params if workers <= 1 else params.model_dump(mode="json")


def params_of(shipped):
    """The ``Params`` that :func:`ship` sent."""
    from dprelease.core.config import Params

    return shipped if isinstance(shipped, Params) else Params.model_validate(shipped)


def used() -> int:
    """The largest number of worker processes this process has used (0: none; the work ran here)."""
    return _USED["workers"]


def _start(init: Callable | None, initargs: tuple) -> None:
    torch.set_num_threads(1)  # before any torch work in this fresh interpreter: the workers are the parallelism
    torch.set_num_interop_threads(1)
    STATE.clear()
    if init is not None:
        init(*initargs)


def run_all(
    fn: Callable[[T], R], items: Iterable[T], *, workers: int, init: Callable | None = None, initargs: tuple = ()
) -> list[R]:
    """``[fn(item) for item in items]``, in item order, each with one torch thread: here when ``workers`` is 1,
    else in ``workers`` fresh processes, each running ``init(*initargs)`` once first (to fill :data:`STATE`).
    ``fn`` and ``init`` must be module-level functions and items picklable. Nothing is printed or logged."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        with torch_threads(1):
            STATE.clear()
            try:
                if init is not None:
                    init(*initargs)
                return [fn(item) for item in items]
            finally:
                STATE.clear()
    _USED["workers"] = max(_USED["workers"], workers)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_start, initargs=(init, initargs)
    ) as pool:
        return list(pool.map(fn, items))


def run_graph(fn: Callable[[T], R], jobs: dict[str, T], waits: dict[str, set[str]], *, workers: int) -> dict[str, R]:
    """``{name: fn(item)}`` for every job, each started once the jobs it waits on have finished, one torch thread
    each: here one after the other in ``jobs``' order (a topological order) when ``workers`` is 1, else up to
    ``workers`` at once in fresh processes. A failed job raises here (the jobs not yet started never start)."""
    if workers <= 1 or len(jobs) <= 1:
        with torch_threads(1):
            return {name: fn(item) for name, item in jobs.items()}
    from concurrent.futures import FIRST_COMPLETED, wait

    _USED["workers"] = max(_USED["workers"], workers)
    later: dict[str, set[str]] = {n: set() for n in jobs}  # the jobs that wait on each, directly or not
    for name in jobs:
        todo = list(waits.get(name, ()))
        while todo:
            w = todo.pop()
            if w in later and name not in later[w]:
                later[w].add(name)
                todo += waits.get(w, ())
    # the longest chains first (a job many others wait on), ties in the given order: the critical path never waits
    pending, running, done = sorted(jobs, key=lambda n: -len(later[n])), {}, {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start, initargs=(None, ())) as pool:
        try:
            while pending or running:
                for name in [n for n in pending if waits.get(n, set()) <= done.keys()][: workers - len(running)]:
                    pending.remove(name)
                    running[pool.submit(fn, jobs[name])] = name
                if not running:
                    raise RuntimeError(f"jobs never became ready: {pending}")
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    done[running.pop(future)] = future.result()
        finally:
            for future in running:
                future.cancel()
    return {name: done[name] for name in jobs}
