"""Model backends: `head` (frozen public encoder + trained head, the CPU default) and `full`
(every transformer parameter, for GPU workers). One mechanism code path serves both."""

from __future__ import annotations

from ..config import Params
from .base import Backend, pick_device


def make_backend(params: Params, n_classes: int) -> Backend:
    device = pick_device(params.model.device)
    kw = dict(n_classes=n_classes, device=device, seed=params.seed, max_length=params.features.max_length,
              batch_size=params.features.batch_size)
    if params.model.backend == "head":
        from .head import HeadBackend

        return HeadBackend(params=params.model.head, **kw)
    from .full import FullBackend

    return FullBackend(params=params.model.full, **kw)
