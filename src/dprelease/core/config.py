"""Typed pipeline configuration (``params.yaml``). Every section rejects unknown keys and out-of-range
values; ``load_params`` turns the first validation problem into a one-line :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from dprelease.pipeline import plugins
from .errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DataParams(_Strict):
    path: str = "data/osha_sir_2015_2016.csv.gz"
    text_column: str = "Final Narrative"
    label_column: str = "Nature"
    cap: int = Field(200, ge=1, description="max rows per class (D.1)")
    min_class_size: int = Field(2, ge=2, description="drop classes with fewer rows (D.2)")
    test_size: float = Field(0.5, gt=0.0, lt=1.0)
    validation_size: float = Field(0.2, ge=0.0, lt=1.0, description="fraction of the held-out half kept as the "
                                   "validation split (re-weighting acceptance, private selection); never the test split")
    limit_classes: int | None = Field(None, ge=2, description="keep only the N largest classes (small slices for tests)")
    encoding: Literal["auto", "utf-8", "cp1252"] = Field(
        "auto", description="auto: strict UTF-8, or cp1252 for a file with no UTF-8 multi-byte sequence at all")


class FeatureParams(_Strict):
    max_length: int = Field(128, ge=8, le=512)
    batch_size: int = Field(64, ge=1)


class OptimParams(_Strict):
    epochs: int = Field(ge=1)
    lr: float = Field(gt=0.0)
    batch_size: int = Field(ge=1)
    weight_decay: float = Field(0.0, ge=0.0)


class SwagParams(_Strict):
    epochs: int = Field(20, ge=2, description="SWAG snapshots T (one per epoch)")
    lr: float = Field(0.01, gt=0.0)
    momentum: float = Field(0.0, ge=0.0, lt=1.0)
    batch_size: int = Field(8, ge=1)
    rank: int = Field(20, ge=2, description="low-rank K (deviation columns kept)")


class HeadParams(_Strict):
    hidden: int = Field(256, ge=0, description="hidden width of the MLP head; 0 = linear")
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    finetune: OptimParams = OptimParams(epochs=10, lr=1e-3, batch_size=32, weight_decay=0.01)
    swag: SwagParams = SwagParams(epochs=20, lr=0.01, batch_size=32)


class FullParams(_Strict):
    """End-to-end fine-tuning of the transformer (the paper's setting; docs/algorithms.md, D.6)."""

    tiny: bool = Field(False, description="randomly initialised 1-layer transformer (CPU tests)")
    finetune: OptimParams = OptimParams(epochs=10, lr=5e-5, batch_size=8, weight_decay=0.01)
    swag: SwagParams = SwagParams(epochs=20, lr=0.01, batch_size=8)


class ModelParams(_Strict):
    backend: Literal["head", "full"] = "head"
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    head: HeadParams = HeadParams()
    full: FullParams = FullParams()

MIN_DRAWS = 100  # a fresh draw exceeds the max of S exchangeable draws with probability 1/(S + 1) (docs/guarantees.md, O)


class PPMParams(_Strict):
    draws: int = Field(500, ge=2, description="posterior draws for risk and sensitivity")
    smoke_test: bool = Field(False, description="allow fewer than MIN_DRAWS draws (tests only: ε not meaningful)")
    c: float = Field(1.0, gt=0.0, le=2.0, description="weight slope")
    g: float = Field(0.0, ge=-1.0, le=1.0, description="weight offset")
    risk_norm: Literal["minmax", "divmax"] = "minmax"
    reweight: bool = True
    reweight_mode: Literal["iterative", "oneshot"] = Field(
        "iterative", description="iterative: damped refits to a target, accepted on validation utility; "
                                 "oneshot: the paper's single C.2 step (k, reweight_form), always released")
    k: float = Field(0.95, ge=0.0, le=1.0, description="one-shot re-weighting strength (C.2)")
    reweight_form: Literal["power", "additive"] = "power"
    reweight_step: float = Field(0.5, gt=0.0, le=1.0, description="iterative: damping (log-scale step to target)")
    reweight_target: float | None = Field(None, gt=0.0, description="iterative: target Δ (null: round 2's Δ̂)")
    reweight_tolerance: float = Field(0.10, ge=0.0, le=1.0, description="iterative: accept Δ̂ ≤ target·(1 + tol)")
    reweight_aim: float = Field(0.9, gt=0.0, le=1.0, description="iterative: each step aims at aim·target (a "
                                                                 "margin for the drift of the refitted posterior)")
    max_refits: int = Field(3, ge=1, le=20, description="iterative: refits before giving up")
    validation_draws: int = Field(30, ge=1, description="iterative: draws per round scored on the validation split")
    calibration: Literal["none", "scale", "subspace", "lr", "prior"] = Field(
        "subspace", description="weighted SWAG: none | scale (T_min = 1) | subspace (every T = 1 in SWAG's subspace) | "
                                "lr (Mandt) | prior (subspace, and the diagonal ≥ 1/(λ·scale): T ≥ 1 in all directions)")
    prior_precision: float = Field(100.0, gt=0.0, description="λ of the N(θ₀, I/λ) prior (θ₀: 0 for the head, the public "
                                                               "pretrained weights for full): λ/(2N)·|θ − θ₀|², Laplace")
    mechanism: Literal["asymptotic", "censored"] = Field(
        "asymptotic", description="censored: per-record w·CE censored at censor_epsilon/2 (strict ε for exact sampling)")
    censor_epsilon: float | None = Field(8.0, gt=0.0, description="declared ε of the censored mechanism (κ = ε/2), "
                                         "fixed before any run; never the release's measured ε")
    censor_form: Literal["hard", "soft"] = Field("soft", description="hard: min(w·CE, ε/2); soft: ε/2·tanh(w·CE/(ε/2))")
    draw_batch: int = Field(50, ge=1, description="draws evaluated together when the backend batches")

    @model_validator(mode="after")
    def _enough_draws(self) -> "PPMParams":
        # Δ̂ = max over S draws understates the supremum: a fresh draw's M exceeds it with probability
        # 1/(S + 1) (order statistics, docs/guarantees.md, O), 33 % at S = 2 and under 1 % from S = 100.
        if self.mechanism == "censored" and self.censor_epsilon is None:
            raise ValueError("ppm.censor_epsilon: the censored mechanism needs a declared ε (e.g. 8.0), fixed "
                             "before any run")
        if self.draws < MIN_DRAWS and not self.smoke_test:
            raise ValueError(f"ppm.draws: at least {MIN_DRAWS} posterior draws are needed for an ε (a new draw "
                             f"exceeds the max of S draws with probability 1/(S+1)); got {self.draws} "
                             "(ppm.smoke_test: true allows fewer, for tests only)")
        return self


class EvaluationParams(_Strict):
    """The release's utility evaluation (stage ``evaluate``): not the privacy audit (``privacy_audit``)."""

    draws: int = Field(30, ge=1, description="further draws for the utility distribution")


class DPSGDRun(_Strict):
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(512, ge=0, description="expected (Poisson) batch size; 0: full batch (q = 1)")
    lr: float = Field(1e-3, gt=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0, description="per-sample clipping bound C")
    grad_sample_mode: Literal["ghost", "hooks"] = Field(
        "ghost", description="Opacus fast gradient clipping (ghost) or per-sample gradient hooks")
    hidden: int | None = Field(None, ge=0, description="head backend: hidden width (0: linear; null: model.head's)")
    optimizer: Literal["adamw", "sgd"] = Field("adamw", description="adamw (weight decay 0) | sgd (with momentum)")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="sgd only")


