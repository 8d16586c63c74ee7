"""What the non-private baseline contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its section and arm."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dprelease.contracts.mechanism import Arm, PlantedBug


class NonprivateParams(BaseModel):
    """The non-private baseline (docs/algorithms.md, D.5): the backend's fine-tune, for ``epochs``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    epochs: int = Field(30, ge=1, description="non-private baseline epochs")


SECTION = ("nonprivate", NonprivateParams)  # Params.nonprivate (dprelease.contracts.plugins)
MOVED = {"compare.nonprivate_epochs": ("nonprivate.epochs", "the non-private baseline's own section")}

PLANTED_EPSILON = 1.0  # the canary audit's planted bug: this arm's model labelled ε = 1 (δ = 0)

ARMS = (
    Arm(
        name="nonprivate",
        stage="nonprivate",
        label="Non-private",
        params=("nonprivate",),
        planted=(
            PlantedBug(
                key="nonprivate_labelled_eps1",
                guarantee=f"planted bug: non-private model labelled ε = {PLANTED_EPSILON:g}",
                claim=(PLANTED_EPSILON, 0.0),
            ),
        ),
        reference_epochs="nonprivate.epochs",  # the audit's reference models mimic the leakiest arm
    ),
)

FRONTIER = "frontier_nonprivate"  # the frontier's ceiling (dprelease.core.utility.points)
