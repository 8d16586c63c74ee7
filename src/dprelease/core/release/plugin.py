"""The release package's plug-in: the one shared ``publish`` stage (:mod:`.stages`) that signs the declared
mechanism's staged release (``released.mechanism``), and its preflight."""

from dprelease.pipeline.mechanism import Mechanism
from . import stages

PLUGIN = Mechanism(name="release", declare=stages.declare, check=stages.check)
