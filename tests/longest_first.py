"""The suite's order: the modules that took longest first (``make test`` splits the modules between worker
processes, ``pytest -n 3 --dist loadfile --no-loadscope-reorder``, each taking the next module in this order
when it is nearly done with its own; started last, one long module would leave the others idle at the end.
pytest-xdist's own default order, by number of tests, put the served-retrain module's three tests last).
Each module's seconds are those of a recorded run (``tests/durations.json``; ``make test-durations`` records
them again); a module not recorded counts as 0 and keeps its collection place among those. Only the order changes: every test runs, with the same fixtures.

conftest.py imports the hooks below (pytest finds them there by name).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

RECORD = Path(__file__).with_name("durations.json")


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """``items`` (anything with a ``nodeid``) grouped by module, the modules by recorded seconds, longest first;
    the collection order within a module and among equal modules."""
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(module_of(item.nodeid), i)
    return sorted(items, key=lambda it: (-seconds.get(module_of(it.nodeid), 0.0), first[module_of(it.nodeid)]))


def pytest_addoption(parser):
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each module's seconds (setup, call, teardown) to {RECORD.name}",
    )


def pytest_collection_modifyitems(session, config, items):
    seconds = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file() else {}
    items[:] = longest_first(items, seconds)


_SPENT: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    _SPENT[module_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if config.getoption("--record-durations") and not hasattr(config, "workerinput") and exitstatus == 0:
        ranked = dict(sorted(((m, round(s, 1)) for m, s in _SPENT.items()), key=lambda kv: -kv[1]))
        RECORD.write_text(json.dumps(ranked, indent=0) + "\n", encoding="utf-8")
