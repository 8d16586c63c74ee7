"""The arms the comparison and the audit are asked for, against these params: a one-line refusal for an arm
that cannot run with them (its declared ``Arm.refusal``, e.g. a setting it needs)."""

from __future__ import annotations

from dprelease.contracts import plugins
from dprelease.core.errors import ConfigError


def check_arms(params, sections: tuple[str, ...]) -> None:
    """A one-line error when an arm named in ``sections``' arm lists cannot run with these params."""
    known = plugins.arms()
    for section in sections:
        for name in getattr(params, section).arms:
            if (why := known[name].refusal(params, f"{section}.arms")) is not None:
                raise ConfigError(why)
