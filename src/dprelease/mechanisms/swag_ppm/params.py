"""What SWAG-PPM contributes to ``Params`` (:mod:`dprelease.pipeline.plugins`): its comparison and audit arms. Its params
sections (``model``, ``ppm``, ``audit``, ``selection``) are the release's own and stay in :mod:`dprelease.core.config`."""

from __future__ import annotations

from dprelease.pipeline.mechanism import Arm


def _calibrated(q: dict) -> str:
    return f", calibrated ({q['calibration']})" if q.get("calibration", "none") != "none" else ""


# the stage that writes SWAG-PPM's points on the privacy/utility frontier (metrics/frontier/swag_ppm.json); the
# frontier package finds every contributing source by this attribute (dprelease.compare.frontier.points)
FRONTIER = "frontier_swag_ppm"

ARMS = (
    Arm(name="swag_ppm", stage="swag_ppm", label="SWAG-PPM round 2", suffix=_calibrated),
    Arm(name="swag_ppm_reweighted", stage="draw", label="SWAG-PPM release", release=True, model="draw/release",
        suffix=lambda q: f" (round {q['round']})", requires=("ppm.reweight: true", lambda p: p.ppm.reweight)),
    Arm(name="swag_ppm_uncalibrated", stage="swag_ppm_uncalibrated", label="SWAG-PPM round 2, spec scale 1/2",
        audited=False),
    Arm(name="swag_ppm_censored", stage="swag_ppm_censored", label="SWAG-PPM censored (strict)", audited=False),
)

RELEASES = True  # its plug-in releases through the shared publish step (released.mechanism may name it)
