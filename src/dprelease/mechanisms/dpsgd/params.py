"""What DP-SGD contributes to ``Params`` (:mod:`dprelease.pipeline.plugins`): its arm, with the δ sweep the comparison
report reads. Its ``dpsgd`` section stays in :mod:`dprelease.core.config` for now (shared by name)."""

from __future__ import annotations

from dprelease.pipeline.mechanism import Arm

# its row: DP-SGD at the declared target ε (dpsgd.target_epsilon), not "matched" to the release's measured ε
ARMS = (Arm(name="dpsgd", stage="dpsgd", label="DP-SGD (Opacus) at the declared target ε",
            files=("metrics/dpsgd_sweep.json",)),)

FRONTIER = "frontier_dpsgd"  # the stage that writes its frontier points (dprelease.compare.frontier.points)

RELEASES = True  # its plug-in releases through the shared publish step (released.mechanism may name it)