class DPSGDParams(_Strict):
    """DP-SGD baseline (docs/algorithms.md, E): Opacus, Poisson sampling, per-sample clipping, RDP accountant."""

    target_epsilon: float | None = Field(8.0, gt=0.0, description="declared target ε, fixed before any run; never "
                                         "the release's measured ε (null: an error when a DP-SGD arm runs)")
    delta: float | None = Field(None, gt=0.0, lt=1.0, description="None: min(n^-1.1, 1/(2n)) ≤ n^-1.1 (docs/algorithms.md, E.1)")
    delta_sweep: list[float] = [1e-3, 1e-2, 0.1, 0.99]
    conversion: Literal["mironov", "opacus", "prv"] = "mironov"  # RDP → (ε, δ) conversion, or the PRV accountant
    planted_noise_divisor: float = Field(1.0, ge=1.0, description="AUDIT ONLY, a planted bug: σ/divisor, same claim")
    head: DPSGDRun = DPSGDRun(lr=1e-2)  # lr picked on a small grid (README); the rest as the paper
    full: DPSGDRun = DPSGDRun()  # the paper's settings: batch 512, lr 1e-3, C = 1, 30 epochs

    @model_validator(mode="after")
    def _sweep_range(self) -> "DPSGDParams":
        for d in self.delta_sweep:
            if not 0.0 < d < 1.0:
                raise ValueError(f"dpsgd.delta_sweep: δ must lie in (0, 1), got {d}")
        return self


