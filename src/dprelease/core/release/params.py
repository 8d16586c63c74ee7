"""The ``released:`` section of ``params.yaml``: which mechanism the agency releases, at which level, declared
before the data are seen (``Params.released``, through :data:`SECTION`: :mod:`dprelease.contracts.plugins`). Pydantic only.

``mechanism`` names a plug-in that declares a release (:class:`dprelease.contracts.mechanism.ReleaseSpec`); the shared
``publish`` stage signs what that plug-in stages into ``params.release``. ``epsilon`` and ``delta`` are the level a
mechanism that targets an ε is released at: numbers fixed here, never the measured ε of another mechanism. ``delta``
is the one declared δ: the comparison's and the frontier's points that target an (ε, δ) use it too. A mechanism
whose ε is measured or declared in its own section ignores them; its release record says which level holds.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReleasedParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    # the ReleaseSpec.mechanism of a plug-in with a release (registry.releasing lists them); the default is `make run`'s
    mechanism: str = Field("dpsgd", min_length=1)
    epsilon: float = Field(8.0, gt=0.0, allow_inf_nan=False)  # declared target ε: training + evaluation
    # the one declared δ (the release, the comparison, the frontier); None: min(n̂^-1.1, 1/(2n̂)) with n̂ the PUBLIC
    # expected training size (docs/guarantees.md, "The boundary")
    delta: float | None = Field(None, gt=0.0, lt=1.0, allow_inf_nan=False)
    release_id: str = Field("1", min_length=1)  # the per-release value every noise stream is keyed with
    # noise multiplier of the DP test evaluation (per-class TP/FP/FN counts, L2 sensitivity √2), composed into ε
    evaluation_noise: float = Field(2.0, gt=0.0, allow_inf_nan=False)


SECTION = ("released", ReleasedParams)  # Params.released (dprelease.contracts.plugins)
