"""SWAG-PPM's plug-in: its stages and the release flow (its arms are in :mod:`.params`)."""

from dprelease.contracts.mechanism import FlowSpec, Mechanism, Search
from dprelease.mechanisms.swag_ppm import stages, tune

RELEASE = FlowSpec(
    name="release",
    title="swag-ppm-release",
    groups=("release",),
    track="pipeline",
    doc="The SWAG-PPM release: the registry's release stages as cached Prefect tasks, then one MLflow run.",
)

REPLAY = FlowSpec(
    name="audit-replay",
    title="swag-ppm-audit-replay",
    targets=("audit_replay",),
    then=("publish",),
    doc="The replay audit: the standard adversary re-fits the released mechanism on D and D∖{x} "
    "(public seed) and scores the released draw; the operator's view beside it.",
)

TUNE = FlowSpec(
    name="tune",
    title="swag-ppm-tune",
    doc="The practical guide's tuning over (c, fine-tune epochs): `python -m flows.tune` (search or grid).",
    check=tune.check,
    search=Search(cell=tune.cell, run=tune.run, track=tune.tracked),
)

PLUGIN = Mechanism(name="swag_ppm", declare=stages.declare, flows=(RELEASE, REPLAY, TUNE), release=stages.SPEC)
