"""A flow's plan from the stage graph: which stages, in which order, each waiting on which others.

Pure: stage declarations in, names out. A flow names what it must finish (groups, target stages, stages to
run last); every active stage that produces one of their ``deps`` joins the plan, recursively. A stage waits
on the planned producers of its deps and of its evidence (a planned stage whose output it reads when
present), so the order — and which stages may run at once — follows from the declared inputs and outputs.
Ties keep the declaration order, so a one-worker run is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.errors import ConfigError


@dataclass(frozen=True)
class Plan:
    order: list[str]  # a topological order of the planned stages
    waits: dict[str, set[str]]  # stage -> planned stages it must wait for
    stages: dict[str, Stage] = field(default_factory=dict)  # the planned stages' declarations, handed to the runner
    owners: dict[str, str] = field(default_factory=dict)  # stage -> the package that declared it, when known


def _covers(out: str, path: str) -> bool:
    """An output ``out`` provides ``path`` when they are the same or one is a folder holding the other."""
    return out == path or path.startswith(out.rstrip("/") + "/") or out.startswith(path.rstrip("/") + "/")


def producers(stages: list[Stage], path: str) -> list[str]:
    return [s.name for s in stages if any(_covers(o, path) for o in s.produced)]


def plan(
    stages: list[Stage],
    params: Params,
    *,
    groups: tuple[str, ...] = (),
    targets: tuple[str, ...] = (),
    then: tuple[str, ...] = (),
) -> Plan:
    active = [s for s in stages if s.active(params)]
    by_name = {s.name: s for s in active}
    unknown = [t for t in (*targets, *then) if t not in {s.name for s in stages}]
    if unknown:
        raise ConfigError(f"unknown stage(s) {unknown} (known: {', '.join(s.name for s in stages)})")
    wanted = [s.name for s in active if s.group in groups] + [t for t in (*targets, *then) if t in by_name]
    needed: set[str] = set()
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        for dep in by_name[name].deps:
            todo += [p for p in producers(active, dep) if p != name]
    last = [t for t in then if t in by_name]
    waits = {}
    for name in needed:
        s = by_name[name]
        waits[name] = {p for path in s.inputs for p in producers(active, path) if p in needed and p != name}
        if name in last:  # run last: after every other planned stage
            waits[name] |= needed - set(last[last.index(name) :])
        else:
            waits[name] -= set(last)
    order: list[str] = []
    remaining = [s.name for s in active if s.name in needed]  # declaration order breaks ties
    while remaining:
        ready = next((n for n in remaining if waits[n] <= set(order)), None)
        if ready is None:
            raise ConfigError(f"stage graph has a cycle among {remaining}")
        order.append(ready)
        remaining.remove(ready)
    return Plan(order=order, waits=waits, stages={n: by_name[n] for n in order})
