"""SWAG-PPM's plug-in: its stages, the release flow, and the arms it adds to the comparison and the audit
(round 2; the released, re-weighted round; plain SWAG; the censored variant)."""

from ..mechanism import Arm, FlowSpec, Mechanism
from . import stages

RELEASE = FlowSpec(name="release", title="swag-ppm-release", groups=("release",), track="pipeline",
                   doc="The SWAG-PPM release: the registry's release stages as cached Prefect tasks, then one "
                       "MLflow run.")

PLUGIN = Mechanism(
    name="swag_ppm", declare=stages.declare, flows=(RELEASE,),
    arms=(Arm(name="swag_ppm", stage="swag_ppm"),
          Arm(name="swag_ppm_reweighted", stage="draw"),  # the released round: the release itself
          Arm(name="swag_ppm_uncalibrated", stage="swag_ppm_uncalibrated", audited=False),
          Arm(name="swag_ppm_censored", stage="swag_ppm_censored", audited=False)))
