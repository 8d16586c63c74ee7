"""The 500-draw posterior pass shared by the risk and sensitivity stages (spec B.2, B.6)."""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from ..config import Params
from ..data.splits import backend_for, features
from ..layout import Layout
from ..seeds import stage_seed
from . import ppm
from .swag import SwagMoments, iter_samples


def posterior_pass(params: Params, lay: Layout, r: int, weights: np.ndarray | None, what: str):
    """S draws from SWAG_r → the per-record max CE (L_i) and, with weights, the per-draw max weighted
    loss M_s. Draws are evaluated ``ppm.draw_batch`` at a time (batched on the head backend)."""
    backend = backend_for(params, lay)
    feats, y = features(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    model = backend.new_model(feats)
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, what, r))
    S, chunk = params.ppm.draws, params.ppm.draw_batch
    record_max = np.full(len(y), -np.inf)
    max_deltas = []
    with tqdm(total=S, desc=f"{what} r{r} draws", unit="draw") as bar:
        for thetas in iter_samples(moments, S, chunk, gen):
            ce = backend.per_record_ce(model, thetas, feats, y).double().numpy()
            record_max = np.maximum(record_max, ce.max(axis=0))
            if weights is not None:
                max_deltas.append(ppm.max_weighted_loss(ce, weights))
            bar.update(len(thetas))
    return record_max, (np.concatenate(max_deltas) if max_deltas else None)
