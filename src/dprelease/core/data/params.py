"""The ``proxy:`` section of ``params.yaml`` (``Params.proxy``, through :data:`SECTION`: :mod:`dprelease.contracts.plugins`):
the agency's representative PUBLIC proxy, an earlier published period (docs/frontier.md, "The public proxy").

Reports with ``EventDate`` up to ``until`` were published before the private period: they are the public proxy,
on which every mechanism's configuration is chosen at zero ε, and from which the label space, the inclusion rates
and the expected sizes are computed; the private reports are only later ones (docs/guarantees.md, "The
boundary"). A date is required: without a public period nothing public could fix the label space. Pydantic only."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ProxyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    until: str = "2015-12-31"  # last EventDate of the public period (ISO date): the public/private boundary
    date_column: str = "EventDate"
    # the share of the public reports included at the private rates kept to score configurations (the training
    # share is the private one's: a pseudo-private set of the private training size; the rest trains the public model)
    validation_size: float = Field(0.25, gt=0.0, lt=1.0)
    # share of the other public reports kept as public_rest (by the public hash; small slices for tests)
    rest_rate: float = Field(1.0, gt=0.0, le=1.0)

    @field_validator("until")
    @classmethod
    def _iso(cls, v: str) -> str:
        try:
            dt.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"proxy.until: an ISO date (YYYY-MM-DD), got {v!r}") from None
        return v


SECTION = ("proxy", ProxyParams)  # Params.proxy (dprelease.contracts.plugins)
