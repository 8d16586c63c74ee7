"""Several NUTS chains (Pyro's ``NUTS`` with a ``potential_fn`` on torch; Hoffman & Gelman 2014) on a potential
over a flat vector z, each chain from its own over-dispersed start and with its own seed.

Every random choice — starts, momenta, the trajectories' directions, the Metropolis coins — comes from the seeds
the caller passes (the linear PPM derives them from the secret key). Pyro draws from torch's global generator,
so each chain runs inside ``torch.random.fork_rng``: the global generator is seeded for the chain and restored
after it, and nothing else in the process sees or disturbs the chain's stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch


@dataclass(frozen=True)
class Chains:
    z: torch.Tensor  # [chains, draws, p] kept draws
    divergences: list[int]  # per chain, after warm-up
    acceptance: list[float]  # per chain, mean acceptance probability of the kept transitions
    step_size: list[float]  # per chain, after adaptation
    seconds: float
    settings: dict = field(default_factory=dict)


def run_chains(potential: Callable[[torch.Tensor], torch.Tensor], starts: torch.Tensor, seeds: list[int], *,
               warmup: int, draws: int, max_tree_depth: int = 6, target_accept: float = 0.8) -> Chains:
    """``len(seeds)`` chains of NUTS on exp(−potential(z)), chain c from ``starts[c]`` seeded with ``seeds[c]``."""
    from pyro.infer import MCMC, NUTS  # Pyro is imported by the stages that sample, not by the package

    if len(starts) != len(seeds):
        raise ValueError("one start and one seed per chain")
    begin, out, div, acc, step = time.perf_counter(), [], [], [], []
    for start, seed in zip(starts, seeds):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            kernel = NUTS(potential_fn=lambda p: potential(p["z"]), adapt_step_size=True, adapt_mass_matrix=False,
                          max_tree_depth=max_tree_depth, target_accept_prob=target_accept,
                          jit_compile=False, full_mass=False)
            last: dict = {}

            def hook(k, _sample, stage, i, last=last):  # the kernel's own counts, read at the final draw
                if stage == "Sample" and i == draws - 1:
                    last.update(k.diagnostics(), mean_accept=float(k.logging()["acc. prob"]), step=float(k.step_size))

            mcmc = MCMC(kernel, num_samples=draws, warmup_steps=warmup, initial_params={"z": start.clone()},
                        num_chains=1, disable_progbar=True, hook_fn=hook)
            mcmc.run()
            out.append(mcmc.get_samples()["z"].detach().clone())
            div.append(len(last["divergences"]))
            acc.append(last["mean_accept"])
            step.append(last["step"])
    return Chains(torch.stack(out), div, acc, step, time.perf_counter() - begin,
                  {"sampler": "NUTS (Pyro)", "warmup": warmup, "draws": draws, "chains": len(seeds),
                   "max_tree_depth": max_tree_depth, "target_accept": target_accept, "mass_matrix": "identity on z"})


def overdispersed_starts(rng: np.random.Generator, chains: int, dim: int, *, spread: float) -> torch.Tensor:
    """Chain starts z₀ ~ N(0, spread²·I): wider than the preconditioned posterior (≈ N(0, I) in z) when
    spread > 1, so chains that agree at the end have forgotten where they began (Gelman & Rubin 1992)."""
    return torch.from_numpy(rng.standard_normal((chains, dim)) * spread).float()
