"""The linear PPM's plug-in: its stages and its release flow (``make flow FLOW=linear-ppm``)."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism
from dprelease.mechanisms.linear_ppm import stages

RELEASE = FlowSpec(
    name="linear-ppm",
    title="linear-ppm-release",
    groups=("linear_ppm",),
    doc="The linear PPM release: a softmax head on the frozen encoder's features, one MCMC draw from "
    "its pseudo posterior (risk-weighted or censored), refused when the diagnostics fail, signed "
    "into linear_ppm.release with its card.",
)

PLUGIN = Mechanism(name="linear_ppm", declare=stages.declare, flows=(RELEASE,), release=stages.SPEC)
