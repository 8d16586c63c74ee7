"""What DP nearest class mean contributes to ``Params`` (:mod:`dprelease.contracts.plugins`): its frontier stage. It has no
section of its own: it reads ``frontier.epsilons``, ``frontier.seeds`` and the one declared δ (``released.delta``)."""

FRONTIER = "frontier_ncm"  # the stage that writes its frontier points (dprelease.core.utility.points)
