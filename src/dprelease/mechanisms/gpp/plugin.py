"""The Gaussian Privacy Protector's plug-in: its params section (``params.py``), stages, flow, MLflow record
(``tracking.py``: plain data) and sanitizer. Everything GPP adds to dprelease is in this folder."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism
from dprelease.mechanisms.gpp import stages, tracking

GPP = FlowSpec(
    name="gpp",
    title="gpp",
    groups=("gpp",),
    check=stages.check,
    track=tracking.tracked_run,
    report="gpp/report.md",
    children="dataset",
    doc="The Gaussian Privacy Protector on digits and on the OSHA narratives, centralized and on "
    "Flower, its probe audit, report and sanitizer release.",
)

PLUGIN = Mechanism(name="gpp", declare=stages.declare, flows=(GPP,), sanitize=stages.sanitize)
