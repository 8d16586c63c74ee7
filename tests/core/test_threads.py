"""dprelease.core.threads: torch's thread count set for a block and restored after it, also on an error."""

from __future__ import annotations

import threading

import pytest
import torch

from dprelease.core.threads import torch_threads


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


def _in_new_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_blocks_overlapping_in_two_threads_leave_the_process_count_as_it_was():
    """Two task threads each asking for one thread (a flow's thread-pool runner): the second thread first
    uses torch while the first one's block is open, so it reads that block's count on entry; when it ends
    last it must not leave the process — every thread started later — at one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the process's count (the suite may run under OMP_NUM_THREADS=1)
    try:
        a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def a():
            with torch_threads(1):
                seen["a"] = torch.get_num_threads()
                a_in.set()
                b_in.wait(10)
            a_out.set()

        def b():
            a_in.wait(10)
            with torch_threads(1):  # this thread's first torch call: inside a's block
                seen["b"] = torch.get_num_threads()
                b_in.set()
                a_out.wait(10)  # a ends first, b last
            seen["b after"] = torch.get_num_threads()

        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert seen == {"a": 1, "b": 1, "b after": 2}
        assert _in_new_thread(torch.get_num_threads) == 2  # a thread started now: the process's count
        assert torch.get_num_threads() == 2  # this thread was never touched
    finally:
        torch.set_num_threads(before)


def test_nested_blocks_in_one_thread_restore_the_enclosing_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        with torch_threads(2):
            with torch_threads(1):
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 3 and _in_new_thread(torch.get_num_threads) == 3
    finally:
        torch.set_num_threads(before)
