"""DP-SGD baseline with Opacus (docs/algorithms.md, E): Poisson sampling, per-sample clipping, Gaussian noise and
RDP accounting are all Opacus's; this module only wires the backend's model and data into it.

Training runs exactly ⌈E/q⌉ Poisson-sampled steps, the count the noise multiplier was chosen for.

Randomness: the Poisson sampling and the Gaussian noise — what the (ε, δ) guarantee rests on — come from
``noise_seed``, which callers derive from the project's secret key (never the public seed); dropout (and
batch-independent choices) use ``seed``, which callers also derive from the secret key. Opacus's ``secure_mode`` (a cryptographic RNG via torchcsprng) is not used: torchcsprng
has no build for this torch; the seed is secret instead, 64 bits of a 256-bit key (see privacy/secret.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm

from dprelease.core.backends.base import Backend, Features, n_records, trainable
from dprelease.mechanisms.dpsgd.accounting import accountant_for, noise_multiplier, steps_for


@dataclass(frozen=True)
class DPSGDResult:
    epsilon: float  # spent, from the accountant (≤ target)
    delta: float
    noise_multiplier: float
    steps: int
    sample_rate: float
    final_loss: float


def check_setting(n: int, batch_size: int, target_epsilon: float, delta: float) -> None:
    """One-line errors before any training starts."""
    if target_epsilon <= 0:
        raise ValueError(f"dpsgd: target ε must be > 0 (got {target_epsilon})")
    if not 0 < delta < 1:
        raise ValueError(f"dpsgd: δ must lie in (0, 1) (got {delta})")
    if batch_size > n:
        raise ValueError(f"dpsgd: batch size {batch_size} is larger than the {n} training records")


def train_dpsgd(
    backend: Backend,
    model: nn.Module,
    features: Features,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    max_grad_norm: float,
    target_epsilon: float,
    delta: float,
    conversion: str = "mironov",
    grad_sample_mode: str = "ghost",
    seed: int = 0,
    noise_seed: int,
    progress: bool = False,
    planted_noise_divisor: float = 1.0,
    optimizer: str = "adamw",
    momentum: float = 0.0,
    expected_size: int | None = None,
    extra: tuple = (),
) -> DPSGDResult:
    """Train ``model`` in place with DP-SGD; σ is chosen so the accountant's ε after training is the target.

    ``planted_noise_divisor`` > 1 is the audit's PLANTED BUG (noise σ/divisor, ε claimed for σ); ``expected_size``
    is the public n̂.

    See docs/algorithms.md, I.8."""
    from opacus import PrivacyEngine
    from opacus.data_loader import DPDataLoader

    n = expected_size or n_records(features)
    check_setting(n, batch_size, target_epsilon, delta)
    keys = sorted(features)
    gen = torch.Generator().manual_seed(noise_seed)  # Poisson sampling: secret
    loader = DPDataLoader(
        TensorDataset(*(features[k] for k in keys), labels), sample_rate=batch_size / n, generator=gen
    )
    q = batch_size / n
    steps = steps_for(epochs, q)
    sigma = noise_multiplier(target_epsilon, delta, q, steps, conversion, extra=extra)

    if hasattr(model, "seed_dropout"):
        model.seed_dropout(seed + 2)
    engine = PrivacyEngine(accountant="rdp")
    engine.accountant = accountant_for(conversion)
    if optimizer not in ("adamw", "sgd"):
        raise ValueError(f"dpsgd: optimizer must be adamw or sgd (got {optimizer!r})")
    optimizer = (
        torch.optim.AdamW(trainable(model), lr=lr, weight_decay=0.0)
        if optimizer == "adamw"
        else torch.optim.SGD(trainable(model), lr=lr, momentum=momentum)
    )
    criterion = nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # secure-RNG and full-backward-hook notices; runs are seeded on purpose
        made = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=sigma / planted_noise_divisor,
            max_grad_norm=max_grad_norm,
            poisson_sampling=False,
            grad_sample_mode=grad_sample_mode,
            criterion=criterion,
            noise_generator=torch.Generator(device=backend.device).manual_seed((noise_seed + 1) % 2**64),
        )
        dp_model, optimizer, loader = made[0], made[1], made[2]
        if grad_sample_mode == "ghost":
            criterion = made[2]
            loader = made[3]
        optimizer.expected_batch_size = batch_size  # loader is already Poisson with rate q (kept as is above)
        optimizer.attach_step_hook(engine.accountant.get_optimizer_hook_fn(sample_rate=q))
        dp_model.train()
        done, last = 0, float("nan")
        with tqdm(total=steps, desc="DP-SGD", unit="step", disable=not progress) as bar:
            while done < steps:
                for *xs, y in loader:
                    if done == steps:
                        break
                    optimizer.zero_grad(set_to_none=True)
                    logits = backend.forward(dp_model, {k: v.to(backend.device) for k, v in zip(keys, xs)})
                    loss = criterion(logits.float(), y.to(backend.device))
                    loss.backward()
                    optimizer.step()
                    last = float(loss.detach()) if len(y) else last
                    done += 1
                    bar.update(1)
    model.eval()
    claimed = engine.accountant
    if planted_noise_divisor != 1.0:  # the bug claims the ε of the noise it did not add
        claimed = accountant_for(conversion)
        claimed.history = [(sigma, q, steps)]
    return DPSGDResult(
        epsilon=claimed.get_epsilon(delta),
        delta=delta,
        noise_multiplier=sigma,
        steps=steps,
        sample_rate=q,
        final_loss=last,
    )
