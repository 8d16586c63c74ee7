"""The comparison's plug-in: the ``compare_report`` stage and the compare flow (every arm of
``compare.arms`` on one split, then the model card again: it shows the non-private comparison)."""

from dprelease.compare.reports import stages
from dprelease.contracts.mechanism import FlowSpec, Mechanism

COMPARE = FlowSpec(
    name="compare",
    title="swag-ppm-compare",
    targets=("compare_report",),
    then=("publish",),
    workers=2,
    check=stages.check,
    track="compare",
    report="compare/report.md",
    children="arm",
    doc="SWAG-PPM vs non-private training vs DP-SGD on one split, then the report. The arms that "
    "do not depend on the SWAG-PPM chain run beside it on the task runner.",
)

PLUGIN = Mechanism(name="reports", declare=stages.declare, flows=(COMPARE,))
