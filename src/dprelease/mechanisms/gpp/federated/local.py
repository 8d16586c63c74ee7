"""The arithmetic of Algorithm 2 (docs/algorithms.md, G.4), free of Flower: what a client and the aggregator compute,
and how rounds map to epochs.

See docs/gpp.md, "Notes from the code", `mechanisms/gpp/federated/local.py`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dprelease.mechanisms.gpp.model import Encoder, encoder_loss, head, reparameterise

PURPOSE = {"init": 0, "encode": 1, "adversary": 2, "step": 3, "release": 4, "perm": 5, "server": 6}


def seed_for(seed: int, client: int, step: int, purpose: str) -> int:
    """A 63-bit seed from ``(seed, client, step, purpose)`` (independent streams per use)."""
    state = np.random.SeedSequence([int(seed), int(client) + 1, int(step), PURPOSE[purpose]]).generate_state(2)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def generator(seed: int, client: int, step: int, purpose: str) -> torch.Generator:
    return torch.Generator().manual_seed(seed_for(seed, client, step, purpose))


def steps_per_client(n_per_client: Sequence[int], *, epochs: int, batch_size: int) -> list[int]:
    return [epochs * math.ceil(n / batch_size) for n in n_per_client]


def participants(steps: Sequence[int], rnd: int) -> list[int]:
    """Clients taking part in round ``rnd`` (1-based) of ``max(steps)`` rounds."""
    total = max(steps)
    return [m for m, s in enumerate(steps) if (rnd * s) // total > ((rnd - 1) * s) // total]


def batch_rows(*, seed: int, client: int, step: int, n: int, batch_size: int) -> np.ndarray:
    """Rows of client ``client``'s ``step``-th encoder batch: epoch ``step // ⌈n/b⌉`` walks a permutation."""
    per_epoch = math.ceil(n / batch_size)
    epoch, pos = divmod(step, per_epoch)
    perm = np.random.default_rng(seed_for(seed, client, epoch, "perm")).permutation(n)
    return perm[pos * batch_size : (pos + 1) * batch_size]


@dataclass
class ClientModels:
    encoder: Encoder
    adversary: nn.Module
    opt_encoder: torch.optim.Adam
    opt_adversary: torch.optim.Adam
    step: int = 0


def build_client(
    *,
    d_in: int,
    d_z: int,
    n_s: int,
    encoder_hidden: Sequence[int],
    head_hidden: Sequence[int],
    lr: float,
    seed: int,
    client: int,
) -> ClientModels:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_for(seed, 0, 0, "init"))  # one public initial θ for every client
        encoder = Encoder(d_in, d_z, tuple(encoder_hidden))
        torch.manual_seed(seed_for(seed, client, 0, "init"))
        adversary = head(d_z, n_s, tuple(head_hidden))
    return ClientModels(
        encoder,
        adversary,
        torch.optim.Adam(encoder.parameters(), lr=lr),
        torch.optim.Adam(adversary.parameters(), lr=lr),
    )


def build_utility_head(
    *, d_z: int, n_u: int, head_hidden: Sequence[int], lr: float, seed: int
) -> tuple[nn.Module, torch.optim.Adam]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_for(seed, -1, 0, "server"))
        psi = head(d_z, n_u, tuple(head_hidden))
    return psi, torch.optim.Adam(psi.parameters(), lr=lr)


@torch.no_grad()
def encode(encoder: Encoder, x: np.ndarray, gen: torch.Generator) -> np.ndarray:
    """One sanitized draw per row (float32)."""
    return encoder.release(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), gen).numpy()


def head_steps(
    psi: nn.Module,
    opt: torch.optim.Adam,
    z: np.ndarray,
    u: np.ndarray,
    *,
    steps: int,
    batch_size: int,
    gen: torch.Generator,
) -> float:
    """The aggregator's Adam steps on ``Q_ψ``: ``steps`` minibatches of ``batch_size`` pairs drawn from the
    pooled (z, u) of the round (the caller passes ``k`` per received batch, so ``Q_ψ`` gets ``k`` steps per
    encoder step as in Algorithm 1). Returns the mean CE over the steps."""
    zt, ut = torch.from_numpy(z), torch.from_numpy(u.astype(np.int64))
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, zt.shape[0], (min(batch_size, zt.shape[0]),), generator=gen)
        loss = F.cross_entropy(psi(zt[idx]), ut[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return float(np.mean(losses)) if losses else float("nan")


def client_step(
    models: ClientModels,
    psi: nn.Module,
    *,
    x: np.ndarray,
    u: np.ndarray,
    s: np.ndarray,
    rows: np.ndarray,
    beta: float,
    lam: float,
    k: int,
    batch_size: int,
    seed: int,
    client: int,
) -> dict[str, float]:
    """``k`` adversary steps on fresh batches (encoder frozen), then one encoder step on ``rows`` with the
    received ``Q_ψ`` (its parameters are not stepped). Returns the batch-mean losses (aggregates)."""
    enc, adv = models.encoder, models.adversary
    gen = generator(seed, client, models.step, "adversary")
    adv_losses = []
    for _ in range(k):
        idx = torch.randint(0, x.shape[0], (min(batch_size, x.shape[0]),), generator=gen).numpy()
        with torch.no_grad():
            z = enc.release(torch.from_numpy(x[idx]), gen)
        loss = F.cross_entropy(adv(z), torch.from_numpy(s[idx].astype(np.int64)))
        models.opt_adversary.zero_grad()
        loss.backward()
        models.opt_adversary.step()
        adv_losses.append(loss.item())
    psi.requires_grad_(False)
    adv.requires_grad_(False)
    xb = torch.from_numpy(x[rows])
    mu, logvar = enc(xb)
    z = reparameterise(mu, logvar, generator(seed, client, models.step, "step"))
    loss = encoder_loss(
        z,
        mu,
        logvar,
        torch.from_numpy(u[rows].astype(np.int64)),
        torch.from_numpy(s[rows].astype(np.int64)),
        psi,
        adv,
        beta=beta,
        lam=lam,
    )
    models.opt_encoder.zero_grad()
    loss.backward()
    models.opt_encoder.step()
    adv.requires_grad_(True)
    models.step += 1
    return {"adversary_ce": float(np.mean(adv_losses)) if adv_losses else float("nan"), "encoder_loss": loss.item()}


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
