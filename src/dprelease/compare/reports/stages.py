"""Report stages: ``compare_report`` (the comparison of every arm of ``compare.arms``, from their guarantee
records). Its deps are the arms' files, so the compare flow's plan holds exactly the arms asked for."""

from __future__ import annotations

from dprelease.compare.arms import check_arms
from dprelease.compare.reports.compare import compare_report
from dprelease.contracts import plugins
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params

RELEASE_FILES = ["reports/release", "metrics/evaluation.json", "metrics/swag_ppm_draw.json", "metrics/data.json"]


def arm_files(name: str) -> list[str]:
    """What the report reads of one arm (an arm that is the release itself: the release's files)."""
    arm = plugins.arms()[name]
    return [] if arm.release else [f"reports/arms/{name}", f"metrics/{name}.json", *arm.files]


def check(params: Params) -> None:
    check_arms(params, ("compare",))


def declare(params: Params) -> list[Stage]:
    deps = sorted({f for arm in params.compare.arms for f in arm_files(arm)} | set(RELEASE_FILES))
    return [
        Stage(
            name="compare_report",
            run=compare_report,
            params=["seed", "model.backend", "compare"],
            deps=deps,
            outs=["reports/compare"],
            group="compare",
        )
    ]
