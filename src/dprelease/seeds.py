"""Per-stage seeds derived from the one configured seed (explicit generators everywhere)."""

from __future__ import annotations

import zlib

import numpy as np


def stage_seed(seed: int, stage: str, round_: int = 0) -> int:
    """A stable 63-bit seed for (seed, stage, round); independent streams for different stages."""
    state = np.random.SeedSequence([seed, zlib.crc32(stage.encode()), round_]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))