# the arms the packages declare (their ``params`` modules' ARMS, dprelease.pipeline.plugins), in package order
ARMS = plugins.arm_names()  # names only: the schema (a stage's scope holds no other package's params module)
AUDIT_ARMS = plugins.arm_names(audited=True)
ArmName = Literal[tuple(ARMS)]
AuditArmName = Literal[tuple(AUDIT_ARMS)]


class CompareParams(_Strict):
    arms: list[ArmName] = ARMS
    nonprivate_epochs: int = Field(30, ge=1, description="non-private baseline epochs (docs/algorithms.md, D.5)")

    @model_validator(mode="after")
    def _arms(self) -> "CompareParams":
        if not self.arms:
            raise ValueError("compare.arms: give at least one arm")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("compare.arms: an arm is listed twice")
        return self


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


class PrivacyAuditParams(_Strict):
    """Membership-inference and one-run canary audit of every arm (docs/guarantees.md, L)."""
    arms: list[AuditArmName] = AUDIT_ARMS
    pool_size: int = Field(6000, ge=200, description="unused rows (population pool) embedded for the audit")
    references: int = Field(16, ge=2, description="LiRA reference models, offline and online each")
    canaries: int = Field(500, ge=20, description="mislabelled-narrative canaries (re-drawn labels), in w.p. 1/2")
    input_canaries: int = Field(4000, ge=0, description="head backend: random unit embeddings, random labels, in w.p. 1/2")
    guess_grid: list[int] = Field([100, 300, 1000, 3000], min_length=1, description="guesses r (r/2 in, r/2 out)")
    planted_bugs: bool = Field(True, description="audit the planted bugs too (non-private 'ε = 1'; DP-SGD with σ/4)")
    alpha: float = Field(0.05, gt=0.0, lt=0.5, description="1 - confidence of every bound")
    replay_targets: int = Field(10, ge=1, description="replay audit: training records (public seed) the adversary "
                                                      "re-fits the released mechanism without")

    @model_validator(mode="after")
    def _sizes(self) -> "PrivacyAuditParams":
        if any(r < 2 for r in self.guess_grid):
            raise ValueError(f"privacy_audit.guess_grid: every guess count must be ≥ 2, got {self.guess_grid}")
        if self.canaries >= self.pool_size:
            raise ValueError("privacy_audit.canaries must be smaller than privacy_audit.pool_size")
        return self


class TrackingParams(_Strict):
    mlflow_uri: str = "sqlite:///mlflow.db"
    experiment: str = "dprelease"


class GateParams(_Strict):
    """When the registry's ``production`` alias may move to a new version (every gate must pass)."""

    epsilon_budget: float = Field(10.0, gt=0.0, description="the version's claimed ε must not exceed it")
    cumulative_budget: float | None = Field(None, gt=0.0, description="cap on the ledger's cumulative ε (None: no cap)")
    utility_metric: Literal["weighted_f1", "macro_f1"] = "weighted_f1"
    utility_tolerance: float = Field(0.01, ge=0.0, le=1.0,
                                     description="largest allowed drop below the production version's utility")
    audit: bool = Field(True, description="refuse when the audit's ε lower bound exceeds the claimed ε")


class ServiceParams(_Strict):
    """Scheduled retrains (``make serve``), the model registry and the privacy ledger."""

    registered_model: str = Field("oiics-autocoder", min_length=1)
    cron: str = Field("0 3 * * 1", min_length=9, description="retrain schedule (cron, in the timezone below)")
    timezone: str = "UTC"
    work_pool: str = Field("cpu", min_length=1, description="process work pool of the head backend")
    gpu_pool: str = Field("gpu", min_length=1, description="work pool that receives model.backend: full")
    port: int = Field(4200, ge=1024, le=65535, description="local Prefect server port (bound to 127.0.0.1)")
    snapshot: str | None = Field(None, description="the file a scheduled retrain reads (None: data.path)")
    windows: list[str] = Field(["2015-12-31", "2016-06-30", "2016-12-31"],
                               description="EventDate ends of the simulated growing windows")
    audit: bool = Field(True, description="run the privacy audit of the released arm before registering")
    gates: GateParams = GateParams()


class DaskParams(_Strict):
    """Posterior passes in seeded chunks and independent arms / tuning cells on a Dask cluster."""

    enabled: bool = Field(False, description="use Prefect's Dask task runner (prefect-dask)")
    address: str | None = Field(None, description="scheduler of a running cluster (None: a local cluster)")
    workers: int = Field(2, ge=1, description="local cluster: worker processes (one thread each)")


