"""The distributed GPP (spec G.4, Algorithm 2) as a Flower ServerApp/ClientApp pair on Flower's
simulation engine. The only place in the package allowed to import ``flwr``; it is imported lazily by
``run_distributed``, so importing this package does not load Flower or Ray."""

from .engine import run_distributed
from .result import DistributedResult

__all__ = ["DistributedResult", "run_distributed"]
