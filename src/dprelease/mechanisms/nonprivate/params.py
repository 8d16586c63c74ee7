"""What the non-private baseline contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its section and arm."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dprelease.contracts.mechanism import Arm


class NonprivateParams(BaseModel):
    """The non-private baseline (docs/algorithms.md, D.5): the backend's fine-tune, for ``epochs``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    epochs: int = Field(30, ge=1, description="non-private baseline epochs")


SECTION = ("nonprivate", NonprivateParams)  # Params.nonprivate (dprelease.contracts.plugins)
MOVED = {"compare.nonprivate_epochs": ("nonprivate.epochs", "the non-private baseline's own section")}

ARMS = (Arm(name="nonprivate", stage="nonprivate", label="Non-private"),)

FRONTIER = "frontier_nonprivate"  # the frontier's ceiling (dprelease.core.utility.points)
