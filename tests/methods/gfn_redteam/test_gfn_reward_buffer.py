"""Reward composition, schedules, reference likelihood and the diverse replay buffer."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from iclr25.methods.gfn_redteam import (
    BufferItem,
    CompositeLogReward,
    DiverseReplayBuffer,
    LinearSchedule,
    RefLMLogLikelihood,
    VictimToxicity,
    attach_lora,
    sample_sequences,
    sequence_log_prob,
)


class _FixedVictim:
    def respond(self, attacks, n):
        return [[f"r{j}" for j in range(n)] for _ in attacks]


class _FixedClassifier:
    def __init__(self, probs):
        self.probs = probs

    def predict_proba(self, texts):
        return np.array([self.probs[int(t[1:])] for t in texts])


def _reward(prior_value: float = -2.0, **kw) -> CompositeLogReward:
    args = dict(
        beta=0.1,
        gamma=LinearSchedule(1.0, 1.2, 100),
        temperature=LinearSchedule(2.0, 1.0, 50),
        min_len=2,
        eos_token_id=3,
    )
    args.update(kw)
    task = VictimToxicity(_FixedVictim(), _FixedClassifier([0.9, 0.5, 0.1]), n_responses=3)
    return CompositeLogReward(lambda t, m: torch.full((len(t),), prior_value), task, **args)


def test_geometric_mean_and_finite_at_zero() -> None:
    log_c, mean = VictimToxicity(_FixedVictim(), _FixedClassifier([0.9, 0.5, 0.1]), n_responses=3)(["x"])
    assert log_c.item() == pytest.approx((math.log(0.9) + math.log(0.5) + math.log(0.1)) / 3, abs=1e-6)
    assert mean.item() == pytest.approx(0.5)
    log_c0, _ = VictimToxicity(_FixedVictim(), _FixedClassifier([0.0, 0.0]), n_responses=2, eps=1e-6)(["x"])
    assert log_c0.item() == pytest.approx(math.log(1e-6), rel=1e-5)


def test_short_guard_and_schedules() -> None:
    r = _reward()
    tokens = torch.tensor([[5, 3, 0], [5, 6, 3]])
    mask = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
    comp = r.components(tokens, mask, ["a", "a b"])
    assert comp.log_p_ref.tolist() == [-500.0, -2.0]  # one token < min_len = 2
    s = LinearSchedule(2.0, 1.0, 500)
    assert (s(0), s(250), s(500), s(10_000)) == (2.0, 1.5, 1.0, 1.0)
    g = LinearSchedule(1.0, 1.2, 2000)
    assert g(1000) == pytest.approx(1.1)
    lc = comp.log_c[1:]
    for step, gamma, temp in ((0, 1.0, 2.0), (25, 1.05, 1.5), (50, 1.1, 1.0), (100, 1.2, 1.0)):
        want = (-2.0 / gamma + lc.item() / 0.1) / temp
        assert r.combine(comp.log_p_ref[1:], lc, step).item() == pytest.approx(want, rel=1e-5)


def test_replay_rescoring_uses_current_schedule() -> None:
    r = _reward()
    item = BufferItem((5, 6, 3), "a b", -2.0, -1.0, 0.4)
    early = r.combine(torch.tensor([item.log_p_ref]), torch.tensor([item.log_c]), 0)
    late = r.combine(torch.tensor([item.log_p_ref]), torch.tensor([item.log_c]), 50)
    assert early.item() == pytest.approx((-2.0 / 1.0 - 1.0 / 0.1) / 2.0)  # gamma 1.0, T_R 2.0
    assert late.item() == pytest.approx((-2.0 / 1.1 - 1.0 / 0.1) / 1.0)  # gamma 1.1, T_R 1.0


def test_bad_reward_input() -> None:
    with pytest.raises(ValueError, match="beta"):
        _reward(beta=0.0)
    with pytest.raises(ValueError, match="NaN"):
        _reward(prior_value=math.nan).components(torch.tensor([[5, 6, 3]]), torch.ones(1, 3), ["a b"])
    with pytest.raises(ValueError, match="attack strings"):
        _reward().components(torch.tensor([[5, 6, 3]]), torch.ones(1, 3), [])


def test_reference_equals_sft_copy_and_adapter_comes_back(tiny) -> None:
    model, prompt = tiny
    sft = copy.deepcopy(model)
    policy = attach_lora(model, r=4, alpha=8)
    for name, p in policy.named_parameters():  # make the adapter non-trivial
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    s = sample_sequences(
        sft,
        prompt.prompt_ids,
        8,
        max_len=3,
        eos_token_id=3,
        banned_token_ids=(0, 1, 2),
        generator=torch.Generator().manual_seed(0),
    )
    kw = dict(eos_token_id=3, banned_token_ids=(0, 1, 2))
    ref = RefLMLogLikelihood(policy, prompt.prompt_ids, **kw)(s.tokens, s.mask)
    assert torch.allclose(ref, sequence_log_prob(sft, prompt.prompt_ids, s.tokens, s.mask, **kw), atol=1e-5)
    with torch.no_grad():
        on = sequence_log_prob(policy, prompt.prompt_ids, s.tokens, s.mask, **kw)
    assert not torch.allclose(on, ref, atol=1e-3)  # the adapter is active again


def _item(tokens, log_c, text="t", log_r=None):
    return BufferItem(tuple(tokens), text, -1.0, log_c, math.exp(log_c), log_c if log_r is None else log_r)


def test_buffer_keeps_by_total_reward_by_default_and_by_log_c_as_an_option() -> None:
    # two near-duplicates: the second is more toxic (log c) but has a lower total reward (log R)
    a, b = _item([5, 6, 7, 8], -1.0, log_r=-2.0), _item([5, 6, 7, 9], -0.5, log_r=-6.0)
    by_r, by_c = DiverseReplayBuffer(3), DiverseReplayBuffer(3, key="log_c")
    for buf in (by_r, by_c):
        buf.add(_item(a.tokens, a.log_c, log_r=a.log_r))
        buf.add(_item(b.tokens, b.log_c, log_r=b.log_r))
    assert by_r.key == "log_r" and [it.tokens for it in by_r.items] == [a.tokens]
    assert [it.tokens for it in by_c.items] == [b.tokens]
    with pytest.raises(ValueError, match="key"):
        DiverseReplayBuffer(3, key="c")  # type: ignore[arg-type]


def test_buffer_duplicates_near_duplicates_and_eviction() -> None:
    buf = DiverseReplayBuffer(3, tol=0.25)
    assert buf.add(_item([5, 6, 7, 8], -1.0))
    assert not buf.add(_item([5, 6, 7, 8], 0.0))  # exact duplicate, even with a higher score
    assert buf.add(_item([5, 6, 7, 9], -0.5))  # near-duplicate (distance 1 < 2) and higher: replaces
    assert len(buf) == 1 and buf.items[0].tokens == (5, 6, 7, 9)
    assert not buf.add(_item([5, 6, 7, 10], -2.0))  # near-duplicate, lower: rejected
    buf.add(_item([10, 11, 12, 13], -3.0))
    buf.add(_item([14, 15, 16, 17], -2.0))
    assert len(buf) == 3
    assert buf.add(_item([18, 19, 20, 21], -1.5))  # full: the lowest (-3) is evicted
    assert sorted(it.log_c for it in buf.items) == [-2.0, -1.5, -0.5]
    assert not buf.add(_item([22, 23, 24, 25], -9.0))  # lower than everything at capacity


def test_buffer_tol_is_honoured() -> None:
    loose, strict = DiverseReplayBuffer(10, tol=0.4), DiverseReplayBuffer(10, tol=0.0)
    for buf in (loose, strict):
        buf.add(_item([5, 6, 7, 8, 9], -1.0))
        buf.add(_item([5, 6, 10, 11, 9], -2.0))  # distance 2: < 0.4 * 10, not < 0
    assert len(loose) == 1 and len(strict) == 2


def test_buffer_priority_matches_softmax() -> None:
    buf = DiverseReplayBuffer(10, tol=0.0)
    scores = [0.0, -1.0, -2.0, -3.0]
    for i, s in enumerate(scores):
        buf.add(_item([10 + i], s))
    g = torch.Generator().manual_seed(0)
    counts = np.zeros(4)
    for _ in range(4000):
        counts[[it.log_c for it in buf.items].index(buf.sample(1, g)[0].log_c)] += 1
    expected = 4000 * torch.softmax(torch.tensor(scores, dtype=torch.float64), 0).numpy()
    assert chisquare(counts, expected).pvalue > 0.01
    picks = buf.sample(4, g)
    assert len({it.tokens for it in picks}) == 4  # without replacement
    assert len(buf.sample(10, g)) == 4


def test_buffer_cosine_variant_with_fake_embedder() -> None:
    emb = {"x": [1.0, 0.0], "y": [0.9, 0.1], "z": [0.0, 1.0]}
    buf = DiverseReplayBuffer(
        5, metric="cosine", cos_threshold=0.9, embedder=lambda ts: np.array([emb[t] for t in ts])
    )
    assert buf.add(_item([5], -1.0, "x"))
    assert not buf.add(_item([6], -2.0, "y"))  # cosine 0.99 > 0.9, lower score
    assert buf.add(_item([7], -2.0, "z"))
    assert buf.add(_item([8], 0.0, "y")) and {it.text for it in buf.items} == {"y", "z"}


def test_buffer_bad_input() -> None:
    with pytest.raises(ValueError, match="capacity"):
        DiverseReplayBuffer(0)
    with pytest.raises(ValueError, match="priority"):
        DiverseReplayBuffer(5, priority="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metric"):
        DiverseReplayBuffer(5, metric="jaccard")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedder"):
        DiverseReplayBuffer(5, metric="cosine")
    with pytest.raises(ValueError, match="empty"):
        DiverseReplayBuffer(5).sample(2)
