"""The distributed GPP (docs/algorithms.md, G.4, Algorithm 2) as a Flower ServerApp/ClientApp pair on Flower's
simulation engine. The only place in the package allowed to import ``flwr``; it is imported lazily by
``run_distributed``, so importing this package does not load Flower or Ray — but it does set Flower's
offline switches first (``offline``)."""

from dprelease.mechanisms.gpp.federated import offline

offline.apply()

from dprelease.mechanisms.gpp.federated.engine import run_distributed  # noqa: E402
from dprelease.mechanisms.gpp.federated.result import DistributedResult  # noqa: E402

__all__ = ["DistributedResult", "run_distributed"]
