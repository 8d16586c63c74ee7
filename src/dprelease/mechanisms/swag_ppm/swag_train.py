"""The SWAG phase (docs/algorithms.md, A.1, D.6.2): SGD at a constant learning rate from the fine-tuned θ, one
snapshot per epoch into a :class:`SwagCollector`. Same objective as the fine-tune (docs/algorithms.md, B.5, with the prior
λ/(2N)·|θ|² of ``training.py``)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from tqdm.auto import tqdm

from dprelease.core.backends.base import Backend, Features, get_flat, trainable
from dprelease.core.privacy.censor import Censor
from dprelease.core.training import History, seed_model
from dprelease.core.training import epoch as run_epoch
from dprelease.mechanisms.swag_ppm.params import SwagParams
from dprelease.mechanisms.swag_ppm.swag import SwagCollector, SwagMoments


def swag(
    backend: Backend,
    model: nn.Module,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
    params: SwagParams,
    *,
    seed: int,
    progress: bool = False,
    desc: str = "SWAG",
    on_snapshot: Callable[[int], None] | None = None,
    censor: Censor | None = None,
    prior_precision: float = 0.0,
) -> tuple[SwagMoments, History]:
    """Constant-lr SGD for ``params.epochs`` epochs, one snapshot per epoch; returns the fitted moments. Options
    after the data, weights and settings are keyword-only (as in :func:`dprelease.mechanisms.swag_ppm.calibrate.swag`)."""
    centre = backend.prior_center(model) if prior_precision else None  # the same prior as the fine-tune's
    gen = torch.Generator().manual_seed(seed)
    seed_model(model, seed + 1)
    optimizer = torch.optim.SGD(trainable(model), lr=params.lr, momentum=params.momentum, fused=True)
    collector = SwagCollector(sum(p.numel() for p in trainable(model)), rank=params.rank, device=backend.device)
    history = History()
    for e in tqdm(range(params.epochs), desc=desc, disable=not progress, unit="epoch"):
        history.losses.append(
            run_epoch(
                backend,
                model,
                features,
                labels,
                weights,
                optimizer,
                params.batch_size,
                gen,
                censor=censor,
                prior_precision=prior_precision,
                desc=desc,
                prior_center=centre,
            )
        )
        collector.collect(get_flat(model))
        if on_snapshot is not None:
            on_snapshot(e)
    return collector.moments(), history
