"""The privacy audit's plug-in: population pool and canaries, LiRA references, membership inference of every
audited arm, the one-run canary audit, the report (and the NVDP arm's audit, run by the NVDP flow)."""

from dprelease.compare.mia import stages, tracking
from dprelease.contracts.mechanism import FlowSpec, Mechanism

AUDIT = FlowSpec(
    name="audit",
    title="privacy-audit",
    targets=("audit_replay", "privacy_report"),
    then=("publish",),
    check=stages.check,
    track=tracking.tracked_run,
    report="privacy/report.md",
    children="arm",
    doc="Membership inference, the one-run canary audit of every audited arm and the replay audit "
    "of SWAG-PPM's released draw (its stage audit_replay); the model card then carries the audit.",
)

PLUGIN = Mechanism(
    name="mia", declare=lambda params: stages.declare(params) + stages.declare_nvdp_arm(params), flows=(AUDIT,)
)
