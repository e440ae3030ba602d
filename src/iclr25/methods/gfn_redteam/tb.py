"""Sequence trajectory balance for an autoregressive attacker: sampling, scoring, log Z, loss.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning*, Seanie Lee, Minsu Kim, Lynn Cherif, David Dobre, Juho Lee, Sung Ju Hwang, Kenji
Kawaguchi, Gauthier Gidel, Yoshua Bengio, Nikolay Malkin, Moksh Jain, ICLR 2025, arXiv:2405.18540.
Implements the trajectory-balance objective of Sec. 3 (one trajectory per sequence, P_B = 1)::

    L(x) = (log Z_phi(prompt) + sum_t log pi_theta(x_t | x_<t, prompt) - log R(x))^2,

with log Z a learned head on the masked mean of the prompt's last hidden states, and the
log-Z-free VarGrad variant. One termination convention holds everywhere: EOS is forbidden at the
first step (in sampling *and* scoring), a sampled EOS is scored, and a forced stop at
``max_len`` adds no term. Banned token ids (padding, BOS, ...) are masked out the same way.
The sampler is a short KV-cached loop rather than ``generate`` because it takes an explicit
``torch.Generator`` and returns untempered per-token log-probs.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "LogZHead",
    "Samples",
    "sample_sequences",
    "sequence_log_prob",
    "trajectory_balance_loss",
    "vargrad_loss",
]


class LogZHead(nn.Module):
    """log Z_phi(prompt): ``Linear(hidden, 1)`` on the masked mean of the prompt's hidden states.

    Args:
        hidden: hidden size of the attacker's last layer.

    Shape:
        hidden_states (B, P, H), mask (B, P) -> (B,).

    Example:
        >>> head = LogZHead(8)
        >>> head(torch.zeros(2, 3, 8), torch.ones(2, 3)).shape
        torch.Size([2])
    """

    def __init__(self, hidden: int):
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        self.proj = nn.Linear(hidden, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.to(hidden_states.dtype).unsqueeze(-1)  # (B, P, 1)
        pooled = (hidden_states * m).sum(1) / m.sum(1).clamp_min(1.0)  # (B, H)
        return self.proj(pooled).squeeze(-1)  # (B,)


@dataclass
class Samples:
    """Sampled continuations of one prompt.

    Args:
        tokens: (n, L) token ids, padded with ``pad_token_id`` after the end.
        mask: (n, L) 1 where a token is part of the trajectory (a sampled EOS included).
        sum_log_pf: (n,) sum of the *untempered* per-token log-probs (no gradient).
        log_pf: (n, L) the per-token untempered log-probs (0 where masked).
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    sum_log_pf: torch.Tensor
    log_pf: torch.Tensor

    def lengths(self, eos_token_id: int) -> torch.Tensor:
        """Attack length in tokens, the EOS not counted, shape (n,)."""
        return (self.mask.bool() & (self.tokens != eos_token_id)).sum(1)


def _step_mask(
    vocab: int, t: int, eos_token_id: int, banned: Sequence[int], min_new_tokens: int
) -> torch.Tensor:
    """Additive logit mask of step ``t``: banned ids always, EOS before ``min_new_tokens``."""
    mask = torch.zeros(vocab)
    if banned:
        mask[list(banned)] = float("-inf")
    if t < min_new_tokens:
        mask[eos_token_id] = float("-inf")
    return mask


