"""DP nearest class mean's plug-in: its frontier stage (the no-tuning floor of the frontier)."""

from ..mechanism import Mechanism
from . import stages

PLUGIN = Mechanism(name="ncm", declare=stages.declare)
