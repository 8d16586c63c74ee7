"""DP-SGD from the public model (docs/guarantees.md, "Public first"): the release starts from softmax regression
on the public period (:mod:`dprelease.core.public_fit`) and spends ε only on what the private reports add.

The declared grid is run in simulation from the public model fit on ``public_rest``, on ``proxy_train`` (a
pseudo-private set of the private training size), scored on ``proxy_validation``: the configuration is chosen as it
will be used. The release then refines the public model fit on every public report.
"""

from __future__ import annotations

import torch

from dprelease.contracts.layout import Layout
from dprelease.core import public_fit

WHO = "DP-SGD's warm start"


def available(lay: Layout) -> bool:
    return public_fit.available(lay)


def simulation_start(params, lay: Layout) -> public_fit.Simulation:
    """The simulation's start: the public model on ``public_rest`` (L2 of ``public_model.l2``)."""
    return public_fit.simulation(lay, grid=params.public_model.l2, who=WHO)


def release_start(lay: Layout, *, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The release's start (and the floor): the public model on every public report at ``l2``."""
    return public_fit.release(lay, l2=l2, who=WHO)
