"""Tiny models run fastest on one thread; restore the session's settings afterwards."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread():
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
