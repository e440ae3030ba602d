"""Trajectory balance, log-probs and the log Z head."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from iclr25.methods.gfn_redteam import (
    LogZHead,
    enumerate_sequences,
    model_log_probs,
    sample_sequences,
    sequence_log_prob,
    trajectory_balance_loss,
    vargrad_loss,
)


def test_tb_loss_zero_residual_hand_value_and_grad() -> None:
    pf = torch.tensor([-2.0, -3.0])
    assert trajectory_balance_loss(torch.tensor(1.0), pf, pf + 1.0).item() == 0.0
    # residuals: 0.5 + (-2) - (-1) = -0.5 and 0.5 + (-3) - (-4) = 1.5 -> (0.25 + 2.25) / 2 = 1.25
    log_z = torch.tensor(0.5, requires_grad=True)
    loss = trajectory_balance_loss(log_z, pf, torch.tensor([-1.0, -4.0]))
    assert loss.item() == pytest.approx(1.25)
    loss.backward()
    assert log_z.grad.item() == pytest.approx(2 * (-0.5 + 1.5) / 2)  # dL/dlogZ = 2 mean residual


def test_vargrad_is_variance_and_nan_rewards_raise() -> None:
    pf = torch.tensor([-1.0, -2.0, -4.0])
    lr = torch.tensor([0.0, 0.0, 0.0])
    assert vargrad_loss(pf, lr).item() == pytest.approx(torch.var(pf, unbiased=False).item())
    with pytest.raises(ValueError, match="non-finite"):
        trajectory_balance_loss(torch.tensor(0.0), pf, torch.tensor([0.0, math.nan, 0.0]))
    with pytest.raises(ValueError, match="non-finite"):
        vargrad_loss(pf, torch.tensor([0.0, 0.0, math.inf]))


def test_logz_head_padding_invariant_and_trains() -> None:
    head = LogZHead(4)
    torch.nn.init.normal_(head.proj.weight)
    h = torch.randn(1, 3, 4)
    padded = torch.cat([torch.randn(1, 2, 4) * 100, h], 1)  # two junk left-padding positions
    a = head(h, torch.ones(1, 3))
    b = head(padded, torch.tensor([[0, 0, 1, 1, 1]]))
    assert torch.allclose(a, b, atol=1e-5)
    head = LogZHead(4)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    loss = trajectory_balance_loss(head(h, torch.ones(1, 3)), torch.tensor([-1.0]), torch.tensor([2.0]))
    loss.backward()
    assert head.proj.bias.grad.abs().item() > 0
    opt.step()
    assert head(h, torch.ones(1, 3)).item() > 0  # moved towards log R - sum log pi = 3


def _brute(model, prompt, seq) -> float:
    """log pi by explicit per-step softmax over the allowed actions (EOS not at step 0)."""
    total = 0.0
    ctx = prompt.prompt_ids.tolist()
    for t, tok in enumerate(seq):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ctx])).logits[0, -1].double()
        allowed = [i for i in range(logits.shape[0]) if i not in (0, 1, 2) and not (t == 0 and i == 3)]
        total += (logits[tok] - torch.logsumexp(logits[allowed], 0)).item()
        ctx.append(tok)
    return total


def test_sequence_log_prob_matches_brute_force_and_sums_to_one(tiny) -> None:
    model, prompt = tiny
    seqs = enumerate_sequences([4, 5, 6], 3, 3)
    assert len(seqs) == 3 + 9 + 27
    lp = model_log_probs(model, prompt, seqs)
    assert lp.exp().sum().item() == pytest.approx(1.0, abs=1e-5)
    for seq in (seqs[0], seqs[5], seqs[-1]):  # EOS after 1 token, after 2, forced stop at 3
        assert lp[seqs.index(seq)].item() == pytest.approx(_brute(model, prompt, seq), abs=1e-4)
    # EOS at step 0 is impossible
    bad = sequence_log_prob(
        model,
        prompt.prompt_ids,
        torch.tensor([[3]]),
        torch.ones(1, 1),
        eos_token_id=3,
        banned_token_ids=(0, 1, 2),
    )
    assert bad.item() == -math.inf


def test_sampling_log_probs_are_untempered_and_match_scoring(tiny) -> None:
    model, prompt = tiny
    for temp in (0.5, 1.0, 2.0):
        s = sample_sequences(
            model,
            prompt.prompt_ids,
            16,
            max_len=3,
            eos_token_id=3,
            temperature=temp,
            banned_token_ids=(0, 1, 2),
            generator=torch.Generator().manual_seed(1),
        )
        assert (s.tokens[:, 0] != 3).all() and not (s.tokens[s.mask.bool()] < 3).any()
        scored = sequence_log_prob(
            model, prompt.prompt_ids, s.tokens, s.mask, eos_token_id=3, banned_token_ids=(0, 1, 2)
        )
        assert torch.allclose(scored, s.sum_log_pf, atol=1e-5)
        ended = s.mask.sum(1).long()
        for row, n in zip(s.tokens.tolist(), ended.tolist(), strict=True):
            assert row[n - 1] == 3 or n == 3  # ends with EOS, or forced stop at max_len


def test_enumeration_count_matches_spec() -> None:
    assert len(enumerate_sequences(range(4, 10), 4, 3)) == 1554
    assert len(enumerate_sequences(range(4, 8), 3, 3)) == 84
    assert len(set(itertools.chain(enumerate_sequences(range(4, 8), 3, 3)))) == 84


def test_bad_sampler_input(tiny) -> None:
    model, prompt = tiny
    with pytest.raises(ValueError, match="non-empty"):
        sample_sequences(model, torch.tensor([], dtype=torch.long), 2, max_len=3, eos_token_id=3)
    with pytest.raises(ValueError, match="max_len"):
        sample_sequences(model, prompt.prompt_ids, 2, max_len=0, eos_token_id=3)
    with pytest.raises(ValueError, match="temperature"):
        sample_sequences(model, prompt.prompt_ids, 2, max_len=2, eos_token_id=3, temperature=0.0)
    with pytest.raises(ValueError, match="hidden"):
        LogZHead(0)
