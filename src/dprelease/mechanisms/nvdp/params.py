"""The ``nvdp:`` section of ``params.yaml`` (issue 11, docs/algorithms.md, F) and its defaults: NVDP's own section, added to
``Params`` as ``Params.nvdp`` through :data:`SECTION` (:mod:`dprelease.contracts.plugins`). Pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dprelease.contracts.mechanism import ResultsSection


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class NVDPParams(_Strict):
    """NVDP with parameter clipping (issue 11, docs/algorithms.md, F); every key is commented in params.yaml."""

    tasks: list[Literal["mrpc", "rte", "sst2", "osha"]] = ["mrpc", "rte", "sst2", "osha"]
    lambdas: list[float] = [1e-3, 1e-2, 1e-1, 1.0]
    clip: dict[str, list[float]] = {
        "mrpc": [2.0, 0.0, 0.5],
        "rte": [6.0, 0.0, 0.5],
        "sst2": [2.0, 0.0, 1.0],
        "osha": [7.0, 0.0, 1.0],
    }
    renyi_order: float = Field(1.1, gt=1.0)
    delta: float = Field(1e-5, gt=0.0, lt=1.0)
    backend: Literal["head", "full"] = "head"
    dim: int = Field(64, ge=4, le=1024)
    heads: int = Field(4, ge=1, le=64)
    max_length: int = Field(128, ge=8, le=512)
    epochs: int = Field(3, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    encoder_lr: float = Field(7e-5, gt=0.0)
    batch_size: int = Field(32, ge=1)
    eval_batch: int = Field(16, ge=2)
    encode_batch: int = Field(64, ge=1)
    torch_threads: int = Field(1, ge=0)
    glue_dir: str = "data/glue"
    sst2_max_train: int | None = Field(3000, ge=2)
    osha_max_train: int | None = Field(None, ge=2)
    release_lambda: float = Field(0.1, gt=0.0)
    release_dir: str = "release-nvdp"

    @model_validator(mode="after")
    def _grid(self) -> "NVDPParams":
        bad = [t for t in self.tasks if len(c := self.clip.get(t, [])) != 3 or c[0] <= 0 or not 0 <= c[1] <= c[2]]
        if not self.tasks or not self.lambdas or bad:
            raise ValueError(f"nvdp: give tasks, lambdas and a clip (C_mu > 0, 0 <= C_a_min <= C_a_max) per task {bad}")
        if "osha" in self.tasks and self.release_lambda not in self.lambdas:
            raise ValueError("nvdp.release_lambda must be one of nvdp.lambdas")
        return self


SECTION = ("nvdp", NVDPParams)  # Params.nvdp (dprelease.contracts.plugins)
SIGNED = lambda params: [params.nvdp.release_dir]  # its signed folder: `dprelease key rotate` re-signs it
RESULTS_SECTION = ResultsSection(  # its section of docs/results.md, written by its report stage
    path="reports/nvdp/section.md",
    heading="## NVDP with parameter clipping (`make nvdp`)",
    what="NVDP",
    target="nvdp",
)
