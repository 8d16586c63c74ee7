"""The public model's plug-in: its frontier stage (the floor) and its release (``released.mechanism: public``)."""

from dprelease.pipeline.mechanism import FlowSpec, Mechanism
from . import stages

STAGE = FlowSpec(name="public", title="public-release", groups=("public",),
                 doc="The public model (reads no private report) staged as a release (private, unsigned); `make run` "
                     "publishes it when released.mechanism is public.")

PLUGIN = Mechanism(name="public", declare=stages.declare, flows=(STAGE,), release=stages.SPEC)
