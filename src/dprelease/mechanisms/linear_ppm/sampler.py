"""Several Markov chains on a potential over a flat vector z, each from its own over-dispersed start and seed; the kind
is ``linear_ppm.sampler.kind`` (``hmc_split``, ``hmc_leapfrog`` or ``nuts_pyro``).

See docs/linear_ppm.md, "Notes from the code", `mechanisms/linear_ppm/sampler.py`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from dprelease.mechanisms.linear_ppm import hmc

KINDS = ("hmc_split", "hmc_leapfrog", "nuts_pyro")
NAMES = {"hmc_split": "batched split HMC", "hmc_leapfrog": "batched HMC"}


@dataclass(frozen=True)
class Chains:
    z: torch.Tensor  # [chains, draws, p] kept draws
    divergences: list[int]  # per chain, after warm-up
    acceptance: list[float]  # per chain, mean acceptance probability of the kept transitions
    step_size: list[float]  # per chain, after adaptation
    seconds: float
    settings: dict = field(default_factory=dict)


def run_chains(
    potential: Callable[[torch.Tensor], torch.Tensor],
    starts: torch.Tensor,
    seeds: list[int],
    *,
    warmup: int,
    draws: int,
    max_tree_depth: int = 6,
    target_accept: float = 0.8,
    kind: str = "hmc_split",
) -> Chains:
    """``len(seeds)`` chains on exp(−potential(z)), chain c from ``starts[c]`` seeded with ``seeds[c]``.
    ``potential`` maps a batch z [chains, p] to [chains], each row's value depending on that row only.
    ``max_tree_depth``: NUTS's tree depth; for the HMC kinds, at most 2^depth − 1 integration steps per transition
    (NUTS's own bound on one transition's gradients)."""
    if len(starts) != len(seeds):
        raise ValueError("one start and one seed per chain")
    settings = {
        "warmup": warmup,
        "draws": draws,
        "chains": len(seeds),
        "max_tree_depth": max_tree_depth,
        "target_accept": target_accept,
        "mass_matrix": "identity on z",
    }
    if kind == "nuts_pyro":
        return _pyro(
            potential,
            starts,
            seeds,
            warmup=warmup,
            draws=draws,
            max_tree_depth=max_tree_depth,
            target_accept=target_accept,
            settings=settings,
        )
    if kind not in NAMES:
        raise ValueError(f"unknown sampler kind {kind!r} ({' | '.join(KINDS)})")
    integrator = kind.removeprefix("hmc_")
    out = hmc.run(
        potential,
        starts,
        seeds,
        warmup=warmup,
        draws=draws,
        max_steps=2**max_tree_depth - 1,
        target_accept=target_accept,
        integrator=integrator,
    )
    return Chains(
        out["z"],
        out["divergences"],
        out["acceptance"],
        out["step_size"],
        out["seconds"],
        {
            "sampler": NAMES[kind],
            "kind": kind,
            **settings,
            "max_steps": 2**max_tree_depth - 1,
            "integrator": "split: exact N(0, I) rotation + kicks by ∇U − z" if integrator == "split" else "leapfrog",
            "trajectory": f"{hmc.TRAJECTORY:g} · U[{1 - hmc.JITTER:g}, {1 + hmc.JITTER:g}]",
            "gradients_per_chain": out["gradients"],
        },
    )


def _pyro(potential, starts, seeds, *, warmup, draws, max_tree_depth, target_accept, settings) -> Chains:
    from pyro.infer import MCMC, NUTS  # Pyro is imported only by this reference path

    begin, out, div, acc, step = time.perf_counter(), [], [], [], []
    for start, seed in zip(starts, seeds):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            kernel = NUTS(
                potential_fn=lambda p: potential(p["z"][None])[0],
                adapt_step_size=True,
                adapt_mass_matrix=False,
                max_tree_depth=max_tree_depth,
                target_accept_prob=target_accept,
                jit_compile=False,
                full_mass=False,
            )
            last: dict = {}

            def hook(k, _sample, stage, i, last=last):  # the kernel's own counts, read at the final draw
                if stage == "Sample" and i == draws - 1:
                    last.update(k.diagnostics(), mean_accept=float(k.logging()["acc. prob"]), step=float(k.step_size))

            mcmc = MCMC(
                kernel,
                num_samples=draws,
                warmup_steps=warmup,
                initial_params={"z": start.clone()},
                num_chains=1,
                disable_progbar=True,
                hook_fn=hook,
            )
            mcmc.run()
            out.append(mcmc.get_samples()["z"].detach().clone())
            div.append(len(last["divergences"]))
            acc.append(last["mean_accept"])
            step.append(last["step"])
    return Chains(
        torch.stack(out),
        div,
        acc,
        step,
        time.perf_counter() - begin,
        {"sampler": "NUTS (Pyro)", "kind": "nuts_pyro", **settings},
    )


def overdispersed_starts(rng: np.random.Generator, chains: int, dim: int, *, spread: float) -> torch.Tensor:
    """Chain starts z₀ ~ N(0, spread²·I): wider than the preconditioned posterior (≈ N(0, I) in z) when
    spread > 1, so chains that agree at the end have forgotten where they began (Gelman & Rubin 1992)."""
    return torch.from_numpy(rng.standard_normal((chains, dim)) * spread).float()
