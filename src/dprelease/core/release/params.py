"""The ``released:`` section of ``params.yaml``: which mechanism the agency releases, at which level, declared
before the data are seen (``Params.released``, through :data:`SECTION`: :mod:`dprelease.pipeline.plugins`). Pydantic only.

``mechanism`` names a plug-in that declares a release (:class:`dprelease.pipeline.mechanism.ReleaseSpec`); the shared
``publish`` stage signs what that plug-in stages into ``params.release``. ``epsilon`` and ``delta`` are the level a
mechanism that targets an ε is run at (DP-SGD): numbers fixed here, never the measured ε of another mechanism. A
mechanism whose ε is measured (the pseudo posterior mechanisms) or declared in its own section (the censored
variants) ignores them; its release record says which level holds.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReleasedParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    mechanism: str = Field("dpsgd", min_length=1)  # a plug-in with a release: dpsgd | swag_ppm | linear_ppm | ncm
    epsilon: float = Field(8.0, gt=0.0)  # declared target ε of a mechanism that targets one (DP-SGD)
    delta: float | None = Field(None, gt=0.0, lt=1.0)  # None: min(n^-1.1, 1/(2n)) (docs/algorithms.md, E.1)


SECTION = ("released", ReleasedParams)  # Params.released (dprelease.pipeline.plugins)
