"""DITTO's training losses: summed response log-probabilities and the DPO sigmoid loss.

DITTO optimises the DPO objective (Rafailov et al., 2023) on its demonstration-ranked pairs
(Eq. 5 of Shaikh et al., "Aligning Language Models with Demonstrated Feedback", ICLR 2025,
arXiv:2406.00888):

    L = −log σ(β [(log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x))])

with π_ref the limited-SFT policy π_0 and log π(y|x) the *sum* of response-token log-probs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["IGNORE_INDEX", "dpo_sigmoid_loss", "sequence_logprobs", "token_logprobs"]

#: Label value of tokens that carry no loss (prompt and padding), as in transformers.
IGNORE_INDEX = -100


def token_logprobs(logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Per-token log p(label_t | prefix) of next-token logits, and the mask of scored tokens.

    Args:
        logits: model logits, shape (B, T, V).
        labels: target ids with ``IGNORE_INDEX`` on unscored positions, shape (B, T).

    Returns:
        ``(logp, mask)``, both (B, T − 1): position t scores ``labels[:, t + 1]``.
    """
    logits = logits[:, :-1].float()  # (B, T-1, V): position t predicts token t+1
    target = labels[:, 1:]  # (B, T-1)
    mask = target != IGNORE_INDEX
    safe = target.masked_fill(~mask, 0)
    logp = logits.gather(-1, safe.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)  # (B, T-1)
    return logp * mask, mask


def sequence_logprobs(
    model: torch.nn.Module, input_ids: Tensor, attention_mask: Tensor, labels: Tensor
) -> Tensor:
    """Summed log-probabilities of the labelled (response) tokens of each sequence.

    Position ids are computed from the attention mask, so left- and right-padded batches give the
    same values.

    Args:
        model: a causal LM returning ``.logits``.
        input_ids: token ids, shape (B, T).
        attention_mask: 1 on real tokens, 0 on padding, shape (B, T).
        labels: ``input_ids`` with ``IGNORE_INDEX`` on prompt and padding, shape (B, T).

    Returns:
        Shape (B,): Σ_t log π(y_t | x, y_<t) over labelled tokens.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("gpt2", vocab_size=10, n_layer=1, d_model=8, seed=0)
        >>> ids = torch.tensor([[4, 5, 6]])
        >>> sequence_logprobs(lm, ids, torch.ones_like(ids), torch.tensor([[-100, 5, 6]])).shape
        torch.Size([1])
    """
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
    logp, _ = token_logprobs(logits, labels)
    return logp.sum(-1)


def dpo_sigmoid_loss(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    beta: float,
    label_smoothing: float = 0.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """The DPO sigmoid loss (Eq. 5), averaged over pairs, with optional label smoothing.

    With h = β[(π_c − ref_c) − (π_r − ref_r)] the loss is −(1 − ε) log σ(h) − ε log σ(−h).

    Args:
        policy_chosen: log π_θ(y_w|x), shape (P,).
        policy_rejected: log π_θ(y_l|x), shape (P,).
        ref_chosen: log π_ref(y_w|x), shape (P,).
        ref_rejected: log π_ref(y_l|x), shape (P,).
        beta: β.
        label_smoothing: ε in [0, 0.5).

    Returns:
        ``(loss, chosen_reward, rejected_reward)``: the scalar mean loss and the detached implicit
        rewards β(π − ref) of each side, shape (P,).

    Example:
        >>> z = torch.zeros(3)
        >>> round(dpo_sigmoid_loss(z, z, z, z, beta=0.1)[0].item(), 6)  # log 2 at equal ratios
        0.693147
    """
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    chosen = policy_chosen - ref_chosen
    rejected = policy_rejected - ref_rejected
    h = beta * (chosen - rejected)
    loss = -(1.0 - label_smoothing) * F.logsigmoid(h) - label_smoothing * F.logsigmoid(-h)
    return loss.mean(), beta * chosen.detach(), beta * rejected.detach()
