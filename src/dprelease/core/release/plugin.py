"""The release package's plug-in: its params section (``released``); the one shared ``publish`` stage
(:mod:`.stages`), which signs the declared mechanism's staged release, is added by the registry."""

from dprelease.contracts.mechanism import Mechanism
from dprelease.core.release import stages

PLUGIN = Mechanism(name="release", declare=stages.declare)
