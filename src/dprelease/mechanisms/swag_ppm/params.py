"""What SWAG-PPM contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its sections (``ppm``, ``swag``,
``evaluation``, ``tune``, ``selection``), its comparison and audit arms, and the level its censored arm needs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dprelease.contracts.mechanism import Arm, ResultsSection


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SwagParams(_Strict):
    epochs: int = Field(20, ge=2, description="SWAG snapshots T (one per epoch)")
    lr: float = Field(0.01, gt=0.0)
    momentum: float = Field(0.0, ge=0.0, lt=1.0)
    batch_size: int = Field(8, ge=1)
    rank: int = Field(20, ge=2, description="low-rank K (deviation columns kept)")


class SwagSection(_Strict):
    """SWAG's settings for each backend (``swag.head``, ``swag.full``; the backend is ``model.backend``)."""

    head: SwagParams = SwagParams(epochs=20, lr=0.01, batch_size=32)
    full: SwagParams = SwagParams(epochs=20, lr=0.01, batch_size=8)

    @model_validator(mode="after")
    def _rank(self) -> "SwagSection":
        for name in ("head", "full"):
            s = getattr(self, name)
            if s.rank > s.epochs:
                raise ValueError(f"swag.{name}.rank ({s.rank}) exceeds swag.{name}.epochs ({s.epochs})")
        return self


def swag_settings(params) -> SwagParams:
    """SWAG's settings for the backend in use (``swag.<model.backend>``)."""
    return getattr(params.swag, params.model.backend)


def ppm_finetune(params):
    """SWAG-PPM's fine-tune settings: the backend's, without decoupled weight decay (the objective has λ)."""
    return params.backend.finetune.model_copy(update={"weight_decay": 0.0})


MIN_DRAWS = (
    100  # a fresh draw exceeds the max of S exchangeable draws with probability 1/(S + 1) (docs/guarantees.md, O)
)


class PPMTrace(_Strict):
    """SWAG-PPM's points: its ε is measured, not targeted; traced over the sampling temperature and c."""

    temperatures: list[float] = [1.0, 2.0, 4.0]
    c: list[float] = [1.0]

    @model_validator(mode="after")
    def _positive(self) -> "PPMTrace":
        if not self.temperatures or not self.c or any(v <= 0 for v in (*self.temperatures, *self.c)):
            raise ValueError("ppm.frontier: temperatures and c must be non-empty lists of positive numbers")
        return self


