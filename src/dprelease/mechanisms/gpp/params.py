"""The ``gpp:`` section of ``params.yaml`` (issue 12, docs/algorithms.md, G) and its defaults: the GPP package's own section,
added to ``Params`` as ``Params.gpp`` through :data:`SECTION` (:mod:`dprelease.contracts.plugins`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dprelease.contracts.mechanism import ResultsSection


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class GPPProbeParams(_Strict):
    """The G.3 audit probe (MLP 256-128, fresh, Adam, no tuning)."""

    epochs: int = Field(30, ge=1)
    lr: float = Field(1e-3, gt=0.0, description="spec: 1e-4 for MNIST's 60k records; scaled up for the smaller sets")
    batch_size: int = Field(64, ge=1)


class GPPDigitsParams(_Strict):
    n_train: int = Field(6000, ge=20, description="training composites (from half of load_digits' images)")
    n_test: int = Field(2000, ge=20, description="test composites (from the other half)")
    d_z: int = Field(120, ge=1)
    clients: int = Field(5, ge=1, description="random partitions of the distributed run")


class GPPOshaParams(_Strict):
    enabled: bool = Field(True, description="run the OSHA setting (needs the release pipeline's features)")
    regions: str = Field("data/osha_regions.csv", description="state → federal OSHA region table")
    d_z: int = Field(64, ge=1)
    min_client_rows: int = Field(100, ge=1, description="regions with fewer training rows are merged")
    min_sector_rows: int = Field(10, ge=1, description="sectors with fewer training rows become 'other'")


class GPPDistributedParams(_Strict):
    enabled: bool = Field(True, description="run Algorithm 2 on Flower (gpp.federated)")
    hetero_betas: list[float] = Field(
        [0.5, 0.75, 1.0, 1.5, 2.0],
        min_length=1,
        description="client-specific β of the heterogeneous row (cycled over clients)",
    )


class GPPParams(_Strict):
    """Gaussian Privacy Protector (issue 12; docs/algorithms.md, G): centralized Algorithm 1, baselines, audit, sweeps,
    the distributed run on Flower and the sanitizer release."""

    beta: float = Field(1.0, gt=0.0)
    lam: float = Field(0.01, ge=0.0)
    k: int = Field(2, ge=0, description="head steps per encoder step")
    epochs: int = Field(30, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    batch_size: int = Field(64, ge=2)
    encoder_hidden: list[int] = Field([512, 256], min_length=1)
    head_hidden: list[int] = Field([256, 128])
    probe: GPPProbeParams = GPPProbeParams()
    noise_grid: list[float] = Field([1.0, 2.0, 4.0], min_length=1, description="noisy encoder scales tried")
    sweep_epochs: int = Field(10, ge=1, description="epochs of each sweep fit and noise trial (reduced size)")
    sweep_beta: list[float] = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]
    sweep_d_z: list[int] = [40, 80, 120, 160, 200]
    sweep_k: list[int] = [0, 1, 2, 3, 5]
    digits: GPPDigitsParams = GPPDigitsParams()
    osha: GPPOshaParams = GPPOshaParams()
    distributed: GPPDistributedParams = GPPDistributedParams()
    release: str = Field("release-gpp", description="the sanitizer release folder (OSHA encoder + card)")


SECTION = ("gpp", GPPParams)  # Params.gpp (dprelease.contracts.plugins)
SIGNED = lambda params: [params.gpp.release]  # its signed folder: `dprelease key rotate` re-signs it
RESULTS_SECTION = ResultsSection(  # its section of docs/results.md, written by its report stage
    path="reports/gpp/section.md",
    heading="## Gaussian Privacy Protector (`make gpp`)",
    what="GPP",
    target="gpp",
)
