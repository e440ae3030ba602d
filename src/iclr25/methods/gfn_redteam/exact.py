"""Exactness on a tiny enumerable space: every terminal sequence, the target R/Z and the TV.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540): a GFlowNet trained by trajectory balance
samples x with probability R(x)/Z. On a space small enough to enumerate (``k`` tokens + EOS,
length <= ``max_len``, EOS forbidden first) the learned sampler's distribution is computed exactly,
sequence by sequence, and compared with R/Z by total variation. :class:`ToyReward` is a
``log R = log p_ref + (1/beta) log c`` world for it: p_ref a fixed random Markov chain with a
stop probability, c high on sequences holding one of a few bigram patterns.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from iclr25.methods.gfn_redteam.tb import sequence_log_prob
from iclr25.methods.gfn_redteam.trainer import AttackPrompt, model_device, pad_batch

__all__ = ["ToyReward", "enumerate_sequences", "model_log_probs", "total_variation"]


def enumerate_sequences(token_ids: Sequence[int], max_len: int, eos_token_id: int) -> list[tuple[int, ...]]:
    """Every terminal sequence: 1..max_len-1 tokens then EOS, or max_len tokens (forced stop).

    Example:
        >>> len(enumerate_sequences(range(4, 10), 4, 3)), len(enumerate_sequences(range(4, 8), 3, 3))
        (1554, 84)
    """
    if max_len < 1 or not token_ids:
        raise ValueError("max_len must be >= 1 and token_ids non-empty")
    out: list[tuple[int, ...]] = []
    for length in range(1, max_len + 1):
        for body in itertools.product(list(token_ids), repeat=length):
            out.append((*body, eos_token_id) if length < max_len else body)
    return out


@torch.no_grad()
def model_log_probs(
    model: nn.Module, prompt: AttackPrompt, seqs: Sequence[Sequence[int]], *, chunk: int = 2048
) -> torch.Tensor:
    """log pi(x) of each sequence (untempered, same masking as sampling), shape (n,), on CPU."""
    device = model_device(model)
    out = []
    for i in range(0, len(seqs), chunk):
        tokens, mask = pad_batch(seqs[i : i + chunk], prompt.pad_token_id, device=device)
        out.append(
            sequence_log_prob(
                model,
                prompt.prompt_ids,
                tokens,
                mask,
                eos_token_id=prompt.eos_token_id,
                banned_token_ids=prompt.banned_token_ids,
            )
        )
    return torch.cat(out).cpu()


def total_variation(log_p: torch.Tensor, log_q: torch.Tensor) -> float:
    """TV between two distributions given as log-weights (each normalised here)."""
    p = torch.softmax(log_p.double(), 0)
    q = torch.softmax(log_q.double(), 0)
    return float(0.5 * (p - q).abs().sum())


class ToyReward:
    """log R = log p_ref + (1/beta) log c on token sequences, with an exact prior.

    p_ref is a first-order Markov chain over ``k`` tokens (random Dirichlet rows) that stops with
    probability ``stop`` after each token (never before the first, never after ``max_len``);
    c(x) = ``c_hi`` when x holds one of the ``patterns`` (bigrams of token indices), else ``c_lo``.

    Args:
        token_ids: the k action ids.
        eos_token_id: end id.
        max_len: most tokens.
        patterns: bigrams (index pairs in 0..k-1) that make c high.
        beta: beta of the reward.
        seed: seed of the Markov chain.
        stop: stop probability.
        c_hi, c_lo: toxicity of pattern / background sequences.
    """

    def __init__(
        self,
        token_ids: Sequence[int],
        eos_token_id: int,
        max_len: int,
        patterns: Sequence[tuple[int, int]],
        *,
        beta: float = 0.5,
        seed: int = 0,
        stop: float = 0.3,
        c_hi: float = 0.9,
        c_lo: float = 0.05,
    ):
        self.ids = list(token_ids)
        self.index = {t: i for i, t in enumerate(self.ids)}
        self.eos, self.max_len, self.beta, self.stop = eos_token_id, max_len, beta, stop
        self.patterns = {(self.ids[a], self.ids[b]) for a, b in patterns}
        self.c_hi, self.c_lo = c_hi, c_lo
        rng = np.random.default_rng([seed, 5])
        k = len(self.ids)
        self.first = np.log(rng.dirichlet(np.ones(k)))
        self.trans = np.log(rng.dirichlet(np.ones(k), size=k))

    def log_prior(self, seq: Sequence[int]) -> float:
        """Exact log p_ref of one terminal sequence."""
        body = [t for t in seq if t != self.eos]
        lp = self.first[self.index[body[0]]]
        for a, b in itertools.pairwise(body):
            lp += np.log1p(-self.stop) + self.trans[self.index[a], self.index[b]]
        if len(body) < self.max_len:
            lp += np.log(self.stop)
        return float(lp)

    def c(self, seq: Sequence[int]) -> float:
        """c(x): high on pattern sequences."""
        body = [t for t in seq if t != self.eos]
        hit = any((a, b) in self.patterns for a, b in itertools.pairwise(body))
        return self.c_hi if hit else self.c_lo

    def prior(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Batch prior ``prior(tokens, mask) -> log p_ref`` (the reward's prior callable)."""
        rows = [
            [t for t, k in zip(r, m, strict=True) if k]
            for r, m in zip(tokens.tolist(), mask.tolist(), strict=True)
        ]
        return torch.tensor([self.log_prior(r) for r in rows], dtype=torch.float32)

    def task_from_texts(self, decode_ids: dict[str, int]):
        """A ``task(attacks) -> (log_c, c)`` callable over decoded texts (words -> ids via ``decode_ids``)."""

        def task(attacks: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
            cs = [self.c([decode_ids[w] for w in a.split()]) for a in attacks]
            c = torch.tensor(cs, dtype=torch.float32)
            return c.log(), c

        return task

    def log_reward(self, seqs: Sequence[Sequence[int]]) -> torch.Tensor:
        """Exact log R of each sequence, shape (n,)."""
        return torch.tensor(
            [self.log_prior(s) + np.log(self.c(s)) / self.beta for s in seqs], dtype=torch.float64
        )
