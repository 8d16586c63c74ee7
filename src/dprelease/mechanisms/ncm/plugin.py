"""DP nearest class mean's plug-in: its frontier stage (the no-tuning floor of the frontier)."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism
from dprelease.mechanisms.ncm import stages

STAGE = FlowSpec(
    name="ncm",
    title="ncm-release",
    groups=("ncm",),
    doc="DP nearest class mean staged as a release (private, unsigned) at released.epsilon; `make run` "
    "publishes it when released.mechanism is ncm.",
)

PLUGIN = Mechanism(name="ncm", declare=stages.declare, flows=(STAGE,), release=stages.SPEC)
