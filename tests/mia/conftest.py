"""The audit's worker processes in this folder's tests: one (in the test process) unless a test asks for more
(tests/mia/test_workers.py runs the stages with two and compares)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def one_audit_worker(monkeypatch):
    monkeypatch.setenv("DPRELEASE_AUDIT_WORKERS", "1")
