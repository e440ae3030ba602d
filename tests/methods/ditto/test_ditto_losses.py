"""The DPO sigmoid loss and summed response log-probabilities."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.ditto import IGNORE_INDEX, dpo_sigmoid_loss, sequence_logprobs


def test_dpo_loss_matches_a_hand_computation() -> None:
    pc, pr, rc, rr = torch.tensor([-3.0]), torch.tensor([-5.0]), torch.tensor([-4.0]), torch.tensor([-4.5])
    beta = 0.5
    # h = 0.5 * ((-3 + 4) - (-5 + 4.5)) = 0.5 * 1.5 = 0.75; loss = log(1 + e^-0.75)
    loss, cr, rj = dpo_sigmoid_loss(pc, pr, rc, rr, beta)
    assert math.isclose(loss.item(), math.log1p(math.exp(-0.75)), rel_tol=1e-6)
    assert math.isclose(cr.item(), 0.5) and math.isclose(rj.item(), -0.25)


def test_dpo_loss_is_log2_at_equal_log_ratios() -> None:
    a = torch.randn(5)
    loss, _, _ = dpo_sigmoid_loss(a, a + 1.0, a - 2.0, a - 1.0, beta=0.1)
    assert math.isclose(loss.item(), math.log(2.0), rel_tol=1e-6)


def test_dpo_gradient_raises_chosen_and_lowers_rejected() -> None:
    pc, pr = torch.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    loss, _, _ = dpo_sigmoid_loss(pc, pr, torch.zeros(3), torch.zeros(3), beta=0.1)
    loss.backward()
    assert (pc.grad < 0).all() and (pr.grad > 0).all()  # descent raises chosen, lowers rejected


def test_label_smoothing_follows_its_closed_form() -> None:
    h_raw = torch.tensor([2.0, -1.0])
    eps, beta = 0.2, 0.3
    loss, _, _ = dpo_sigmoid_loss(h_raw, torch.zeros(2), torch.zeros(2), torch.zeros(2), beta, eps)
    h = beta * h_raw
    want = (-(1 - eps) * torch.nn.functional.logsigmoid(h) - eps * torch.nn.functional.logsigmoid(-h)).mean()
    assert math.isclose(loss.item(), want.item(), rel_tol=1e-6)
    with pytest.raises(ValueError):
        dpo_sigmoid_loss(h_raw, h_raw, h_raw, h_raw, beta, 0.6)
    with pytest.raises(ValueError):
        dpo_sigmoid_loss(h_raw, h_raw, h_raw, h_raw, 0.0)


def _lm() -> torch.nn.Module:
    return build_tiny_lm("gpt2", vocab_size=12, n_layer=1, n_head=2, d_model=16, seed=0)


def test_sequence_logprobs_equals_brute_force_and_skips_prompt() -> None:
    lm = _lm()
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 6, 7, 8]])  # prompt = first two tokens
    got = sequence_logprobs(lm, ids, torch.ones_like(ids), labels)
    with torch.no_grad():
        logp = torch.log_softmax(lm(ids).logits[0], -1)
    want = sum(logp[t - 1, ids[0, t]] for t in (2, 3, 4))
    assert torch.allclose(got, want.reshape(1), atol=1e-5)


def test_sequence_logprobs_ignores_padding_and_padding_side() -> None:
    lm = _lm()
    a, b = [4, 5, 6, 7], [4, 9, 10]
    lab_a, lab_b = [IGNORE_INDEX, 5, 6, 7], [IGNORE_INDEX, 9, 10]
    right = torch.tensor([a, [*b, 0]]), torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    right_lab = torch.tensor([lab_a, [*lab_b, IGNORE_INDEX]])
    left = torch.tensor([a, [0, *b]]), torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])
    left_lab = torch.tensor([lab_a, [IGNORE_INDEX, *lab_b]])
    single = sequence_logprobs(
        lm, torch.tensor([b]), torch.ones(1, 3, dtype=torch.long), torch.tensor([lab_b])
    )
    r = sequence_logprobs(lm, *right, right_lab)
    ll = sequence_logprobs(lm, *left, left_lab)
    assert torch.allclose(r, ll, atol=1e-5)
    assert torch.allclose(r[1], single[0], atol=1e-5)
