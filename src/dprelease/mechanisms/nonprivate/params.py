"""What the non-private baseline contributes to ``Params`` (:mod:`dprelease.pipeline.plugins`): its arm."""

from __future__ import annotations

from dprelease.pipeline.mechanism import Arm

ARMS = (Arm(name="nonprivate", stage="nonprivate", label="Non-private"),)

FRONTIER = "frontier_nonprivate"  # the frontier's ceiling (dprelease.compare.frontier.points)