class PPMParams(_Strict):
    draws: int = Field(500, ge=2, description="posterior draws for risk and sensitivity")
    smoke_test: bool = Field(False, description="allow fewer than MIN_DRAWS draws (tests only: ε not meaningful)")
    c: float = Field(1.0, gt=0.0, le=2.0, description="weight slope")
    g: float = Field(0.0, ge=-1.0, le=1.0, description="weight offset")
    risk_norm: Literal["minmax", "divmax"] = "minmax"
    reweight: bool = True
    reweight_mode: Literal["iterative", "oneshot"] = Field(
        "iterative",
        description="iterative: damped refits to a target, accepted on validation utility; "
        "oneshot: the paper's single C.2 step (k, reweight_form), always released",
    )
    k: float = Field(0.95, ge=0.0, le=1.0, description="one-shot re-weighting strength (C.2)")
    reweight_form: Literal["power", "additive"] = "power"
    reweight_step: float = Field(0.5, gt=0.0, le=1.0, description="iterative: damping (log-scale step to target)")
    reweight_target: float | None = Field(None, gt=0.0, description="iterative: target Δ (null: round 2's Δ̂)")
    reweight_tolerance: float = Field(0.10, ge=0.0, le=1.0, description="iterative: accept Δ̂ ≤ target·(1 + tol)")
    reweight_aim: float = Field(
        0.9,
        gt=0.0,
        le=1.0,
        description="iterative: each step aims at aim·target (a margin for the drift of the refitted posterior)",
    )
    max_refits: int = Field(3, ge=1, le=20, description="iterative: refits before giving up")
    validation_draws: int = Field(30, ge=1, description="iterative: draws per round scored on the validation split")
    calibration: Literal["none", "scale", "subspace", "lr", "prior"] = Field(
        "subspace",
        description="weighted SWAG: none | scale (T_min = 1) | subspace (every T = 1 in SWAG's subspace) | "
        "lr (Mandt) | prior (subspace, and the diagonal ≥ 1/(λ·scale): T ≥ 1 in all directions)",
    )
    prior_precision: float = Field(
        100.0,
        gt=0.0,
        description="λ of the N(θ₀, I/λ) prior (θ₀: 0 for the head, the public "
        "pretrained weights for full): λ/(2N)·|θ − θ₀|², Laplace",
    )
    mechanism: Literal["asymptotic", "censored"] = Field(
        "asymptotic", description="censored: per-record w·CE censored at censor_epsilon/2 (strict ε for exact sampling)"
    )
    censor_epsilon: float | None = Field(
        8.0,
        gt=0.0,
        description="declared ε of the censored mechanism (κ = ε/2), "
        "fixed before any run; never the release's measured ε",
    )
    censor_form: Literal["hard", "soft"] = Field("soft", description="hard: min(w·CE, ε/2); soft: ε/2·tanh(w·CE/(ε/2))")
    draw_batch: int = Field(50, ge=1, description="draws evaluated together when the backend batches")
    frontier: PPMTrace = PPMTrace()  # its points on the frontier (stage frontier_swag_ppm only)

    @model_validator(mode="after")
    def _enough_draws(self) -> "PPMParams":
        # Δ̂ = max over S draws understates the supremum: a fresh draw's M exceeds it with probability
        # 1/(S + 1) (order statistics, docs/guarantees.md, O), 33 % at S = 2 and under 1 % from S = 100.
        if self.mechanism == "censored" and self.censor_epsilon is None:
            raise ValueError(
                "ppm.censor_epsilon: the censored mechanism needs a declared ε (e.g. 8.0), fixed before any run"
            )
        if self.draws < MIN_DRAWS and not self.smoke_test:
            raise ValueError(
                f"ppm.draws: at least {MIN_DRAWS} posterior draws are needed for an ε (a new draw "
                f"exceeds the max of S draws with probability 1/(S+1)); got {self.draws} "
                "(ppm.smoke_test: true allows fewer, for tests only)"
            )
        return self

    @property
    def reweighting(self) -> bool:
        """Round 3 runs: re-weighting on, asymptotic mechanism (the censored one bounds Δ by construction)."""
        return self.reweight and self.mechanism == "asymptotic"

    @property
    def rounds(self) -> list[int]:
        """Rounds that are fitted (the released one is ``reweighting.released_round``)."""
        return [1, 2, 3] if self.reweighting else [1, 2]


class EvaluationParams(_Strict):
    """The release's utility evaluation (stage ``evaluate``): not the privacy audit (``privacy_audit``)."""

    draws: int = Field(30, ge=1, description="further draws for the utility distribution")


class SelectionParams(_Strict):
    """Private selection of the released draw (Liu–Talwar, docs/algorithms.md, D.10)."""

    enabled: bool = Field(False, description="run private selection (needs data.validation_size > 0)")
    tau: float = Field(0.25, ge=0.0, le=1.0, description="utility threshold a draw must reach")
    gamma: float = Field(0.1, gt=0.0, le=1.0, description="stop probability after each failed try")
    metric: Literal["macro_f1", "weighted_f1"] = "macro_f1"
    split: Literal["validation", "test"] = "validation"  # "test" is refused at run time, with the reason


