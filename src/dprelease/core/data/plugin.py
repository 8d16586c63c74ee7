"""The data package's plug-in: ``stratify`` (the split) and ``featurize`` (the cached encoder features)."""

from dprelease.contracts.mechanism import Mechanism
from dprelease.core.data import stages

PLUGIN = Mechanism(name="data", declare=stages.declare)
