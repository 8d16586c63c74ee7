"""tests/longest_first.py: the suite's order for ``make test``'s worker processes (longest modules first)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from longest_first import RECORD, longest_first


def _items(*nodeids: str) -> list:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_modules_longest_first_each_kept_whole_and_in_order():
    items = _items("a.py::t1", "a.py::t2", "b.py::t1", "c.py::t1", "c.py::t2", "d.py::t1")
    ordered = [i.nodeid for i in longest_first(items, {"c.py": 90.0, "a.py": 5.0, "b.py": 40.0})]
    # c (90 s), b (40 s), a (5 s), then d (not recorded: 0 s, its collection place among those)
    assert ordered == ["c.py::t1", "c.py::t2", "b.py::t1", "a.py::t1", "a.py::t2", "d.py::t1"]
    assert longest_first(items, {}) == items  # nothing recorded: the collection order


def test_the_record_names_modules_of_this_suite_with_their_seconds():
    seconds = json.loads(RECORD.read_text(encoding="utf-8"))
    assert seconds and all(m.startswith("tests/") and m.endswith(".py") and s >= 0 for m, s in seconds.items())
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
    missing = [m for m in seconds if not (RECORD.parents[1] / m).is_file()]
    assert len(missing) <= len(seconds) // 10, f"tests/durations.json names modules that are gone: {missing}"
