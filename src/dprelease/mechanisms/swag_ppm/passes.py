"""The 500-draw posterior pass shared by the risk, sensitivity and re-weighting stages (docs/algorithms.md, B.2, B.6).

Draws are evaluated ``ppm.draw_batch`` at a time. In this process (no mapper installed, see
:mod:`dprelease.contracts.parallel`) that is the plain loop of :func:`draw_pass`. With a mapper installed (the
flows' Dask mapper), :func:`run_pass` hands every chunk to it as a small picklable :class:`Chunk`: the
generator state at the chunk's first draw (replayed cheaply by ``swag.chunk_states``) plus a
:class:`PassJob` saying where the inputs are. A chunk's result is the per-record max CE over its draws and
its draws' max weighted losses; combined in chunk order (elementwise max, concatenation) they are
exactly the sequential pass's, whatever runs the chunks and in whatever order.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from dprelease.contracts import parallel
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import Backend, Features
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.privacy import secret
from dprelease.core.privacy.censor import Censor
from dprelease.mechanisms.swag_ppm import ppm
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, chunk_states, iter_samples, sample


def evaluate(
    backend: Backend,
    model,
    thetas: torch.Tensor,
    feats: Features,
    y: torch.Tensor,
    weights: np.ndarray | None,
    censor: Censor | None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """One chunk of draws → (per-record max CE over the chunk, per-draw max weighted loss or None)."""
    ce = backend.per_record_ce(model, thetas, feats, y).double().numpy()
    return ce.max(axis=0), (None if weights is None else ppm.max_weighted_loss(ce, weights, censor=censor))


def draw_pass(
    backend: Backend,
    model,
    moments: SwagMoments,
    feats: Features,
    y: torch.Tensor,
    weights: np.ndarray | None,
    *,
    draws: int,
    chunk: int,
    seed: int,
    desc: str,
    censor: Censor | None = None,
    stop_above: float | None = None,
    min_draws: int = 0,
    scale: float | None = None,
):
    """S draws from ``moments`` → the per-record max CE (L_i) and, with weights, the per-draw max weighted
    loss M_s (each record's w_i CE_i censored at ``censor`` when given). Draws are evaluated ``chunk`` at a
    time (batched on the head backend), in this process.

    ``stop_above``: stop early, once at least ``min_draws`` draws are done, as soon as max_s M_s exceeds it
    (Δ̂ over all S draws could only be larger, so a "Δ̂ > bound" decision is the same; the maxima returned
    then cover fewer draws)."""
    gen = torch.Generator(device=backend.device).manual_seed(seed)
    record_max = np.full(len(y), -np.inf)
    max_deltas, running = [], -np.inf
    with tqdm(total=draws, desc=desc, unit="draw") as bar:
        for thetas in iter_samples(moments, draws, chunk, gen, scale):
            rmax, deltas = evaluate(backend, model, thetas, feats, y, weights, censor)
            record_max = np.maximum(record_max, rmax)
            if deltas is not None:
                max_deltas.append(deltas)
                running = max(running, float(deltas.max()))
            bar.update(len(thetas))
            if stop_above is not None and bar.n >= min_draws and running > stop_above:
                break
    return record_max, (np.concatenate(max_deltas) if max_deltas else None)


# the same pass in chunks that can run anywhere ------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PassJob:
    """A posterior pass as its chunks see it: small, picklable, inputs by reference. Workers share the
    project's filesystem (the train features and, given as a path, the moments are read there); the weights
    (and moments held in memory) travel with it. Private: never log or persist one."""

    params: Params
    lay: Layout
    moments: Path | SwagMoments  # a moments.safetensors, or moments held in memory (e.g. a censored refit)
    weights: np.ndarray | None = None
    censor: Censor | None = None
    scale: float | None = None  # sampling scale (None: the moments' own)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)  # one pass: what a process may cache

    def __post_init__(self) -> None:  # absolute paths: a worker's working directory may be another
        lay = Layout(**{f.name: Path(getattr(self.lay, f.name)).resolve() for f in fields(Layout)})
        object.__setattr__(self, "lay", lay)
        if not isinstance(self.moments, SwagMoments):
            object.__setattr__(self, "moments", Path(self.moments).resolve())

    def __repr__(self) -> str:  # never the weights or the moments in a log line or an error
        where = "in memory" if isinstance(self.moments, SwagMoments) else str(self.moments)
        return f"PassJob({self.token}, moments: {where})"

    def load_moments(self, device) -> SwagMoments:
        if isinstance(self.moments, SwagMoments):
            return self.moments
        return SwagMoments.load(self.moments, device=device)


@dataclass(frozen=True)
class Chunk:
    job: PassJob
    start: int  # first draw
    count: int
    state: bytes = field(repr=False)  # the pass generator's state before the chunk's first draw


_loaded: dict = {}  # token → (backend, model, moments, feats, y): this process's inputs of one pass
_lock = threading.Lock()


def _inputs(job: PassJob):
    with _lock:
        if job.token not in _loaded:
            _loaded.clear()  # one pass at a time per process: never keep another pass's data
            backend = backend_for(job.params, job.lay)
            feats, y = features(job.lay)
            _loaded[job.token] = (backend, backend.new_model(feats), job.load_moments(backend.device), feats, y)
        return _loaded[job.token]


def run_chunk(chunk: Chunk) -> tuple[np.ndarray, np.ndarray | None]:
    """One chunk of a pass, wherever it runs: its draws regenerated from the stored generator state."""
    job = chunk.job
    backend, model, moments, feats, y = _inputs(job)
    gen = torch.Generator(device=backend.device)
    gen.set_state(torch.frombuffer(bytearray(chunk.state), dtype=torch.uint8))
    thetas = sample(moments, chunk.count, gen, job.scale)
    return evaluate(backend, model, thetas, feats, y, job.weights, job.censor)


def run_pass(job: PassJob, *, draws: int, chunk: int, seed: int, desc: str, local=None):
    """:func:`draw_pass` of ``job`` (no early stop): in this process with no mapper installed (``local`` =
    (backend, model, moments, feats, y) already loaded, else loaded here), else as chunks on the mapper."""
    try:
        if not parallel.active():
            backend, model, moments, feats, y = local or _inputs(job)
            return draw_pass(
                backend,
                model,
                moments,
                feats,
                y,
                job.weights,
                draws=draws,
                chunk=chunk,
                seed=seed,
                desc=desc,
                censor=job.censor,
                scale=job.scale,
            )
        return _mapped_pass(job, draws, chunk, seed, desc, local)
    finally:
        _loaded.pop(job.token, None)  # chunks run here (or the inputs loaded above): not kept past the pass


def _mapped_pass(job: PassJob, draws: int, chunk: int, seed: int, desc: str, local):
    device = local[0].device if local else backend_for(job.params, job.lay).device
    moments = local[2] if local else job.load_moments(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    chunks = (Chunk(job, start, count, state) for start, count, state in chunk_states(moments, draws, chunk, gen))
    counts = [min(chunk, draws - start) for start in range(0, draws, chunk)]
    record_max, max_deltas = None, []
    with tqdm(total=draws, desc=desc, unit="draw") as bar:
        for count, (rmax, deltas) in zip(counts, parallel.map_chunks(run_chunk, chunks), strict=True):
            record_max = rmax if record_max is None else np.maximum(record_max, rmax)  # exact: any order
            if deltas is not None:
                max_deltas.append(deltas)  # chunk order = draw order
            bar.update(count)
    return record_max, (np.concatenate(max_deltas) if max_deltas else None)


def posterior_pass(
    params: Params, lay: Layout, r: int, weights: np.ndarray | None, what: str, censor: Censor | None = None
):
    """The pass over the stored SWAG of round r, seeded by the secret key (label ``what``/round r): Δ̂, and so
    the released ε, is a function of these draws."""
    job = PassJob(params, lay, lay.swag(r) / "moments.safetensors", weights, censor)
    return run_pass(
        job,
        draws=params.ppm.draws,
        chunk=params.ppm.draw_batch,
        seed=secret.seed(lay.artifacts, f"{what}/round{r}"),
        desc=f"{what} r{r} draws",
    )
