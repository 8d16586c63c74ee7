"""The privacy-audit stages (docs/guarantees.md, L): the population pool and canaries, LiRA reference models,
membership inference on every arm, the one-run canary audit, and the report."""

from __future__ import annotations

from dprelease.compare.arms import check_arms
from dprelease.compare.mia.attack import arm_folder, privacy_audit
from dprelease.compare.mia.canary import canary_runs, timed
from dprelease.compare.mia.nvdp_arm import audit_nvdp
from dprelease.compare.mia.population import audit_pool
from dprelease.compare.mia.references import audit_references, epochs_key
from dprelease.compare.mia.report import privacy_report
from dprelease.contracts import plugins
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.privacy.stages import key_id_file


def check(params: Params) -> None:
    check_arms(params, ("privacy_audit", "compare"))


def arm_params() -> list[str]:
    """The params keys the audited arms' training stages read (``Arm.params``), in declaration order: what the
    canary audit, which re-runs them, hashes."""
    return list(dict.fromkeys(key for arm in plugins.arms().values() if arm.audited for key in arm.params))


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    split = [f"{a}/data", f"{a}/features"]
    arms = {arm: arm_folder(params, arm) for arm in params.privacy_audit.arms}
    model = ["seed", "model"]
    return [
        Stage(
            name="audit_pool",
            run=audit_pool,
            params=[
                "seed",
                "data",
                "model.backend",
                "model.device",
                "model.full.tiny",
                "features",
                "privacy_audit.pool_size",
                "privacy_audit.canaries",
                "privacy_audit.input_canaries",
            ],
            deps=[key_id_file(params), params.data.path, f"{a}/data"],
            outs=[f"{a}/audit/pool"],
            metrics=["metrics/audit_pool.json"],
            group="audit",
        ),
        Stage(
            name="audit_references",
            run=audit_references,
            params=model + ["privacy_audit.references", epochs_key()],
            deps=[*split, f"{a}/audit/pool"],
            outs=[f"{a}/audit/references"],
            metrics=["metrics/audit_references.json"],
            group="audit",
        ),
        Stage(
            name="privacy_audit",
            run=privacy_audit,
            params=model + ["privacy_audit"],
            deps=[*split, f"{a}/audit/references", *arms.values()],
            outs=[],
            metrics=["metrics/privacy_audit.json"],
            group="audit",
        ),
        Stage(
            name="canary_runs",
            run=canary_runs,
            params=model + ["compare", "privacy_audit", *arm_params()],
            deps=[key_id_file(params), *split, f"{a}/audit/pool", "metrics/data.json"],
            outs=[f"{a}/audit/canary_run"],
            metrics=["metrics/audit_canary.json"],
            group="audit",
            timed=timed(params),  # untimed: it re-weights
            extra_code=["."],
            runs_stages=True,
        ),  # re-runs whole pipelines through the registry: the whole package
        Stage(
            name="privacy_report",
            run=privacy_report,
            params=["data.cap", "privacy_audit"],
            deps=["metrics/privacy_audit.json", "metrics/audit_canary.json", "metrics/audit_pool.json"],
            evidence=["metrics/audit_replay.json"],  # the replay audit's rows (a release stage), when present
            outs=["reports/privacy"],
            group="audit",
        ),
    ]


def declare_nvdp_arm(params: Params) -> list[Stage]:
    """``audit_nvdp``: the NVDP classifier as an audit arm. Declared after the NVDP stages (it reads their
    membership scores as files) and run by the NVDP flow (group ``nvdp``)."""
    return [
        Stage(
            name="audit_nvdp",
            run=audit_nvdp,
            params=["seed", "privacy_audit.alpha"],
            deps=[f"{params.artifacts}/nvdp/membership"],
            outs=["reports/privacy_nvdp"],
            metrics=["metrics/audit_nvdp.json"],
            group="nvdp",
        )
    ]
