"""The (weighted) fine-tuning loop shared by every backend and mechanism, and the one-epoch step other loops (SWAG's)
reuse: it minimises the negative log pseudo posterior divided by N.

See docs/algorithms.md, I.4."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from dprelease.core.backends.base import Backend, Features, batches, n_records, take, trainable
from dprelease.core.config import OptimParams
from dprelease.core.errors import DataError
from dprelease.core.privacy.censor import Censor


@dataclass
class History:
    """Mean weighted training loss per epoch (aggregate only)."""

    losses: list[float] = field(default_factory=list)


def seed_model(model: nn.Module, seed: int) -> None:
    """Dropout randomness: the model's own generators where it has them, else the global RNG."""
    if hasattr(model, "seed_dropout"):
        model.seed_dropout(seed)
    else:
        torch.manual_seed(seed)


def epoch(
    backend: Backend,
    model: nn.Module,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
    optimizer: torch.optim.Optimizer,
    batch_size: int,
    generator: torch.Generator,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    censor: Censor | None = None,
    prior_precision: float = 0.0,
    desc: str = "training",
    prior_center: list[torch.Tensor] | None = None,
) -> float:
    """One pass over the records in mini-batches; the mean training loss. ``desc`` names the fit in the error
    for 0 records (an epoch over nothing has no loss and fits nothing)."""
    n = n_records(features)
    no_records(n, desc)
    model.train()
    total, count = 0.0, 0
    params = trainable(model) if prior_precision else []
    for idx in batches(n, batch_size, generator):
        logits = backend.forward(model, take(features, idx, backend.device))
        ce = F.cross_entropy(logits.float(), labels[idx].to(backend.device), reduction="none")
        if weights is not None:
            ce = ce * weights[idx].to(backend.device)
        if censor is not None:
            ce = censor.torch(ce)
        loss = ce.mean()
        if params and prior_center is None:  # centred at 0: the former expression, so results stay bit for bit
            loss = loss + prior_precision / (2 * n) * sum((p * p).sum() for p in params)
        elif params:
            loss = loss + prior_precision / (2 * n) * sum(((p - c) ** 2).sum() for p, c in zip(params, prior_center))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total += float(loss.detach()) * len(idx)
        count += len(idx)
    return total / count


def no_records(n: int, desc: str) -> None:
    """A one-line error where a fit would run on 0 training records."""
    if n == 0:
        raise DataError(f"{desc}: 0 training records, nothing to fit (an empty training set or subset)")


def finetune(
    backend: Backend,
    model: nn.Module,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
    opt: OptimParams,
    *,
    seed: int,
    progress: bool = False,
    desc: str = "fine-tune",
    censor: Censor | None = None,
    prior_precision: float = 0.0,
) -> History:
    """AdamW fine-tuning in place with a linear decay schedule (objective and ``prior_precision``: module
    docstring). The data, their weights and the optimiser settings are positional; every option after them is
    keyword-only (as in :func:`dprelease.mechanisms.swag_ppm.calibrate.swag`): a seed is never taken for a flag."""
    no_records(n_records(features), desc)
    centre = backend.prior_center(model) if prior_precision else None
    gen = torch.Generator().manual_seed(seed)
    seed_model(model, seed + 1)
    optimizer = torch.optim.AdamW(trainable(model), lr=opt.lr, weight_decay=opt.weight_decay, fused=True)
    steps = opt.epochs * -(-n_records(features) // opt.batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1.0 - s / steps))
    history = History()
    for _ in tqdm(range(opt.epochs), desc=desc, disable=not progress, unit="epoch"):
        history.losses.append(
            epoch(
                backend,
                model,
                features,
                labels,
                weights,
                optimizer,
                opt.batch_size,
                gen,
                scheduler,
                censor,
                prior_precision,
                desc,
                prior_center=centre,
            )
        )
    return history
