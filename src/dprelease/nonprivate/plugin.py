"""The non-private baseline's plug-in: one arm, trained like the released model without any privacy."""

from ..mechanism import Arm, Mechanism
from . import stages

PLUGIN = Mechanism(name="nonprivate", declare=stages.declare, arms=(Arm(name="nonprivate", stage="nonprivate"),))
