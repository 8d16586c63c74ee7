"""What DP-SGD contributes to ``Params`` (:mod:`dprelease.plugins`): its arm, with the δ sweep the comparison
report reads. Its ``dpsgd`` section stays in :mod:`dprelease.config` for now (shared by name)."""

from __future__ import annotations

from ..mechanism import Arm

ARMS = (Arm(name="dpsgd", stage="dpsgd", label="DP-SGD (Opacus)", files=("metrics/dpsgd_sweep.json",)),)
