"""The non-private baseline's plug-in: its stage (its arm is in :mod:`.params`), trained like the released model without any privacy."""

from dprelease.contracts.mechanism import Mechanism
from dprelease.mechanisms.nonprivate import stages

PLUGIN = Mechanism(name="nonprivate", declare=stages.declare)
