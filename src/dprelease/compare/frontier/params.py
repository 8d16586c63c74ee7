"""The ``frontier:`` section of ``params.yaml`` (docs/frontier.md), added to ``Params`` as ``Params.frontier`` through
:data:`SECTION` (:mod:`dprelease.contracts.plugins`). Pydantic only. What every source shares, declared before the data
are seen: the ε grid and the budget are the agency's. A mechanism's own search grid is in its own section
(``dpsgd.grid``, ``ppm.frontier``, ``linear_ppm.frontier``), bounded, its size reported."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class FrontierParams(_Strict):
    epsilons: list[float] = [1.0, 2.0, 4.0, 8.0, 16.0]  # the declared ε grid of every mechanism that targets an ε
    budget_epsilon: float = Field(8.0, gt=0.0)  # the agency's budget: the recommendation's ε ≤ budget
    seeds: int = Field(3, ge=3, le=20)  # refits of each chosen configuration with secret seeds (mean ± sd)
    accountants: list[Literal["rdp", "prv"]] = ["rdp", "prv"]  # DP-SGD: σ calibrated by each, reported side by side
    sources: list[str] | None = None  # the contributing packages' sources (None: every one that declares FRONTIER)
    # the forward-in-time check (metrics/forward.json): trained on private reports dated before this day, tested on the
    # test reports from it on, beside the same models on the earlier test reports; null: no check
    forward_from: str | None = Field("2016-07-01", pattern=r"^\d{4}-\d{2}-\d{2}$")

    @model_validator(mode="after")
    def _grid(self) -> "FrontierParams":
        if not self.epsilons or any(e <= 0 for e in self.epsilons) or len(set(self.epsilons)) != len(self.epsilons):
            raise ValueError("frontier.epsilons must be distinct positive numbers")
        if not self.accountants:
            raise ValueError("frontier.accountants must name at least one of rdp, prv")
        return self


SECTION = ("frontier", FrontierParams)  # Params.frontier (dprelease.contracts.plugins)
