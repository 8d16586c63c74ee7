"""The declared levels that mechanisms with a worst-case claim are run at: ``dpsgd.target_epsilon`` (DP-SGD's
target ε) and ``ppm.censor_epsilon`` (the censored SWAG-PPM's ε, censoring at κ = ε/2).

Both are numbers in params.yaml, fixed before any run (docs/comparison.md). Neither ever falls back to the
release's measured ε: that ε is a function of the data (ε(D)), and a worst-case (ε, δ) or a censoring bound set
from it would be a level chosen after seeing D, which the claims "every database" assume it is not. Nothing
here reads ``metrics/release.json``.
"""

from __future__ import annotations

from ..config import Params
from ..errors import ConfigError


def _declared(value: float | None, key: str, who: str) -> float:
    if value is None:
        raise ConfigError(f"params.yaml: {key}: {who} needs a declared ε (e.g. 8.0), fixed before any run; it is "
                          "never the release's measured ε")
    return float(value)


def dpsgd_target(params: Params) -> float:
    """DP-SGD's declared target ε (``dpsgd.target_epsilon``); a one-line :class:`ConfigError` when it is null."""
    return _declared(params.dpsgd.target_epsilon, "dpsgd.target_epsilon", "DP-SGD")


def censor_epsilon(params: Params) -> float:
    """The censored SWAG-PPM's declared ε (``ppm.censor_epsilon``); a one-line :class:`ConfigError` when null."""
    return _declared(params.ppm.censor_epsilon, "ppm.censor_epsilon", "the censored mechanism")
