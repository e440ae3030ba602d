"""Unit tests of the SnapKV-style eviction baseline."""

from __future__ import annotations

import pytest
import torch
from beacon_test_models import ids, tiny

from iclr25.methods.activation_beacon import SnapKV

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_budget_above_context_equals_full_attention(arch):
    lm = tiny(arch)
    x = ids(2, 40)
    with torch.no_grad():
        ref = lm(input_ids=x).logits
    ev = SnapKV(lm, budget=64, window=8)
    assert torch.allclose(ev(x), ref, atol=1e-5)
    assert ev.peak_entries == 32 + 8


def test_eviction_changes_only_the_window_and_keeps_the_budget():
    lm = tiny("llama", attn="sdpa")
    x = ids(2, 40)
    with torch.no_grad():
        ref = lm(input_ids=x).logits
    ev = SnapKV(lm, budget=6, window=8)
    out = ev(x)
    assert torch.allclose(out[:, :32], ref[:, :32], atol=1e-5)  # the prefill is full attention
    assert not torch.allclose(out[:, 32:], ref[:, 32:], atol=1e-3)
    assert ev.peak_entries == 14
    assert lm.config._attn_implementation == "sdpa"  # restored after the scoring pass


def test_bad_arguments():
    lm = tiny("llama")
    with pytest.raises(ValueError, match="budget"):
        SnapKV(lm, budget=1, window=4, sink=1)
    with pytest.raises(ValueError, match="pool"):
        SnapKV(lm, budget=4, window=4, pool=2)
    with pytest.raises(ValueError, match="sink"):
        SnapKV(lm, budget=4, window=4)(ids(1, 5))