def _cache_keyword(model: nn.Module) -> str:
    """The KV-cache keyword of the model's forward: ``cache`` (recent transformers) or
    ``past_key_values`` (older releases and other models)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(out: object) -> object:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


@torch.no_grad()
def sample_sequences(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    n: int,
    *,
    max_len: int,
    eos_token_id: int,
    pad_token_id: int = 0,
    temperature: float = 1.0,
    forbid_eos_first: bool = True,
    banned_token_ids: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> Samples:
    """Sample ``n`` continuations of one prompt with a tempered behaviour policy.

    The returned log-probs are those of the untempered policy (the TB target policy), after the
    same masking (banned ids, EOS at step 0) that :func:`sequence_log_prob` applies.

    Args:
        model: a causal LM returning ``.logits`` and accepting ``past_key_values``.
        prompt_ids: (P,) prompt token ids, on the model's device (sampling runs there).
        n: number of samples.
        max_len: most new tokens; a sequence reaching it stops without an EOS term.
        eos_token_id: the end-of-sequence id.
        pad_token_id: id written after the end.
        temperature: behaviour-policy temperature (> 0).
        forbid_eos_first: mask EOS at the first step.
        banned_token_ids: ids never sampled (padding, BOS, unknown).
        generator: source of randomness, on the same device as ``prompt_ids``.

    Returns:
        :class:`Samples`, on the prompt's device.
    """
    if prompt_ids.ndim != 1 or len(prompt_ids) == 0:
        raise ValueError("prompt_ids must be a non-empty 1-d tensor")
    if n < 1 or max_len < 1:
        raise ValueError(f"n and max_len must be >= 1, got n={n}, max_len={max_len}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    device = prompt_ids.device
    if generator is not None and generator.device.type != device.type:
        raise ValueError(
            f"the generator is on {generator.device} but the prompt (and model) on {device}; "
            "build it as torch.Generator(device=...) on the model's device"
        )
    cache_kw = _cache_keyword(model)
    out = model(input_ids=prompt_ids.unsqueeze(0).expand(n, -1), use_cache=True)
    past, logits = _cache_of(out), out.logits[:, -1]  # (n, V)
    vocab = logits.shape[-1]
    tokens = torch.full((n, max_len), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros(n, max_len, device=device)
    log_pf = torch.zeros(n, max_len, device=device)
    alive = torch.ones(n, dtype=torch.bool, device=device)
    min_new = 1 if forbid_eos_first else 0
    for t in range(max_len):
        logits = logits.float() + _step_mask(vocab, t, eos_token_id, banned_token_ids, min_new).to(device)
        logp = torch.log_softmax(logits, -1)  # (n, V) untempered
        probs = torch.softmax(logits / temperature, -1)
        nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (n,)
        nxt = torch.where(alive, nxt, torch.full_like(nxt, pad_token_id))
        tokens[:, t] = nxt
        mask[:, t] = alive.float()
        log_pf[:, t] = torch.where(alive, logp.gather(1, nxt.unsqueeze(1)).squeeze(1), torch.zeros(()))
        alive = alive & (nxt != eos_token_id)
        if not alive.any() or t == max_len - 1:
            break
        out = model(input_ids=nxt.unsqueeze(1), use_cache=True, **{cache_kw: past})
        past, logits = _cache_of(out), out.logits[:, -1]
    last = int(mask.sum(0).nonzero().max()) + 1  # trim trailing all-padding columns
    return Samples(tokens[:, :last], mask[:, :last], log_pf.sum(1), log_pf[:, :last])


def sequence_log_prob(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    *,
    eos_token_id: int,
    forbid_eos_first: bool = True,
    banned_token_ids: Sequence[int] = (),
    return_hidden: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Sum of untempered log pi(x_t | x_<t, prompt) over the trajectory, with gradient.

    Args:
        model: the causal LM.
        prompt_ids: (P,) the prompt.
        tokens: (B, L) continuations (padding after the end).
        mask: (B, L) 1 on trajectory tokens.
        eos_token_id: the end-of-sequence id.
        forbid_eos_first: mask EOS at step 0 (must match sampling).
        banned_token_ids: ids masked at every step (must match sampling).
        return_hidden: also return the prompt's last hidden states, (B, P, H), for log Z.

    Returns:
        (B,) summed log-probs, and the prompt hidden states when ``return_hidden``.
    """
    if tokens.shape != mask.shape or tokens.ndim != 2:
        raise ValueError(f"tokens {tuple(tokens.shape)} and mask {tuple(mask.shape)} must be equal (B, L)")
    B, L = tokens.shape
    P = len(prompt_ids)
    prompt_ids, mask = prompt_ids.to(tokens.device), mask.to(tokens.device)
    ids = torch.cat([prompt_ids.unsqueeze(0).expand(B, -1), tokens], 1)  # (B, P + L)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=return_hidden)
    logits = out.logits[:, P - 1 : P - 1 + L].float()  # (B, L, V): position P-1+t predicts token t
    vocab = logits.shape[-1]
    min_new = 1 if forbid_eos_first else 0
    add = torch.stack([_step_mask(vocab, t, eos_token_id, banned_token_ids, min_new) for t in range(L)])
    logp = torch.log_softmax(logits + add.to(logits.device), -1)  # (B, L, V)
    tok_lp = logp.gather(2, tokens.unsqueeze(-1)).squeeze(-1)  # (B, L)
    total = torch.where(mask.bool(), tok_lp, torch.zeros((), device=tok_lp.device)).sum(1)
    if return_hidden:
        return total, out.hidden_states[-1][:, :P]
    return total


def _check(log_reward: torch.Tensor) -> None:
    if not torch.isfinite(log_reward).all():
        bad = int((~torch.isfinite(log_reward)).sum())
        raise ValueError(f"log reward has {bad} non-finite value(s) (NaN or inf); check the reward function")


def trajectory_balance_loss(
    log_z: torch.Tensor, sum_log_pf: torch.Tensor, log_reward: torch.Tensor
) -> torch.Tensor:
    """Trajectory balance, batch mean of (log Z + sum log pi - log R)^2 (P_B = 1).

    Args:
        log_z: (B,) or scalar log Z.
        sum_log_pf: (B,) summed forward log-probs.
        log_reward: (B,) log R(x); NaN or inf raises ``ValueError``.

    Example:
        >>> trajectory_balance_loss(torch.tensor(1.0), torch.tensor([-2.0, -1.0]), torch.tensor([-1.0, 1.0]))
        tensor(0.5000)
    """
    _check(log_reward)
    return (log_z + sum_log_pf - log_reward).pow(2).mean()


def vargrad_loss(sum_log_pf: torch.Tensor, log_reward: torch.Tensor) -> torch.Tensor:
    """The log-Z-free VarGrad objective: the batch variance of (sum log pi - log R).

    The batch estimate of log Z (the mean of log R - sum log pi, detached) replaces the head.
    """
    _check(log_reward)
    resid = sum_log_pf - log_reward  # (B,)
    return (resid - resid.mean().detach()).pow(2).mean()
