"""dprelease.threads: torch's thread count set for a block and restored after it, also on an error."""

from __future__ import annotations

import pytest
import torch

from dprelease.threads import torch_threads


def test_the_block_runs_with_n_threads_and_the_setting_comes_back():
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    with torch_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before


def test_zero_leaves_the_setting_alone_and_an_error_still_restores_it():
    before = torch.get_num_threads()
    with torch_threads(0):
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"):
        with torch_threads(1 if before != 1 else 2):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before
