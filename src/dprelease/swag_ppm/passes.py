"""The 500-draw posterior pass shared by the risk, sensitivity and re-weighting stages (spec B.2, B.6)."""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from ..backends.base import Backend, Features
from ..config import Params
from ..data.splits import backend_for, features
from ..layout import Layout
from ..privacy.censor import Censor
from ..seeds import stage_seed
from . import ppm
from .swag import SwagMoments, iter_samples


def draw_pass(backend: Backend, model, moments: SwagMoments, feats: Features, y: torch.Tensor,
              weights: np.ndarray | None, *, draws: int, chunk: int, seed: int, desc: str,
              censor: Censor | None = None, stop_above: float | None = None, min_draws: int = 0):
    """S draws from ``moments`` → the per-record max CE (L_i) and, with weights, the per-draw max weighted
    loss M_s (each record's w_i CE_i censored at ``censor`` when given). Draws are evaluated ``chunk`` at a
    time (batched on the head backend).

    ``stop_above``: stop early, once at least ``min_draws`` draws are done, as soon as max_s M_s exceeds it
    (Δ̂ over all S draws could only be larger, so a "Δ̂ > bound" decision is the same; the maxima returned
    then cover fewer draws)."""
    gen = torch.Generator(device=backend.device).manual_seed(seed)
    record_max = np.full(len(y), -np.inf)
    max_deltas, running = [], -np.inf
    with tqdm(total=draws, desc=desc, unit="draw") as bar:
        for thetas in iter_samples(moments, draws, chunk, gen):
            ce = backend.per_record_ce(model, thetas, feats, y).double().numpy()
            record_max = np.maximum(record_max, ce.max(axis=0))
            if weights is not None:
                max_deltas.append(ppm.max_weighted_loss(ce, weights, censor=censor))
                running = max(running, float(max_deltas[-1].max()))
            bar.update(len(thetas))
            if stop_above is not None and bar.n >= min_draws and running > stop_above:
                break
    return record_max, (np.concatenate(max_deltas) if max_deltas else None)


def posterior_pass(params: Params, lay: Layout, r: int, weights: np.ndarray | None, what: str,
                   censor: Censor | None = None):
    """``draw_pass`` over the stored SWAG of round r, seeded by (seed, what, r)."""
    backend = backend_for(params, lay)
    feats, y = features(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    return draw_pass(backend, backend.new_model(feats), moments, feats, y, weights, draws=params.ppm.draws,
                     chunk=params.ppm.draw_batch, seed=stage_seed(params.seed, what, r), desc=f"{what} r{r} draws",
                     censor=censor)
