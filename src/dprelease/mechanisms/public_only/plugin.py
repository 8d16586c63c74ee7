"""The public model's plug-in: its frontier stage (the floor) and its release (``released.mechanism: public_only``)."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism
from dprelease.mechanisms.public_only import stages

STAGE = FlowSpec(
    name="public_only",
    title="public-only-release",
    groups=("public_only",),
    doc="The public model (reads no private report) staged as a release (private, unsigned); `make run` "
    "publishes it when released.mechanism is public_only.",
)

PLUGIN = Mechanism(name="public_only", declare=stages.declare, flows=(STAGE,), release=stages.SPEC)
