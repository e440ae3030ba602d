"""Token builders, masks and KV-cached decoding of the GenSE language models."""

from __future__ import annotations

import pytest
import torch

from iclr25.methods.gense import (
    BOS,
    IGNORE,
    N2S,
    S2S,
    LMConfig,
    RangeMask,
    build_n2s,
    build_s2s,
    decode,
)

# tiny models: a second torch thread only spins on a busy machine
pytestmark = pytest.mark.usefixtures("one_thread")

TINY = LMConfig(n_embd=16, n_layer=2, n_head=2, n_positions=64, gen_offset=40, dropout=0.0)


def test_n2s_builder_exact_ids_positions_labels() -> None:
    out = build_n2s(torch.tensor([0, 4, 2]), torch.tensor([1, 1, 3]))
    assert out["input_ids"].tolist() == [[3, 7, 5, BOS, 4, 4, 6]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]]
    assert out["labels"].tolist() == [[IGNORE] * 4 + [4, 4, 6]]


def test_s2s_builder_exact_ids_positions_labels() -> None:
    K = 5  # semantic vocabulary; acoustic ids are shifted by 3 + K = 8
    out = build_s2s(
        torch.tensor([1]),
        torch.tensor([2]),
        torch.tensor([0, 3]),
        torch.tensor([1, 2]),
        n_semantic=K,
        gen_offset=1000,
    )
    assert out["input_ids"].tolist() == [[4, 5, BOS, 8, 11, 9, 10]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1, 1000, 1001]]
    assert out["labels"].tolist() == [[IGNORE] * 5 + [9, 10]]
    no_chain = build_s2s(torch.tensor([1]), torch.tensor([2]), None, torch.tensor([1, 2]), n_semantic=K)
    assert no_chain["input_ids"].tolist() == [[4, 5, BOS, 9, 10]]
    assert no_chain["position_ids"].tolist() == [[0, 1, 2, 1000, 1001]]


def test_inference_prompt_is_the_training_prefix() -> None:
    g = torch.Generator().manual_seed(0)
    ns, cs = torch.randint(6, (2, 4), generator=g), torch.randint(6, (2, 4), generator=g)
    na, ca = torch.randint(9, (2, 8), generator=g), torch.randint(9, (2, 8), generator=g)
    for train, infer in (
        (build_n2s(ns, cs), build_n2s(ns)),
        (build_s2s(ns, cs, na, ca, n_semantic=6), build_s2s(ns, cs, na, n_semantic=6)),
    ):
        L = infer["input_ids"].shape[1]
        assert torch.equal(train["input_ids"][:, :L], infer["input_ids"])
        assert torch.equal(train["position_ids"][:, :L], infer["position_ids"])
        assert (train["labels"][:, :L] == IGNORE).all() and (train["labels"][:, L:] != IGNORE).all()


def test_s2s_builder_rejects_misaligned_acoustic_tokens() -> None:
    with pytest.raises(ValueError, match="2 T_s"):
        build_s2s(
            torch.zeros(1, 3, dtype=torch.long),
            torch.zeros(1, 3, dtype=torch.long),
            torch.zeros(1, 5, dtype=torch.long),
            n_semantic=4,
        )


def test_range_mask_uses_minus_inf() -> None:
    out = RangeMask(2, 4)(torch.zeros(1, 1, dtype=torch.long), torch.arange(6.0)[None])
    assert out[0, 2:4].tolist() == [2.0, 3.0]
    assert torch.isneginf(out[0, [0, 1, 4, 5]]).all()
    with pytest.raises(ValueError):
        RangeMask(3, 3)


def test_kv_cached_greedy_equals_full_rerun() -> None:
    torch.manual_seed(0)
    s2s = S2S(5, 7, TINY).eval()
    g = torch.Generator().manual_seed(1)
    ns, cs, na = (
        torch.randint(5, (3, 4), generator=g),
        torch.randint(5, (3, 4), generator=g),
        torch.randint(7, (3, 8), generator=g),
    )
    a = s2s.generate(ns, cs, na, strategy="greedy")
    b = s2s.generate(ns, cs, na, strategy="greedy", use_cache=False)
    assert torch.equal(a, b)
    n2s = N2S(6, TINY).eval()
    x = torch.randint(6, (2, 10), generator=g)
    assert torch.equal(
        n2s.generate(x, strategy="greedy"), n2s.generate(x, strategy="greedy", use_cache=False)
    )


def test_sampled_ids_stay_in_range_and_are_seeded() -> None:
    torch.manual_seed(0)
    n2s = N2S(6, TINY).eval()
    x = torch.randint(6, (1000, 10), generator=torch.Generator().manual_seed(2))
    a = n2s.generate(x, strategy="sample", seed=5)  # 1000 x 10 = 10^4 sampled ids
    assert a.numel() == 10_000 and a.min() >= 0 and a.max() < 6
    assert torch.equal(a, n2s.generate(x, strategy="sample", seed=5))
    k = n2s.generate(x[:4], strategy="top_k", top_k=2, seed=1)
    assert k.min() >= 0 and k.max() < 6


def test_decode_raw_ids_in_valid_range_for_s2s() -> None:
    torch.manual_seed(0)
    s2s = S2S(5, 7, TINY).eval()
    p = build_s2s(
        torch.zeros(2, 3, dtype=torch.long),
        torch.ones(2, 3, dtype=torch.long),
        torch.zeros(2, 6, dtype=torch.long),
        n_semantic=5,
        gen_offset=40,
    )
    raw = decode(s2s.model, p["input_ids"], p["position_ids"], n_new=6, pos_start=40, lo=8, hi=15, seed=0)
    assert raw.min() >= 8 and raw.max() < 15


def test_position_budget_is_checked() -> None:
    s2s = S2S(5, 7, TINY).eval()
    with pytest.raises(ValueError, match="n_positions"):
        s2s.generate(
            torch.zeros(1, 20, dtype=torch.long),
            torch.zeros(1, 20, dtype=torch.long),
            torch.zeros(1, 40, dtype=torch.long),
        )