class CoreParams(_Strict):
    """The shared sections; each package's own section is added from its ``params`` module (:data:`Params`)."""

    seed: int = Field(2025, ge=0)
    artifacts: str = "artifacts"
    release: str = "release"
    force_release_path: bool = Field(False, description="allow replacing an existing folder that is not a release")
    signing_key: str | None = Field(None, description="the agency signing key folder (default <artifacts>/keys)")
    data: DataParams = DataParams()
    features: FeatureParams = FeatureParams()
    model: ModelParams = ModelParams()
    ppm: PPMParams = PPMParams()
    evaluation: EvaluationParams = Field(EvaluationParams(), description="the release's utility evaluation; the "
                                         "privacy audit is 'privacy_audit'")
    dpsgd: DPSGDParams = DPSGDParams()
    compare: CompareParams = CompareParams()
    tune: TuneParams = TuneParams()
    selection: SelectionParams = SelectionParams()
    privacy_audit: PrivacyAuditParams = PrivacyAuditParams()
    tracking: TrackingParams = TrackingParams()
    service: ServiceParams = ServiceParams()
    dask: DaskParams = DaskParams()

    @model_validator(mode="after")
    def _swag_rank(self) -> "CoreParams":
        for name in ("head", "full"):
            swag = getattr(self.model, name).swag
            if swag.rank > swag.epochs:
                raise ValueError(f"model.{name}.swag.rank ({swag.rank}) exceeds swag.epochs ({swag.epochs})")
        return self

    @model_validator(mode="after")
    def _declared_levels(self) -> "CoreParams":
        # worst-case claims need levels fixed before the data are seen (privacy/target.py): no fallback to ε(D)
        if self.dpsgd.target_epsilon is None and "dpsgd" in {*self.compare.arms, *self.privacy_audit.arms}:
            raise ValueError("dpsgd.target_epsilon: DP-SGD needs a declared target ε (e.g. 8.0), fixed before any "
                             "run; it is never the release's measured ε")
        if self.ppm.censor_epsilon is None and "swag_ppm_censored" in self.compare.arms:
            raise ValueError("ppm.censor_epsilon: the censored arm needs a declared ε (e.g. 8.0), fixed before any "
                             "run; it is never the release's measured ε")
        return self

    # convenience views -------------------------------------------------------------------
    @property
    def backend(self) -> HeadParams | FullParams:
        return getattr(self.model, self.model.backend)

    @property
    def dpsgd_run(self) -> DPSGDRun:
        return getattr(self.dpsgd, self.model.backend)

    @property
    def ppm_finetune(self) -> OptimParams:  # SWAG-PPM's: no decoupled decay, the objective has λ (training.py)
        return self.backend.finetune.model_copy(update={"weight_decay": 0.0})

    @property
    def reweighting(self) -> bool:
        """Round 3 runs: re-weighting on, asymptotic mechanism (the censored one bounds Δ by construction)."""
        return self.ppm.reweight and self.ppm.mechanism == "asymptotic"

    @property
    def rounds(self) -> list[int]:
        """Rounds that are fitted (the released one is ``reweighting.released_round``)."""
        return [1, 2, 3] if self.reweighting else [1, 2]


# Params = the shared sections + one section per package that has a ``params`` module (dprelease.pipeline.plugins)
Params = create_model("Params", __base__=CoreParams, __module__=__name__,
                      **{key: (model, model()) for key, model in plugins.sections().items()})


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "params"
    msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    extra = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"params.yaml: {loc}: {msg}{extra}"


RENAMED = {"audit": "evaluation"}  # sections renamed: an old params.yaml gets the new name, not "extra field"


def parse_params(raw: dict | None, overrides: dict | None = None) -> Params:
    """Validate a parsed params mapping (``overrides`` are dotted keys, e.g. ``{"ppm.c": 0.8}``)."""
    raw = copy.deepcopy(raw or {})
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"params.yaml: {dotted}: parent is not a section")
        node[leaf] = value
    for old, new in RENAMED.items():
        if isinstance(raw, dict) and old in raw:
            raise ConfigError(f"params.yaml: section {old!r} is now {new!r} ({Params.model_fields[new].description})")
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_one_line(err)) from None


def params_file() -> str:
    """The params file commands read by default: ``$DPRELEASE_PARAMS`` (e.g. a tiny slice), else ``params.yaml``."""
    return os.environ.get("DPRELEASE_PARAMS") or "params.yaml"


def load_params(path: str | Path | None = None, overrides: dict | None = None) -> Params:
    path = Path(path if path is not None else params_file())
    if not path.is_file():
        raise ConfigError(f"params file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return parse_params(raw, overrides)
