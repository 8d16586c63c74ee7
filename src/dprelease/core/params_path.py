"""Which params file commands read by default, without the typed configuration (pydantic) that reads it: the
command line builds its options' defaults from this before it knows whether the command needs the params at all
(`dprelease predict`, `verify` and `sanitize` never do)."""

from __future__ import annotations

import os

ENV = "DPRELEASE_PARAMS"


def params_file() -> str:
    """The params file commands read by default: ``$DPRELEASE_PARAMS`` (e.g. a tiny slice), else ``params.yaml``."""
    return os.environ.get(ENV) or "params.yaml"
