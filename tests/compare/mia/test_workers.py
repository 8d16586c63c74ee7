"""The audit's worker processes (mia/workers.py) and its content-addressed cache (mia/audit_cache.py): one torch
thread per worker, results in item order and the same whatever the number of workers; cache entries private,
keyed by their contents, and a damaged one is a miss; the audit stages' outputs the same with one worker, two,
and from the cache."""

from __future__ import annotations

import stat

import numpy as np
import pytest
import torch

from dprelease.compare.mia import audit_cache, workers
from dprelease.core.errors import ConfigError


def _work(seed: int) -> tuple[int, np.ndarray]:
    """Seeded work with a reduction (a sum over a matrix product): one torch thread makes it reproducible."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(300, 200, generator=g)
    return torch.get_num_threads(), (a @ a.T).sum(1).numpy()


def _scaled(item: int) -> float:
    return workers.STATE["scale"] * item


def _set_scale(scale: float) -> None:
    workers.STATE["scale"] = scale


def test_count_is_the_cores_capped_by_the_work_and_the_operator(monkeypatch):
    monkeypatch.delenv(workers.ENV, raising=False)
    assert workers.count(100) == workers.cores() and workers.count(1) == 1
    monkeypatch.setenv(workers.ENV, "3")
    assert workers.count(100) == 3 and workers.count(2) == 2
    assert workers.count(100, "cuda") == 1  # processes would queue on one GPU
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(workers.ENV, bad)
        with pytest.raises(ConfigError, match=workers.ENV):
            workers.count(4)


def test_one_worker_and_two_give_the_same_results_in_item_order_with_one_thread_each():
    seeds = [5, 1, 9, 3]
    here = workers.run_all(_work, seeds, workers=1)
    there = workers.run_all(_work, seeds, workers=2)
    assert [t for t, _ in here] == [t for t, _ in there] == [1] * 4
    for (_, a), (_, b) in zip(here, there):
        assert np.array_equal(a, b)
    assert workers.used() >= 2
    assert workers.run_all(_scaled, [1, 2, 3], workers=2, init=_set_scale, initargs=(2.0,)) == [2.0, 4.0, 6.0]
    assert workers.run_all(_scaled, [1, 2, 3], workers=1, init=_set_scale, initargs=(3.0,)) == [3.0, 6.0, 9.0]
    assert workers.STATE == {}  # the in-process initialiser's data does not outlive the work


def test_a_graph_runs_each_job_after_those_it_waits_on_and_gives_the_same_results():
    jobs = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    waits = {"c": {"a", "b"}, "d": {"c"}}
    one = workers.run_graph(_work, jobs, waits, workers=1)
    two = workers.run_graph(_work, jobs, waits, workers=2)
    assert list(one) == list(two) == list(jobs)
    assert all(np.array_equal(one[k][1], two[k][1]) and one[k][0] == two[k][0] == 1 for k in jobs)


def test_cache_entries_are_private_keyed_by_content_and_a_damaged_one_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv(audit_cache.ENV, str(tmp_path / "cache"))
    assert audit_cache.text_hash(["ab", "c"]) != audit_cache.text_hash(["a", "bc"])  # framed
    assert audit_cache.key("k", a=1, b=[2]) == audit_cache.key("k", b=[2], a=1) != audit_cache.key("k", a=2, b=[2])
    k = audit_cache.key("embeddings", texts=audit_cache.text_hash(["x"]))
    assert audit_cache.load("embeddings", k) is None
    x = torch.randn(3, 4)
    audit_cache.save("embeddings", k, {"x": x})
    assert torch.equal(audit_cache.load("embeddings", k)["x"], x)
    assert audit_cache.load("embeddings", audit_cache.key("other")) is None
    files = list((tmp_path / "cache").rglob("*"))
    assert all(stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600) for p in files)
    entry = next(p for p in files if p.is_file())
    blob = bytearray(entry.read_bytes())
    blob[-1] ^= 0xFF  # one flipped bit of the tensor data
    entry.write_bytes(bytes(blob))
    assert audit_cache.load("embeddings", k) is None and not entry.exists()  # removed: recomputed next time


SMALL = {"pool_size": 300, "references": 3, "canaries": 40, "input_canaries": 200, "guess_grid": [10, 40]}
AUDIT = ["audit_pool", "audit_references", "canary_runs"]


def _audit_outputs(root) -> dict[str, str]:
    """A hash of every file the audit stages wrote (per-record data included: compared here, never printed)."""
    from dprelease.core.io import file_hash

    tops = (
        "artifacts/audit/pool",
        "artifacts/audit/references",
        "artifacts/audit/canary_run/artifacts/arms",
        "artifacts/audit/canary_run/planted/dpsgd_noise_div4/artifacts/arms",  # the planted σ/4 bug's re-run
        "metrics/audit_canary.json",
        "metrics/audit_references.json",
        "metrics/audit_pool.json",
    )
    return {top: file_hash(root / top) for top in tops}


@pytest.mark.slow
def test_the_audit_stages_give_the_same_outputs_with_one_worker_two_and_from_the_cache(arms_run, tmp_path, monkeypatch):
    from conftest import compare_raw, copy_root, run_stages

    from dprelease.core.config import parse_params

    params = parse_params(compare_raw(privacy_audit=SMALL))
    outs = {}
    for name, n, cache in (("one", "1", "a"), ("two", "2", "b"), ("cached", "2", "a")):
        monkeypatch.setenv(workers.ENV, n)
        monkeypatch.setenv(audit_cache.ENV, str(tmp_path / f"cache-{cache}"))
        root = copy_root(arms_run.root, tmp_path / name)
        run_stages(params, root, AUDIT)
        outs[name] = _audit_outputs(root)
    assert outs["one"] == outs["two"] == outs["cached"]
    cached = sorted(p.parent.parent.name for p in (tmp_path / "cache-a").rglob("*.safetensors"))
    assert cached == ["embeddings"] + ["references"] * SMALL["references"]  # pool embeddings, offline models only
