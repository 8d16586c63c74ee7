"""Posterior passes in seeded chunks (dprelease.contracts.parallel, swag_ppm.passes) and the flows' runner choice.

A mapped pass must equal the sequential ``draw_pass`` bit for bit whatever runs its chunks: in order, in a
shuffled order, in other processes. Every chunk regenerates its draws from the generator state recorded at
its first draw (``swag.chunk_states`` replays only the normals), and the chunk results are combined in chunk
order with an exact max and a concatenation. A chunk on a Dask worker runs with one torch thread, so the
per-record losses must not depend on the thread count either (checked on a head of the real size).
"""

from __future__ import annotations

import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import install_test_key

from dprelease.contracts import parallel
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import get_flat, save_features
from dprelease.core.config import parse_params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import write_json
from dprelease.core.privacy.censor import Censor
from dprelease.core.seeds import stage_seed
from dprelease.mechanisms.swag_ppm.passes import PassJob, draw_pass, posterior_pass, run_pass
from dprelease.mechanisms.swag_ppm.swag import (
    SwagCollector,
    SwagMoments,
    chunk_states,
    iter_samples,
    normals,
    sample,
    transform,
)

N, DIM, CLASSES, DRAWS, BATCH = 40, 6, 3, 11, 3  # 4 chunks: 3 + 3 + 3 + 2


