"""Stage ``secret``: the project's randomness key exists and ``key_id.json`` names it (privacy/secret.py).

Every stage whose output rests on secret noise (the released draws, DP-SGD, private selection, the
canary audit's coins) lists ``key_id.json`` among its inputs, so a rotated key re-runs exactly those
stages. The stage is never shared between project roots (each root has its own key) and DVC never caches
its output.
"""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage
from dprelease.core.config import Params
from dprelease.core.privacy import secret


def key_id_file(params: Params) -> str:
    """The input a stage using the secret declares (project-relative).

    Args:
        params: the parsed params.

    Returns:
        ``<artifacts>/secret/key_id.json``."""
    return f"{params.artifacts}/secret/{secret.KEY_ID}"


def ensure(params: Params, root: str | Path = ".") -> dict:
    """Stage ``secret``: check the keys against ``dvc.lock`` (key guard), then make sure the randomness key exists.

    Args:
        params: the parsed params.
        root: the project root.

    Returns:
        The stage's public summary (the key id, though public, is left out)."""
    from dprelease.core.privacy import key_guard

    # in a DVC project (`dvc repro`): refuse keys other than those dvc.lock records (DPRELEASE_NEW_KEY=1 accepts)
    for line in key_guard.check(params, root, new_key=key_guard.new_key_from_env(), use_release=False):
        print(line)
    secret.init(Layout.from_params(params, root).artifacts)
    return {"key": "ready"}  # the id is public but a summary has no use for it


def declare(params: Params) -> list[Stage]:
    """The core's privacy stages.

    Args:
        params: the parsed params.

    Returns:
        Stage ``secret``, never shared between roots nor cached by DVC (its output stands for the private key)."""
    return [Stage(name="secret", run=ensure, params=[], deps=[], outs=[key_id_file(params)], shared=False)]
