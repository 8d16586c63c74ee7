"""Hamiltonian Monte Carlo with every chain advanced in one batched computation (one GEMM and one autograd call per
step for all chains), per-chain step sizes by dual averaging and per-chain generators.

See docs/linear_ppm.md, "Notes from the code", `mechanisms/linear_ppm/hmc.py`."""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

MAX_DELTA_ENERGY = 1000.0
TRAJECTORY = 2.0  # mean trajectory time (module docstring)
JITTER = 0.2
RESTART = 4  # the dual averaging restarts at warm-up // RESTART
INTEGRATORS = ("split", "leapfrog")
_GAMMA, _T0, _KAPPA, _MU = 0.1, 10.0, 0.75, 10.0  # Stan: γ 0.05 (see the module docstring)


def value_and_grad(potential: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """U and ∇U for a batch z [chains, p] → ([chains] float64, [chains, p]); each row's potential must depend on
    that row only (the gradient of the sum is then each chain's own gradient)."""
    with torch.enable_grad():
        zz = z.detach().requires_grad_(True)
        u = potential(zz)
        if u.shape != z.shape[:1]:
            raise ValueError(f"the potential must map [chains, p] to [chains] (got {tuple(u.shape)})")
        (g,) = torch.autograd.grad(u.sum(), zz)
    return u.detach().double(), g.detach()


class DualAveraging:
    """Hoffman & Gelman (2014) Algorithm 5's step-size adaptation, one per chain (tensors [chains])."""

    def __init__(self, step: torch.Tensor, target: float, *, cap: float) -> None:
        self.target, self.cap = target, math.log(cap)
        self.restart(step)

    def restart(self, step: torch.Tensor) -> None:
        self.mu = torch.log(_MU * step)
        self.t, self.h_bar = 0, torch.zeros_like(step)
        self.log_step, self.log_bar = torch.log(step), torch.zeros_like(step)

    def update(self, accept: torch.Tensor) -> torch.Tensor:
        """One warm-up transition's acceptance probabilities [chains] → the next step sizes."""
        self.t += 1
        w = 1.0 / (self.t + _T0)
        self.h_bar = (1 - w) * self.h_bar + w * (self.target - accept)
        self.log_step = (self.mu - math.sqrt(self.t) / _GAMMA * self.h_bar).clamp(max=self.cap)
        eta = self.t**-_KAPPA
        self.log_bar = eta * self.log_step + (1 - eta) * self.log_bar
        return self.log_step.exp()

    @property
    def final(self) -> torch.Tensor:
        return self.log_bar.exp()


def integrate(potential, z, p, u, g, h, steps, *, integrator: str):
    """``steps[c]`` steps of size ``h[c]`` for every chain at once (a chain that has done its steps stays put while
    the others go on); returns the end state (z, p, U, ∇U) and the highest energy met on the way (NaN or inf
    where a step met a non-finite value)."""
    h2, peak = h[:, None], energy(u, p)
    for k in range(int(steps.max())):
        live = (k < steps)[:, None]
        if integrator == "split":
            p1 = p - 0.5 * h2 * (g - z)
            c, s = torch.cos(h2), torch.sin(h2)
            z1, p1 = z * c + p1 * s, p1 * c - z * s
            u1, g1 = value_and_grad(potential, z1)
            p1 = p1 - 0.5 * h2 * (g1 - z1)
        else:
            p1 = p - 0.5 * h2 * g
            z1 = z + h2 * p1
            u1, g1 = value_and_grad(potential, z1)
            p1 = p1 - 0.5 * h2 * g1
        z, p, g = torch.where(live, z1, z), torch.where(live, p1, p), torch.where(live, g1, g)
        u = torch.where(live[:, 0], u1, u)
        peak = torch.where(live[:, 0], torch.maximum(peak, energy(u1, p1)), peak)  # maximum keeps a NaN
    return z, p, u, g, peak


def energy(u: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    return u + 0.5 * p.double().pow(2).sum(-1)


def _momenta(gens: list[torch.Generator], like: torch.Tensor, which: torch.Tensor | None = None) -> torch.Tensor:
    """A fresh N(0, I) momentum for each chain (for the chains in ``which`` only; the others get zeros and draw
    nothing, so each chain's stream advances by its own history alone)."""
    rows = [
        torch.randn(like.shape[1], generator=gen, dtype=like.dtype)
        if which is None or which[c]
        else torch.zeros(like.shape[1], dtype=like.dtype)
        for c, gen in enumerate(gens)
    ]
    return torch.stack(rows)


def _uniforms(gens: list[torch.Generator], n: int) -> torch.Tensor:
    return torch.stack([torch.rand(n, generator=gen, dtype=torch.float64) for gen in gens])  # [chains, n]


def initial_step(potential, z, u, g, gens, *, integrator: str, cap: float, tries: int = 30) -> torch.Tensor:
    """Hoffman & Gelman (2014) Algorithm 4 per chain: from h = 1 (at most ``cap``), double (or halve) h until one
    step's acceptance e^{−ΔH} crosses 1/2."""
    chains = len(z)
    step = torch.full((chains,), min(1.0, cap), dtype=torch.float64)
    direction = torch.zeros(chains, dtype=torch.float64)
    going = torch.ones(chains, dtype=torch.bool)
    for _ in range(tries):
        p = _momenta(gens, z, going)
        z1, p1, u1, _, _ = integrate(
            potential, z, p, u, g, step.to(z.dtype), torch.ones(chains, dtype=torch.long), integrator=integrator
        )
        log_a = (energy(u, p) - energy(u1, p1)).nan_to_num(nan=-math.inf)
        up = log_a > math.log(0.5)
        direction = torch.where(going & (direction == 0), torch.where(up, 1.0, -1.0), direction)
        crossed = torch.where(direction > 0, ~up, up) | ((direction > 0) & (step >= cap))
        going = going & ~crossed
        if not going.any():
            break
        step = torch.where(going, (step * 2.0**direction).clamp(max=cap), step)
    return step.clamp(max=cap)


def run(
    potential: Callable[[torch.Tensor], torch.Tensor],
    starts: torch.Tensor,
    seeds: list[int],
    *,
    warmup: int,
    draws: int,
    max_steps: int,
    target_accept: float,
    integrator: str = "split",
) -> dict:
    """Chains of HMC from ``starts`` [chains, p], chain c seeded with ``seeds[c]``: kept draws [chains, draws, p]
    and, per chain, divergences and mean acceptance over the kept draws and the final step size."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r} ({' | '.join(INTEGRATORS)})")
    if not (warmup >= 1 and draws >= 1 and max_steps >= 1 and 0 < target_accept < 1):
        raise ValueError("warmup, draws and max_steps must be ≥ 1 and 0 < target_accept < 1")
    begin, chains = time.perf_counter(), len(starts)
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    z = starts.detach().clone().float()
    u, g = value_and_grad(potential, z)
    if not (torch.isfinite(u).all() and torch.isfinite(g).all()):
        bad = [c for c in range(chains) if not (torch.isfinite(u[c]) and torch.isfinite(g[c]).all())]
        raise ValueError(f"the potential or its gradient is not finite at the start of chain(s) {bad}")
    cap = TRAJECTORY * (1 - JITTER)  # one step never turns further than the shortest trajectory
    adapt = DualAveraging(
        initial_step(potential, z, u, g, gens, integrator=integrator, cap=cap), target_accept, cap=cap
    )
    step = adapt.log_step.exp()
    kept = torch.empty(chains, draws, z.shape[1], dtype=z.dtype)
    divergent = torch.zeros(chains, dtype=torch.long)
    accept_sum = torch.zeros(chains, dtype=torch.float64)
    gradients = 0
    for i in range(warmup + draws):
        if i == warmup // RESTART and warmup >= 20:
            adapt.restart(step)
        if i == warmup:
            step = adapt.final
        p = _momenta(gens, z)
        jitter, coin = _uniforms(gens, 2).unbind(1)
        tau = TRAJECTORY * (1 + JITTER * (2 * jitter - 1))
        steps = torch.ceil(tau / step - 1e-9).clamp(1, max_steps).long()
        h = (tau / steps).minimum(step)
        z1, p1, u1, g1, peak = integrate(potential, z, p, u, g, h.to(z.dtype), steps, integrator=integrator)
        gradients += int(steps.max())
        start, end = energy(u, p), energy(u1, p1)
        delta = end - start
        finite = torch.isfinite(peak) & torch.isfinite(z1).all(1) & torch.isfinite(g1).all(1)
        bad = ~finite | (peak - torch.minimum(start, end) > MAX_DELTA_ENERGY)  # the same read from either end
        a = torch.where(bad, torch.zeros_like(delta), torch.exp(-delta.clamp(min=0.0)))  # the acceptance probability
        take = coin < a
        z, u, g = torch.where(take[:, None], z1, z), torch.where(take, u1, u), torch.where(take[:, None], g1, g)
        if i < warmup:
            step = adapt.update(a)
        else:
            kept[:, i - warmup] = z
            divergent += bad.long()
            accept_sum += a
    return {
        "z": kept,
        "divergences": divergent.tolist(),
        "acceptance": (accept_sum / draws).tolist(),
        "step_size": step.tolist(),
        "seconds": time.perf_counter() - begin,
        "gradients": gradients,
    }
