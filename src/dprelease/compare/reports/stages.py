"""Report stages: ``compare_report`` (the comparison of every arm of ``compare.arms``, from their guarantee
records). Its deps are the arms' files, so the compare flow's plan holds exactly the arms asked for."""

from __future__ import annotations

from dprelease.compare.arms import check_arms
from dprelease.compare.reports.compare import compare_report
from dprelease.contracts import plugins
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params

REPORT_FILES = ["metrics/data.json"]  # what the report reads whatever the arms


def arm_files(name: str) -> list[str]:
    """What the report reads of one arm: the files it declares (:meth:`dprelease.contracts.mechanism.Arm.sources`)
    and its further ``files``."""
    arm = plugins.arms()[name]
    record, (scores, _, _), per_class = arm.sources()
    return list(dict.fromkeys([per_class, record, scores, *arm.files]))


def check(params: Params) -> None:
    check_arms(params, ("compare",))


def declare(params: Params) -> list[Stage]:
    deps = sorted({f for arm in params.compare.arms for f in arm_files(arm)} | set(REPORT_FILES))
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
