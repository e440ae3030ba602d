"""Tests of FTCT mechanism scores, the probe and the windowed-MLP baseline."""

import numpy as np
import pytest
import torch

from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    ModelConfig,
    TestItem,
    WindowedMLP,
    build_model,
    forward_internals,
    induction_scores,
    make_probe_tests,
    parent_attention,
    probe_parent_value,
)

TOK = FTCTTokenizer(n_letters=4, modulus=10, context_div=1)
# one shot "A = 3 , B = 5 <nl>" then the query "A = 4 , B = 6"
#  pos:       0 1 2 3 4 5 6  7     8 9 10 11 12 13 14
IDS = tuple(TOK.encode(["A", "=", 3, ",", "B", "=", 5, "<nl>", "A", "=", 4, ",", "B", "=", 6]))
ITEM = TestItem(
    prompt_ids=IDS[:12],
    gold_ids=IDS[12:],
    gold_pairs=(("B", 6),),
    chain=("A", "B"),
    k=1,
    kind="compositional",
    demos="same",
    query_start=8,
    pair_pos=((8, 10), (12, 14)),
    te_pos=14,
    max_new_tokens=6,
)


def test_induction_score_on_a_hand_built_attention():
    attn = torch.zeros(2, 1, 2, 15, 15)  # (L, B, H, T, T)
    attn[1, 0, 0, 12, 5] = 0.8  # query 'B' (pos 12) -> token after the earlier 'B' (pos 4 + 1)
    attn[1, 0, 0, 12, 0] = 0.2
    attn[0, 0, 1, 12, 11] = 1.0  # previous-token head: no induction
    scores = induction_scores(attn, [ITEM])
    assert scores.shape == (2, 2)
    assert scores[1, 0] == pytest.approx(0.8)
    assert scores[0, 1] == 0.0 and scores.sum() == pytest.approx(0.8)


def test_parent_attention_on_a_hand_built_attention():
    attn = torch.zeros(1, 1, 2, 15, 15)
    attn[0, 0, 1, 13, 10] = 0.6  # '=' after B (pos 13) -> parent value '4' (pos 10)
    attn[0, 0, 0, 13, 6] = 1.0  # attends to the demo's value instead
    scores = parent_attention(attn, [ITEM])
    assert scores[0, 1] == pytest.approx(0.6) and scores[0, 0] == 0.0


def test_induction_needs_shots():
    zero = TestItem(**{**ITEM.__dict__, "k": 0})
    with pytest.raises(ValueError):
        induction_scores(torch.zeros(1, 1, 1, 15, 15), [zero])


def test_probe_reaches_one_on_separable_data():
    cfg = FTCTConfig(depth=5, max_child_len=3, root_count=3)  # few classes: every one seen in training
    g = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    items = make_probe_tests(g, tok, cfg, 0, 400, np.random.default_rng(1))
    width = max(len(it.full_ids) for it in items)
    hidden = torch.zeros(1, len(items), width, len(tok))  # (L+1, B, T, d): one-hot of the parent value
    for b, it in enumerate(items):
        j = it.knock_pos
        q = it.pair_pos[j + 1][1] - 1
        hidden[0, b, q, it.full_ids[it.pair_pos[j][1]]] = 1.0
    res = probe_parent_value(hidden, items, layer=0)
    assert res["parent"] == 1.0
    assert res["grandparent"] < 0.6  # knocked parents carry little grandparent information


def test_forward_internals_shapes():
    model = build_model(ModelConfig(n_layer=2, n_head=2, d_model=16), TOK, seed=0)
    attn, hidden = forward_internals(model, [ITEM, ITEM], pad_id=TOK.pad_id)
    assert attn.shape == (2, 2, 2, 15, 15) and hidden.shape == (3, 2, 15, 16)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 2, 2, 15), atol=1e-5)


def test_windowed_mlp_is_causal_and_windowed():
    mlp = WindowedMLP(vocab_size=12, window=3, hidden=16, n_blocks=2, seed=0).eval()
    x = torch.tensor([[1, 2, 3, 4, 5, 6]])
    y = x.clone()
    y[0, 5] = 7  # change the last token
    z = x.clone()
    z[0, 0] = 9  # change a token outside the last position's window
    with torch.no_grad():
        lx, ly, lz = mlp(x), mlp(y), mlp(z)
    assert lx.shape == (1, 6, 12)
    assert torch.equal(lx[0, :5], ly[0, :5])  # earlier positions do not see the future
    assert torch.equal(lx[0, 3:], lz[0, 3:])  # positions >= 3 do not see token 0 (window 3)
    assert not torch.equal(lx[0, 5], ly[0, 5])


def test_windowed_mlp_masks_padding():
    mlp = WindowedMLP(vocab_size=12, window=3, hidden=8, n_blocks=1, seed=0).eval()
    a = mlp(torch.tensor([[0, 0, 5, 6]]), torch.tensor([[0, 0, 1, 1]]))
    b = mlp(torch.tensor([[5, 6]]))
    assert torch.allclose(a[0, 2:], b[0])
