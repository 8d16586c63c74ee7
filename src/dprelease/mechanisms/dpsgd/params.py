"""What DP-SGD contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its ``dpsgd`` section, its arm (with
the δ sweep the comparison report reads) and the declared target ε its arm needs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dprelease.contracts.mechanism import Arm, PlantedBug, ReportTable


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DPSGDRun(_Strict):
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(512, ge=0, description="expected (Poisson) batch size; 0: full batch (q = 1)")
    lr: float = Field(1e-3, gt=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0, description="per-sample clipping bound C")
    grad_sample_mode: Literal["ghost", "hooks"] = Field(
        "ghost", description="Opacus fast gradient clipping (ghost) or per-sample gradient hooks"
    )
    hidden: int | None = Field(None, ge=0, description="head backend: hidden width (0: linear; null: model.head's)")
    optimizer: Literal["adamw", "sgd"] = Field("adamw", description="adamw (weight decay 0) | sgd (with momentum)")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="sgd only")


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
                raise ValueError(f"dpsgd.grid.{name} must not be empty")
        if not (self.sgd_lrs or self.adamw_lrs):
            raise ValueError("dpsgd.grid: at least one learning rate (sgd_lrs or adamw_lrs)")
        if any(b < 0 for b in self.batch_sizes) or any(e < 1 for e in self.epochs):
            raise ValueError("dpsgd.grid: batch sizes ≥ 0 (0: full batch) and epochs ≥ 1")
        if any(v <= 0 for v in (*self.max_grad_norms, *self.sgd_lrs, *self.adamw_lrs)):
            raise ValueError("dpsgd.grid: clipping norms and learning rates must be > 0")
        if self.size > 200:
            raise ValueError(f"dpsgd.grid: {self.size} configurations; the grid is bounded at 200")
        return self

    @property
    def size(self) -> int:
        return (
            len(self.batch_sizes)
            * len(self.epochs)
            * len(self.max_grad_norms)
            * (len(self.sgd_lrs) + len(self.adamw_lrs))
        )


class DPSGDParams(_Strict):
    """DP-SGD baseline (docs/algorithms.md, E): Opacus, Poisson sampling, per-sample clipping, RDP accountant."""

    target_epsilon: float | None = Field(
        8.0,
        gt=0.0,
        description="declared target ε, fixed before any run; never "
        "the release's measured ε (null: an error when a DP-SGD arm runs)",
    )
    delta_sweep: list[float] = [1e-3, 1e-2, 0.1, 0.99]
    conversion: str = "mironov"  # the accountant, by its registry name: an RDP → (ε, δ) conversion, or PRV
    planted_noise_divisor: float = Field(1.0, ge=1.0, description="AUDIT ONLY, a planted bug: σ/divisor, same claim")
    warm_start: bool = Field(
        True,
        description="start from the public model (softmax regression on the public "
        "period, logit-adjusted to the private roles' mix) instead of zero: linear head only",
    )
    head: DPSGDRun = DPSGDRun(lr=1e-2)  # lr picked on a small grid (README); the rest as the paper
    full: DPSGDRun = DPSGDRun()  # the paper's settings: batch 512, lr 1e-3, C = 1, 30 epochs
    # the declared search grid: the release's configuration (the public proxy's best), the arm's and the frontier's
    grid: DPSGDGrid = DPSGDGrid()

    def run_for(self, backend: str) -> DPSGDRun:
        """The run settings of ``backend`` (``dpsgd.head`` or ``dpsgd.full``)."""
        return getattr(self, backend)

    @field_validator("conversion")
    @classmethod
    def _registered(cls, name: str) -> str:
        """A name of the accountant registry (:mod:`dprelease.core.privacy.accountants`: adding one is one file)."""
        from dprelease.core.privacy import accountants

        if name not in accountants.names():
            raise ValueError(f"unknown accountant {name!r} (one of {', '.join(accountants.names())})")
        return name

    @model_validator(mode="after")
    def _sweep_range(self) -> "DPSGDParams":
        for d in self.delta_sweep:
            if not 0.0 < d < 1.0:
                raise ValueError(f"dpsgd.delta_sweep: δ must lie in (0, 1), got {d}")
        return self


SECTION = ("dpsgd", DPSGDParams)  # Params.dpsgd (dprelease.contracts.plugins)

# its row: DP-SGD at the declared target ε (dpsgd.target_epsilon), not "matched" to the release's measured ε
PLANTED_DIVISOR = 4.0  # the canary audit's planted bug: σ divided by 4, claiming the accountant's ε for σ

ARMS = (
    Arm(
        name="dpsgd",
        stage="dpsgd",
        label="DP-SGD (Opacus) at the declared target ε",
        files=("metrics/dpsgd_sweep.json",),
        params=("dpsgd",),
        planted=(
            PlantedBug(
                key="dpsgd_noise_div4",
                guarantee=f"planted bug: DP-SGD with σ/{PLANTED_DIVISOR:g} claiming the accountant's ε for σ",
                overrides=(("dpsgd.planted_noise_divisor", PLANTED_DIVISOR),),
            ),
        ),
        table=ReportTable(
            title="Table 4: DP-SGD δ sweep at the declared target ε",
            source="metrics/dpsgd_sweep.json",
            csv="delta_sweep.csv",
            columns=("delta", "target_epsilon", "epsilon", "noise_multiplier", "weighted_f1", "macro_f1"),
        ),
    ),
)

FRONTIER = "frontier_dpsgd"  # the stage that writes its frontier points (dprelease.core.utility.points)


# what the public proxy's choice sets in the release's run (dpsgd/search.py, release_configuration): with a linear head
# (and the proxy, which always exists) the release reads none of these from dpsgd.<backend>
CHOSEN = ("epochs", "batch_size", "lr", "max_grad_norm", "optimizer", "momentum")


def _overridden(params) -> dict[str, str]:
    """The ``dpsgd.<backend>`` settings the release does not read: with a linear head its run's settings are the
    public proxy's best configuration of ``dpsgd.grid``; otherwise none (the declared recipe is ``dpsgd.<backend>``)."""
    backend = params.model.backend
    run = params.dpsgd.run_for(backend)
    hidden = run.hidden if run.hidden is not None else params.model.head.hidden
    if backend != "head" or hidden:
        return {}
    why = (
        f"the release's DP-SGD run takes it from the public proxy's best configuration of dpsgd.grid (a linear "
        f"head; zero ε, reports up to proxy.until {params.proxy.until}): change dpsgd.grid to change the choice"
    )
    return {f"dpsgd.{backend}.{key}": why for key in CHOSEN}


OVERRIDDEN = _overridden  # read when this mechanism is released (dprelease.contracts.plugins.overridden)


def _declared_target(params) -> str | None:
    if params.dpsgd.target_epsilon is None and "dpsgd" in {*params.compare.arms, *params.privacy_audit.arms}:
        return (
            "dpsgd.target_epsilon: DP-SGD needs a declared target ε (e.g. 8.0), fixed before any run; it is never "
            "the release's measured ε"
        )
    return None


CHECKS = (_declared_target,)  # run when params are parsed (dprelease.contracts.plugins.checks)

MOVED = {
    "dpsgd.public_l2": ("public_model.l2", "the public model is the core's: the floor, the warm start and a release"),
    "frontier.dpsgd": ("dpsgd.grid", "DP-SGD's declared grid is DP-SGD's: its release reads it too"),
    "dpsgd.delta": ("released.delta", "the one declared δ: the release's, the comparison's and the frontier's"),
}
