"""NVDP's plug-in: token-state cache, every task's (variant, λ) grid, the probe, the membership scores for the
audit's NVDP arm, the sanitizer release and the report; ``sanitize`` for ``dprelease sanitize``."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism
from dprelease.mechanisms.nvdp import stages, tracking

NVDP = FlowSpec(
    name="nvdp",
    title="nvdp",
    groups=("nvdp",),
    workers=2,
    track=tracking.tracked_run,
    report="nvdp/report.md",
    children="task × variant",
    doc="NVDP with parameter clipping: token states once per dataset, the task grids two at a time "
    "(one torch thread each), probe, membership audit, sanitizer release, report.",
)

PLUGIN = Mechanism(name="nvdp", declare=stages.declare, flows=(NVDP,), sanitize=stages.sanitize)
