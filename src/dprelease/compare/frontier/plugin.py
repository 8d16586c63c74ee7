"""The frontier's plug-in: the ``frontier_report`` stage and the ``frontier`` flow (every source's points, then the
report, the plot and the recommendation)."""

from dprelease.compare.frontier import stages, tracking
from dprelease.contracts.mechanism import FlowSpec, Mechanism

FRONTIER = FlowSpec(
    name="frontier",
    title="dprelease-frontier",
    targets=("frontier_report",),
    workers=1,
    check=stages.check,
    track=tracking.tracked_run,
    report="frontier/report.md",
    children="point",
    doc="Utility against ε for every mechanism: DP-SGD and DP nearest-class-mean at each declared ε "
    "(configurations chosen on validation, refit with secret seeds), SWAG-PPM's measured points, "
    "the non-private ceiling; the table, the plot and the recommendation at the agency's budget.",
)

PLUGIN = Mechanism(name="frontier", declare=stages.declare, flows=(FRONTIER,))
