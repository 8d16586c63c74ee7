"""The (weighted) fine-tuning loop shared by every backend and mechanism, and the one-epoch step that
other loops (SWAG's) reuse.

Loss per mini-batch B: (1/|B|) Σ_{i∈B} w_i CE_i(θ) — not renormalised by Σ w_i (docs/algorithms.md, B.5). With a
``censor`` each record contributes its censored w_i CE_i (≤ κ; the strict variant, docs/guarantees.md, P).
With a ``prior_precision`` λ the mini-batch loss also carries λ/(2N)·|θ − θ₀|² (N = training records), so
the loop minimises (1/N)·(Σ_i w_i CE_i + λ/2·|θ − θ₀|²): the negative log pseudo posterior under the prior
N(θ₀, I/λ), divided by N. The centre θ₀ is the backend's (``Backend.prior_center``): 0 for the head (its
default), the PUBLIC pretrained weights for the full backend (as in L2-SP, Li, Grandvalet & Davoine 2018) —
data-independent either way, so the pseudo posterior stays valid, and λ = 100 around 0 would shrink MiniLM's
22.7 M weights towards zero. The Laplace reference's Hessian G + λI does not depend on the centre. SWAG-PPM's fine-tune and SWAG phases optimise exactly that objective, and the
Laplace reference of the temperature check (swag_ppm/temperature.py) uses the same λ.
Fine-tune: AdamW, linear decay to 0, no warm-up (docs/algorithms.md, D.6.1); its decoupled ``weight_decay`` is a
different regulariser (not a prior of this objective), so SWAG-PPM sets it to 0 and uses λ instead.
"""

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