def _params(**ppm):
    return parse_params(
        {
            "seed": 2025,
            "ppm": {"draws": DRAWS, "draw_batch": BATCH, "smoke_test": True, **ppm},
            "model": {"device": "cpu", "head": {"hidden": 4}},
        }
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """labels, train features and SWAG moments of rounds 1 (rank 3) and 2 (rank 1: no low-rank term)."""
    root = install_test_key(tmp_path_factory.mktemp("chunks"))  # the passes draw from the key
    params = _params()
    lay = Layout.from_params(params, root)
    write_json(
        lay.data / "labels.json",
        {"codes": ["10", "11", "12"], "titles": ["a", "b", "c"], "train_sizes": [14, 13, 13], "test_sizes": [1, 1, 1]},
    )
    gen = torch.Generator().manual_seed(3)
    x = F.normalize(torch.randn(N, DIM, generator=gen), dim=1)
    y = torch.arange(N) % CLASSES
    save_features(lay.features / "train.safetensors", {"x": x}, y)
    theta0 = get_flat(backend_for(params, lay).new_model({"x": x}))
    for r, rank in ((1, 3), (2, 1)):
        swag = SwagCollector(theta0.numel(), rank=rank)
        for _ in range(5):
            swag.collect(theta0 + 0.5 * torch.randn(theta0.numel(), generator=gen))
        swag.moments().save(lay.swag(r) / "moments.safetensors")
    return params, lay


def _weights() -> np.ndarray:
    return np.random.default_rng(0).uniform(0.1, 1.0, N)


# mappers ------------------------------------------------------------------------------------------------------
def shuffled(fn, items):
    """Runs the chunks in a random order, yields the results in item order."""
    items = list(items)
    order = list(range(len(items)))
    random.Random(7).shuffle(order)
    results = {i: fn(items[i]) for i in order}
    return (results[i] for i in range(len(items)))


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        yield ex


def _in(pool):
    def mapper(fn, items):
        futures = [pool.submit(fn, item) for item in items]
        return (f.result() for f in futures)

    return mapper


def _mapped(mapper, fn, *args, **kwargs):
    with parallel.use(mapper):
        assert parallel.active()
        return fn(*args, **kwargs)


def _same(a: tuple, b: tuple) -> None:
    assert a[0].dtype == b[0].dtype == np.float64 and np.array_equal(a[0], b[0])
    assert (a[1] is None and b[1] is None) or np.array_equal(a[1], b[1])


# the mapper context ----------------------------------------------------------------------------------------------
def test_default_is_sequential_and_use_is_scoped():
    assert not parallel.active()
    assert list(parallel.map_chunks(str, [1, 2])) == ["1", "2"]
    with parallel.use(shuffled):
        assert parallel.active()
        with parallel.use(parallel.sequential):
            assert list(parallel.map_chunks(abs, [-1, -2])) == [1, 2]
        assert list(parallel.map_chunks(abs, [-3, 4, -5])) == [3, 4, 5]
    assert not parallel.active()


# the draws ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("r", [1, 2])
def test_chunk_states_regenerate_the_sequential_stream(project, r):
    _, lay = project
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors")
    stream = list(iter_samples(moments, DRAWS, BATCH, torch.Generator().manual_seed(5)))
    states = list(chunk_states(moments, DRAWS, BATCH, torch.Generator().manual_seed(5)))
    assert [(s, c) for s, c, _ in states] == [(0, 3), (3, 3), (6, 3), (9, 2)]
    for (start, count, state), expected in zip(states, stream, strict=True):
        gen = torch.Generator()
        gen.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
        assert torch.equal(sample(moments, count, gen), expected)
    gen = torch.Generator().manual_seed(9)
    again = torch.Generator().manual_seed(9)
    assert torch.equal(sample(moments, 4, gen, scale=0.3), transform(moments, *normals(moments, 4, again), 0.3))


# the pass ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True], ids=["risk", "sensitivity"])
def test_mapped_posterior_pass_is_the_sequential_pass(project, pool, weighted):
    params, lay = project
    w = _weights() if weighted else None
    censor = Censor(0.9, "soft") if weighted else None
    expected = posterior_pass(params, lay, 1, w, "sensitivity", censor)
    assert expected[0].shape == (N,) and (expected[1] is None) == (not weighted)
    if weighted:
        assert expected[1].shape == (DRAWS,)
    for mapper in (parallel.sequential, shuffled, _in(pool)):
        _same(_mapped(mapper, posterior_pass, params, lay, 1, w, "sensitivity", censor), expected)


def test_mapped_pass_with_a_scale_or_moments_in_memory(project, pool):
    """The arms' passes: moments read from disk at another sampling scale, or held in memory only."""
    params, lay = project
    backend = backend_for(params, lay)
    feats, y = features(lay)
    path = lay.swag(1) / "moments.safetensors"
    moments = replace(SwagMoments.load(path), scale=0.2)  # stored: 0.5
    model = backend.new_model(feats)
    w, seed = _weights(), stage_seed(params.seed, "uncalibrated", 2)
    expected = draw_pass(backend, model, moments, feats, y, w, draws=DRAWS, chunk=BATCH, seed=seed, desc="x")
    assert not np.array_equal(
        expected[1],
        draw_pass(backend, model, SwagMoments.load(path), feats, y, w, draws=DRAWS, chunk=BATCH, seed=seed, desc="x")[
            1
        ],
    )
    kw = dict(draws=DRAWS, chunk=BATCH, seed=seed, desc="x")
    for job in (PassJob(params, lay, path, w, scale=0.2), PassJob(params, lay, moments, w)):
        _same(run_pass(job, **kw), expected)
        _same(run_pass(job, **kw, local=(backend, model, moments, feats, y)), expected)
        for mapper in (shuffled, _in(pool)):
            _same(_mapped(mapper, run_pass, job, **kw), expected)
            _same(_mapped(mapper, run_pass, job, **kw, local=(backend, model, moments, feats, y)), expected)


def test_a_failing_chunk_fails_the_pass(project):
    params, lay = project

    def broken(fn, items):
        for i, item in enumerate(items):
            if i == 2:
                raise RuntimeError("worker lost")
            yield fn(item)

    with pytest.raises(RuntimeError, match="worker lost"):
        _mapped(broken, posterior_pass, params, lay, 1, _weights(), "sensitivity")


def test_a_job_never_shows_its_private_inputs(project):
    params, lay = project
    moments = SwagMoments.load(lay.swag(1) / "moments.safetensors")
    w = np.full(N, 0.123456)
    for job in (PassJob(params, lay, moments, w), PassJob(params, lay, lay.swag(1) / "moments.safetensors", w)):
        text = repr(job)
        assert "0.123" not in text and "tensor(" not in text and job.token in text
    from tasks.parallel import Sealed

    assert "0.123" not in repr(Sealed(abs, w))


# threads -----------------------------------------------------------------------------------------------------------
def test_per_record_losses_do_not_depend_on_the_thread_count(tmp_path):
    """Chunks on Dask workers run with one torch thread; the flow's own passes with the process's default.
    A head of the real shape (384 → 256 → 108 classes) on 3,000 records, 20 draws: bit-identical losses."""
    params = parse_params({"model": {"device": "cpu"}})
    lay = Layout.from_params(params, tmp_path)
    write_json(
        lay.data / "labels.json",
        {
            "codes": [str(i) for i in range(108)],
            "titles": ["t"] * 108,
            "train_sizes": [1] * 108,
            "test_sizes": [1] * 108,
        },
    )
    backend = backend_for(params, lay)
    gen = torch.Generator().manual_seed(1)
    feats = {"x": F.normalize(torch.randn(3000, 384, generator=gen), dim=1)}
    y = torch.randint(0, 108, (3000,), generator=gen)
    model = backend.new_model(feats)
    thetas = get_flat(model) + 0.05 * torch.randn(20, get_flat(model).numel(), generator=gen)
    before = torch.get_num_threads()
    try:
        out = {}
        for n in (2, 1):
            torch.set_num_threads(n)
            out[n] = backend.per_record_ce(model, thetas, feats, y)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(out[1], out[2])


# the flows' runner -------------------------------------------------------------------------------------------------
def test_runner_follows_the_dask_params():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from flows import runners

    off = runners.task_runner(parse_params({}), threads=3)
    assert isinstance(off, ThreadPoolTaskRunner) and off._max_workers == 3 and not runners.is_dask(off)
    local = runners.task_runner(parse_params({"dask": {"enabled": True, "workers": 3}}))
    assert isinstance(local, DaskTaskRunner) and local.address is None and local.cluster_class is runners.local_cluster
    assert local.cluster_kwargs == {
        "n_workers": 3,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
    }
    remote = runners.task_runner(parse_params({"dask": {"enabled": True, "address": "tcp://10.0.0.5:8786"}}))
    assert isinstance(remote, DaskTaskRunner) and remote.address == "tcp://10.0.0.5:8786"
    assert remote.duplicate() == remote  # what a worker rebuilds from the flow's context


def test_on_dask_is_a_no_op_outside_a_dask_flow():
    from flows import runners

    with runners.on_dask() as on:
        assert on is False and not parallel.active()
