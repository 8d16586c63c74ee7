"""The ``frontier:`` section of ``params.yaml`` (docs/frontier.md), added to ``Params`` as ``Params.frontier`` through
:data:`SECTION` (:mod:`dprelease.contracts.plugins`). Pydantic only. Every level here is declared before the data are seen:
the ε grid and the budget are the agency's, the search grids are bounded and their sizes are reported."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PrivateSelection(_Strict):
    """DP-SGD's configuration chosen privately (Papernot & Steinke 2022): K ~ TNB(η, γ) runs of a random grid
    configuration scored with Gaussian noise σ_s on the validation count; its ε covers the search."""

    enabled: bool = True
    eta: float = Field(1.0, gt=0.0)  # η = 1: K geometric
    gamma: float = Field(0.1, gt=0.0, lt=1.0)  # E[K] = η(1−γ)/(γ(1−γ^η)): 10 at η = 1, γ = 0.1
    score_sigma: float = Field(5.0, gt=0.0)  # noise on the count of correct validation predictions
    shortlist: int = Field(
        3, ge=1
    )  # candidates: the public proxy's best few at each ε (the whole grid without a proxy)


class DPSGDGrid(_Strict):
    """DP-SGD's declared search grid (linear head on the frozen encoder's embeddings; Opacus's algorithm in
    closed form, dprelease.mechanisms.dpsgd.batched). ``batch_sizes`` 0 means full batch (q = 1)."""

    batch_sizes: list[int] = [0, 512]
    epochs: list[int] = [20, 50]
    max_grad_norms: list[float] = [0.1, 1.0]
    sgd_lrs: list[float] = [20.0, 80.0, 320.0]  # SGD with momentum
    momentum: float = Field(0.9, ge=0.0, lt=1.0)
    adamw_lrs: list[float] = [0.003, 0.03]
    private_selection: PrivateSelection = PrivateSelection()

    @model_validator(mode="after")
    def _bounded(self) -> "DPSGDGrid":
        for name in ("batch_sizes", "epochs", "max_grad_norms"):
            if not getattr(self, name):
                raise ValueError(f"frontier.dpsgd.{name} must not be empty")
        if not (self.sgd_lrs or self.adamw_lrs):
            raise ValueError("frontier.dpsgd: at least one learning rate (sgd_lrs or adamw_lrs)")
        if any(b < 0 for b in self.batch_sizes) or any(e < 1 for e in self.epochs):
            raise ValueError("frontier.dpsgd: batch sizes ≥ 0 (0: full batch) and epochs ≥ 1")
        if any(v <= 0 for v in (*self.max_grad_norms, *self.sgd_lrs, *self.adamw_lrs)):
            raise ValueError("frontier.dpsgd: clipping norms and learning rates must be > 0")
        if self.size > 200:
            raise ValueError(f"frontier.dpsgd: {self.size} configurations; the grid is bounded at 200")
        return self

    @property
    def size(self) -> int:
        return (
            len(self.batch_sizes)
            * len(self.epochs)
            * len(self.max_grad_norms)
            * (len(self.sgd_lrs) + len(self.adamw_lrs))
        )


class PPMTrace(_Strict):
    """SWAG-PPM's points: its ε is measured, not targeted; traced over the sampling temperature and c."""

    temperatures: list[float] = [1.0, 2.0, 4.0]
    c: list[float] = [1.0]

    @model_validator(mode="after")
    def _positive(self) -> "PPMTrace":
        if not self.temperatures or not self.c or any(v <= 0 for v in (*self.temperatures, *self.c)):
            raise ValueError("frontier.ppm: temperatures and c must be non-empty lists of positive numbers")
        return self


class FrontierParams(_Strict):
    epsilons: list[float] = [1.0, 2.0, 4.0, 8.0, 16.0]  # the declared ε grid of every mechanism that targets an ε
    budget_epsilon: float = Field(8.0, gt=0.0)  # the agency's budget: the recommendation's ε ≤ budget
    seeds: int = Field(3, ge=3, le=20)  # refits of each chosen configuration with secret seeds (mean ± sd)
    accountants: list[Literal["rdp", "prv"]] = ["rdp", "prv"]  # DP-SGD: σ calibrated by each, reported side by side
    sources: list[str] | None = None  # the contributing packages' sources (None: every one that declares FRONTIER)
    # the forward-in-time check (metrics/forward.json): trained on private reports dated before this day, tested on the
    # test reports from it on, beside the same models on the earlier test reports; null: no check
    forward_from: str | None = Field("2016-07-01", pattern=r"^\d{4}-\d{2}-\d{2}$")
    dpsgd: DPSGDGrid = DPSGDGrid()
    ppm: PPMTrace = PPMTrace()

    @model_validator(mode="after")
    def _grid(self) -> "FrontierParams":
        if not self.epsilons or any(e <= 0 for e in self.epsilons) or len(set(self.epsilons)) != len(self.epsilons):
            raise ValueError("frontier.epsilons must be distinct positive numbers")
        if not self.accountants:
            raise ValueError("frontier.accountants must name at least one of rdp, prv")
        return self


SECTION = ("frontier", FrontierParams)  # Params.frontier (dprelease.contracts.plugins)
