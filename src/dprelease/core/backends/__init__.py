"""Model backends: ``head`` (frozen public encoder + trained head, the CPU default) and ``full`` (every
transformer parameter, for GPU workers). One mechanism code path serves both; :data:`BACKENDS` is the
only place a backend name is looked up (stages and ``predict`` alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dprelease.core.backends.base import Backend, pick_device
from dprelease.core.backends.full import FullBackend
from dprelease.core.backends.head import HeadBackend
from dprelease.core.errors import ReleaseError

if TYPE_CHECKING:  # the typed config (pydantic) is not needed to load a release
    from dprelease.core.config import Params

BACKENDS: dict[str, type[Backend]] = {"head": HeadBackend, "full": FullBackend}


def backend_class(name: str) -> type[Backend]:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ReleaseError(f"unknown backend {name!r} (one of {', '.join(BACKENDS)})") from None


def make_backend(params: Params, n_classes: int) -> Backend:
    name = params.model.backend
    extra = {"encoder": params.features.encoder} if name == "head" else {}  # the full backend tunes the wheel's
    return backend_class(name)(
        n_classes=n_classes,
        device=pick_device(params.model.device),
        seed=params.seed,
        params=getattr(params.model, name),
        max_length=params.features.max_length,
        batch_size=params.features.batch_size,
        **extra,
    )
