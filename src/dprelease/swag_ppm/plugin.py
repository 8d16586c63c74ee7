"""SWAG-PPM's plug-in: its stages and the release flow (its arms are in :mod:`.params`)."""

from ..mechanism import FlowSpec, Mechanism
from . import stages

RELEASE = FlowSpec(name="release", title="swag-ppm-release", groups=("release",), track="pipeline",
                   doc="The SWAG-PPM release: the registry's release stages as cached Prefect tasks, then one "
                       "MLflow run.")

PLUGIN = Mechanism(name="swag_ppm", declare=stages.declare, flows=(RELEASE,))
