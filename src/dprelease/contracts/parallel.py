"""Where independent chunks of a computation run: a mapper chosen by the caller's context.

A *mapper* takes a module-level function and an iterable of picklable items and yields ``fn(item)`` for
every item, IN ITEM ORDER, however (and wherever) it computes them. Code that can split its work calls
:func:`map_chunks`; the orchestration layer installs another mapper with :func:`use` (the Prefect flows
install one that submits each item as a task to a Dask cluster: ``tasks/parallel.py``). With none
installed, :func:`map_chunks` maps sequentially in this process and :func:`active` is false, so a caller
may keep its plain loop there.

Pure: no orchestration imports. The installed mapper lives in a :class:`contextvars.ContextVar`, so it
follows the flow's context (threads started by Prefect copy it) and never leaks between runs.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Mapper = Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]


def sequential(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """The default mapper: one item after the other, in this process (items consumed lazily).

    Args:
        fn: the function applied to each item.
        items: the items.

    Returns:
        ``fn(item)`` for each item, in order."""
    for item in items:
        yield fn(item)


_MAPPER: ContextVar[Mapper | None] = ContextVar("dprelease_mapper", default=None)


def active() -> bool:
    """Whether a mapper was installed with :func:`use` in this context."""
    return _MAPPER.get() is not None


def map_chunks(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """``fn(item)`` for every item, in item order, with the installed mapper (default: :func:`sequential`).

    ``fn`` must be a module-level function and items picklable: a mapper may run them in other processes.

    Args:
        fn: the function applied to each item.
        items: the items.

    Returns:
        The results, in item order."""
    return (_MAPPER.get() or sequential)(fn, items)


@contextmanager
def use(mapper: Mapper):
    """Install ``mapper`` for the code run inside the ``with`` block (this context only).

    Args:
        mapper: a function ``(fn, items) -> iterator of results`` in item order."""
    token = _MAPPER.set(mapper)
    try:
        yield mapper
    finally:
        _MAPPER.reset(token)
