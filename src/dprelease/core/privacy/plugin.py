"""The privacy package's plug-in: the ``secret`` stage (the randomness key every guarantee's noise comes from)."""

from dprelease.contracts.mechanism import Mechanism
from dprelease.core.privacy import stages

PLUGIN = Mechanism(name="privacy", declare=stages.declare)
