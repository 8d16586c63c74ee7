"""The privacy-audit stages (docs/guarantees.md, L): the population pool and canaries, LiRA reference models,
membership inference on every arm, the one-run canary audit, and the report."""

from __future__ import annotations

from ..config import Params
from ..privacy.stages import key_id_file
from ..stage import Stage
from .attack import arm_folder, privacy_audit
from .canary import canary_runs
from .nvdp_arm import audit_nvdp
from .population import audit_pool
from .references import audit_references
from .report import privacy_report

LOAD_CODE = ["release.py", "release_check.py", "cache.py", "backends", "data/splits.py"]
CHAIN_CODE = ["."]  # the canary runs re-run whole pipelines through the registry: the whole package


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    split = [f"{a}/data", f"{a}/features"]
    arms = {arm: arm_folder(params, arm) for arm in params.privacy_audit.arms}
    model = ["seed", "model"]
    return [
        Stage("audit_pool", audit_pool, ["seed", "data", "model.backend", "model.device", "model.full.tiny",
                                         "features", "privacy_audit.pool_size", "privacy_audit.canaries",
                                         "privacy_audit.input_canaries"],
              [key_id_file(params), params.data.path, f"{a}/data"], [f"{a}/audit/pool"],
              ["mia/population.py", "privacy/secret.py", "data", "backends"],
              metrics=["metrics/audit_pool.json"], group="audit"),
        Stage("audit_references", audit_references, model + ["privacy_audit.references", "compare.nonprivate_epochs"],
              [*split, f"{a}/audit/pool"], [f"{a}/audit/references"],
              ["mia/references.py", "mia/scores.py", "mia/population.py", "training.py", "backends", "data/splits.py"],
              metrics=["metrics/audit_references.json"], group="audit"),
        Stage("privacy_audit", privacy_audit, model + ["privacy_audit"],
              [*split, f"{a}/audit/references", *arms.values()], [], ["mia", *LOAD_CODE],
              metrics=["metrics/privacy_audit.json"], group="audit"),
        Stage("canary_runs", canary_runs, model + ["ppm", "dpsgd", "compare", "privacy_audit", "audit"],
              [key_id_file(params), *split, f"{a}/audit/pool", "metrics/release.json", "metrics/data.json"],
              [f"{a}/audit/canary_run"],
              ["mia", *LOAD_CODE, *CHAIN_CODE], metrics=["metrics/audit_canary.json"], group="audit"),
        Stage("privacy_report", privacy_report, ["data.cap", "privacy_audit"],
              ["metrics/privacy_audit.json", "metrics/audit_canary.json", "metrics/audit_pool.json"],
              ["reports/privacy"], ["mia/report.py", "plots.py"], group="audit"),
    ]


def declare_nvdp_arm(params: Params) -> list[Stage]:
    """``audit_nvdp``: the NVDP classifier as an audit arm. Declared after the NVDP stages (it reads their
    membership scores as files) and run by the NVDP flow (group ``nvdp``)."""
    return [Stage("audit_nvdp", audit_nvdp, ["seed", "privacy_audit.alpha"],
                  [f"{params.artifacts}/nvdp/membership"], ["reports/privacy_nvdp"], ["mia", *LOAD_CODE],
                  metrics=["metrics/audit_nvdp.json"], group="nvdp")]