class TuneParams(_Strict):
    """The practical guide's tuning procedure over (c, fine-tune epochs) (seed 001)."""

    target_epsilon: float = Field(10.0, gt=0.0)
    max_drop_weighted: float = Field(0.10, gt=0.0, lt=1.0, description="max relative F1 drop vs non-private")
    max_drop_macro: float = Field(0.10, gt=0.0, lt=1.0)
    start_c: float = Field(1.0, gt=0.0, le=2.0)
    start_epochs: int = Field(7, ge=1)
    c_step: float = Field(0.15, gt=0.0)
    epoch_step: int = Field(3, ge=1)
    c_min: float = Field(0.1, gt=0.0)
    max_epochs: int = Field(40, ge=1)
    budget: int = Field(8, ge=1, description="maximum number of runs in search mode")
    grid_c: list[float] = [1.0, 0.85, 0.7]
    grid_epochs: list[int] = [7, 10, 13]
    workers: int = Field(2, ge=1, description="grid cells run concurrently on a thread-pool task runner")

    @model_validator(mode="after")
    def _grid(self) -> "TuneParams":
        if not self.grid_c or not self.grid_epochs:
            raise ValueError("tune.grid_c and tune.grid_epochs must not be empty")
        if any(not 0 < c <= 2 for c in self.grid_c) or any(e < 1 for e in self.grid_epochs):
            raise ValueError("tune grid: c must lie in (0, 2] and epochs be >= 1")
        return self


def _calibrated(q: dict) -> str:
    return f", calibrated ({q['calibration']})" if q.get("calibration", "none") != "none" else ""


# the stage that writes SWAG-PPM's points on the privacy/utility frontier (metrics/frontier/swag_ppm.json); the
# frontier package finds every contributing source by this attribute (dprelease.core.utility.points)
FRONTIER = "frontier_swag_ppm"

_READS = ("swag", "ppm", "evaluation")  # what its audited arms' stages read

ARMS = (
    Arm(name="swag_ppm", stage="swag_ppm", label="SWAG-PPM round 2", suffix=_calibrated, params=_READS),
    Arm(
        name="swag_ppm_reweighted",
        stage="draw",
        label="SWAG-PPM release",
        release=True,
        model="draw/release",
        record="metrics/swag_ppm_draw.json",  # its draw's guarantee record; its F1 and per-class table: the evaluation
        scores=("metrics/evaluation.json", "released_weighted_f1", "released_macro_f1"),
        per_class="reports/release",
        suffix=lambda q: f" (round {q['round']})",
        requires=("ppm.reweight: true", lambda p: p.ppm.reweight),
        params=_READS,
    ),
    Arm(
        name="swag_ppm_uncalibrated",
        stage="swag_ppm_uncalibrated",
        label="SWAG-PPM round 2, spec scale 1/2",
        audited=False,
    ),
    Arm(name="swag_ppm_censored", stage="swag_ppm_censored", label="SWAG-PPM censored (strict)", audited=False),
)


def _censored_level(params) -> str | None:
    if params.ppm.censor_epsilon is None and "swag_ppm_censored" in params.compare.arms:
        return (
            "ppm.censor_epsilon: the censored arm needs a declared ε (e.g. 8.0), fixed before any run; it is never "
            "the release's measured ε"
        )
    return None


RESULTS_SECTION = ResultsSection(  # its section of docs/results.md, written by stage evaluate (swag_ppm/section.py)
    path="reports/release/section.md",
    heading="## SWAG-PPM's chain, measured beside the release (`make run`; released only when `released.mechanism: swag_ppm`)",
    what="SWAG-PPM's chain",
    target="run",
)

CHECKS = (_censored_level,)  # run when params are parsed (dprelease.contracts.plugins.checks)

SECTIONS = (
    ("ppm", PPMParams),
    ("swag", SwagSection),
    ("evaluation", EvaluationParams),
    ("tune", TuneParams),
    ("selection", SelectionParams),
)

# where an older params.yaml had these (dprelease.contracts.plugins.moved)
MOVED = {
    "audit": ("evaluation", "the release's utility evaluation; the privacy audit is 'privacy_audit'"),
    "model.head.swag": ("swag.head", "SWAG's settings are SWAG-PPM's section"),
    "model.full.swag": ("swag.full", "SWAG's settings are SWAG-PPM's section"),
    "frontier.ppm": ("ppm.frontier", "SWAG-PPM's frontier trace is SWAG-PPM's section"),
}
