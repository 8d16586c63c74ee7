"""The ``linear_ppm:`` section of ``params.yaml`` (docs/linear_ppm.md), added to ``Params`` as ``Params.linear_ppm``
through :data:`SECTION` (:mod:`dprelease.contracts.plugins`). Pydantic only. Every level here — λ, T, the censored ε, the
diagnostics' thresholds — is declared before any run; none is chosen by looking at an ε."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FRONTIER = "frontier_linear_ppm"  # the stage that writes its frontier points (dprelease.core.utility.points)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Thresholds(_Strict):
    """A configuration whose chains fail any of these is refused (nothing released, one line)."""

    rhat_max: float = Field(1.05, gt=1.0)  # rank-normalised split R-hat of log ξ and of the per-draw max-loss
    ess_min: float = Field(100.0, gt=0.0)  # bulk and tail ESS of both
    divergences_max: int = Field(0, ge=0)
    temperature_tolerance: float = Field(0.1, gt=0.0)  # |T̂_all − 1|: the equipartition temperature over all directions


class Sampler(_Strict):
    # hmc_split: all chains in one batched computation, split integrator (exact N(0, I) part; linear_ppm/hmc.py);
    # hmc_leapfrog: the same with the leapfrog integrator; nuts_pyro: Pyro's NUTS, chain after chain (reference)
    kind: Literal["hmc_split", "hmc_leapfrog", "nuts_pyro"] = "hmc_split"
    chains: int = Field(4, ge=2, le=16)
    warmup: int = Field(100, ge=10)  # per chain (step-size adaptation; discarded)
    draws: int = Field(100, ge=10)  # kept per chain
    start_spread: float = Field(2.0, ge=1.0)  # over-dispersed starts: z₀ ~ N(0, spread²·I) on the whitened scale
    max_tree_depth: int = Field(6, ge=1, le=10)  # NUTS's tree depth; HMC: at most 2^depth − 1 steps per transition
    target_accept: float = Field(0.8, gt=0.0, lt=1.0)


class RiskPoint(_Strict):
    prior_precision: float = Field(gt=0.0)
    temperature: float = Field(gt=0.0)


class Frontier(_Strict):
    """The points traced by ``frontier_linear_ppm``: risk-weighted at each declared (λ, T); censored (w ≡ 1) at
    each declared ε with ``censored_prior_precision`` and T = 1."""

    risk: list[RiskPoint] = [
        RiskPoint(prior_precision=100.0, temperature=1.0),
        RiskPoint(prior_precision=100.0, temperature=0.5),
    ]
    censored_epsilons: list[float] = [4.0, 8.0, 16.0]
    censored_prior_precision: float = Field(100.0, gt=0.0)


class LinearPPMParams(_Strict):
    release: str = "release-linear-ppm"  # the signed release folder (beside ``release``, never inside it)
    variant: Literal["risk", "censored"] = "risk"  # risk: ε = 2Δ̂/T (local) | censored: w ≡ 1, ε declared (strict)
    prior_precision: float = Field(100.0, gt=0.0)  # λ of the prior N(0, I/λ)
    temperature: float = Field(1.0, gt=0.0)  # T: the likelihood tempered by 1/T (ε = 2Δ̂/T, or κ = ε·T/2)
    censor_epsilon: float = Field(8.0, gt=0.0)  # the censored variant's declared ε (κ = ε·T/2)
    c: float = Field(1.0, ge=0.0)  # risk weights w = min(1, max(0, c·(1 − f̃) + g))
    g: float = Field(0.0, ge=0.0)
    risk_norm: Literal["minmax", "divmax"] = "minmax"
    sampler: Sampler = Sampler()
    diagnostics: Thresholds = Thresholds()
    frontier: Frontier = Frontier()

    @model_validator(mode="after")
    def _release_path(self) -> "LinearPPMParams":
        if not self.release.strip():
            raise ValueError("linear_ppm.release: a folder name is needed")
        if any(e <= 0 for e in self.frontier.censored_epsilons):
            raise ValueError("linear_ppm.frontier.censored_epsilons must be > 0")
        return self


SECTION = ("linear_ppm", LinearPPMParams)  # Params.linear_ppm (dprelease.contracts.plugins)
