"""Torch's intra-op thread count, set for a block and restored after it.

Torch keeps the count per thread once a thread has used it, and a thread starts with the count last set
anywhere in the process: ``torch.set_num_threads`` in one thread writes that process-wide default too. So
blocks that overlap in several threads (a flow's thread-pool task runner running two tasks that each ask
for one thread) must not restore what they read on entry: a thread that first used torch while another
thread's block was open read that block's count, and restoring it would leave the process (every thread
started later: the task runner's next threads) at that count for good — one thread instead of the
machine's, and with it other numbers (torch's CPU reductions split their work by thread). Here a block
restores its thread's own count only when it is nested in a block of the same thread or no other block
is open; otherwise it restores the count the process had when no block was open.
"""

from __future__ import annotations

import contextlib
import threading

import torch

_LOCK = threading.Lock()
_LOCAL = threading.local()  # .depth: this thread's open blocks
_open = 0  # open blocks, all threads
_base = 0  # torch's count when the first of the open blocks began (no block open then)


@contextlib.contextmanager
def torch_threads(n: int):
    """``n`` torch threads inside the block (0: leave the setting alone), the previous setting after it
    (see the module docstring for blocks that overlap in several threads)."""
    global _open, _base
    if not n:
        yield
        return
    with _LOCK:
        depth = getattr(_LOCAL, "depth", 0)
        own = torch.get_num_threads()
        if _open == 0:
            _base = own
        before = own if depth or _open == 0 else _base  # another thread's block may have set ``own``
        torch.set_num_threads(n)
        _open += 1
        _LOCAL.depth = depth + 1
    try:
        yield
    finally:
        with _LOCK:
            torch.set_num_threads(before)
            _open -= 1
            _LOCAL.depth = depth
