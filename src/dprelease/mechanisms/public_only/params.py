"""What the public model contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its frontier stage and its
release. No section of its own: its L2 grid is the core's ``public_model.l2`` (the same model DP-SGD refines)."""

FRONTIER = "frontier_public"  # the floor of the frontier (dprelease.core.utility.points)
