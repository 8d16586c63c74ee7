"""Torch's intra-op thread count, set for a block and restored after it (torch's setting is process-wide)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def torch_threads(n: int):
    """``n`` torch threads inside the block (0: leave the setting alone), the previous setting after it."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
