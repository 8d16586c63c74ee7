"""Seeds. The public ``seed`` drives only public choices (the stratified split, the audit's choice of
target records and its reference models); a mechanism's own randomness comes from the secret key
(privacy/secret.py, :func:`~dprelease.core.privacy.secret.training_seeds`) through a :data:`SeedFn`."""

from __future__ import annotations

import zlib
from typing import Callable

import numpy as np

SeedFn = Callable[[str, int], int]
"""(what, round) → a 63-bit seed: ``"init"`` (the model's initialisation), ``"finetune"``, ``"swag"`` (batch
order and dropout), …; a fit takes one of these so that the operator's fit (secret key) and the replay
audit's adversary (public seed) run the same code with different randomness."""


def stage_seed(seed: int, stage: str, round_: int = 0) -> int:
    """A stable 63-bit seed for (seed, stage, round); independent streams for different stages."""
    state = np.random.SeedSequence([seed, zlib.crc32(stage.encode()), round_]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def public_seeds(seed: int) -> SeedFn:
    """The randomness anyone can rebuild from the public seed — what training used before it moved to the
    secret key (initialisation from the seed itself, every other stream from :func:`stage_seed`). The
    replay audit's adversary uses it; no mechanism does."""
    return lambda what, round_: seed if what.startswith("init") else stage_seed(seed, what, round_)
