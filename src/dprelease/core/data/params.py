"""The ``proxy:`` section of ``params.yaml`` (``Params.proxy``, through :data:`SECTION`: :mod:`dprelease.pipeline.plugins`):
the agency's representative PUBLIC proxy, an earlier published period (docs/frontier.md, "The public proxy").

Reports with ``EventDate`` up to ``until`` were published before the private period: they are the public proxy,
on which every mechanism's configuration is chosen at zero ε; the private sample is drawn only from later
reports. ``until: null`` is the earlier split (the private sample from every report, no proxy), kept selectable
for comparison. Pydantic only."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ProxyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    until: str | None = "2015-12-31"  # last EventDate of the public period (ISO date); null: no proxy
    date_column: str = "EventDate"
    validation_size: float = Field(0.5, gt=0.0, lt=1.0)  # the proxy sample's part kept to score configurations

    @field_validator("until")
    @classmethod
    def _iso(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                dt.date.fromisoformat(v)
            except ValueError:
                raise ValueError(f"proxy.until: an ISO date (YYYY-MM-DD) or null, got {v!r}") from None
        return v


SECTION = ("proxy", ProxyParams)  # Params.proxy (dprelease.pipeline.plugins)
