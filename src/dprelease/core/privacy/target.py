"""The declared levels that mechanisms with a worst-case claim are run at (a mechanism's target ε, a censoring
level), read through :func:`declared` by the mechanism that needs one, and the default δ.

Each is a number in params.yaml, fixed before any run (docs/comparison.md). None ever falls back to the
release's measured ε: that ε is a function of the data (ε(D)), and a worst-case (ε, δ) or a censoring bound set
from it would be a level chosen after seeing D, which the claims "every database" assume it is not. Nothing
here reads ``metrics/swag_ppm_draw.json``.
"""

from __future__ import annotations

from dprelease.core.errors import ConfigError
from dprelease.core.params_path import params_file


def declared(value: float | None, *, key: str, who: str) -> float:
    """A declared level; a one-line :class:`ConfigError` when it is null (never the release's measured ε).

    Args:
        value: the level as params.yaml holds it.
        key: its key in params.yaml.
        who: what reads it (for the message).

    Returns:
        The level."""
    if value is None:
        raise ConfigError(
            f"{params_file()}: {key}: {who} needs a declared ε (e.g. 8.0), fixed before any run; it is "
            "never the release's measured ε"
        )
    return float(value)


DELTA_EXPONENT = 1.1  # the default δ ≤ n^-1.1: below 1/n by the factor n^0.1 (docs/algorithms.md, E.1)


def default_delta(n: int) -> float:
    """δ = min(n^-1.1, 1/(2n)) ≤ 1/n^1.1, the project's default (E.1): δ ≪ 1/n, declared, not tuned.

    Args:
        n: the (public expected) number of training records.

    Returns:
        δ.

    See docs/algorithms.md, I.9."""
    if n < 2:
        raise ValueError(f"default δ needs at least 2 training records (got {n})")
    return min(float(n) ** -DELTA_EXPONENT, 1.0 / (2 * n))
