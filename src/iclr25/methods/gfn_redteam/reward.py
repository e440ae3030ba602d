"""The composite red-teaming reward, its schedules, and the prior / victim-toxicity terms.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540), Sec. 3 and App. B. The reward is::

    log R(x) = [ (1/gamma) log p_ref(x) + (1/beta) log c(x) ] / T_R(step)

with ``p_ref`` the SFT attacker (the same network with its LoRA adapter disabled), attacks
shorter than ``min_len`` tokens given ``short_penalty`` (-500) as their prior term, and
``log c = (1/m) sum_j log p_tox(r_j)`` the **geometric** mean toxicity of ``m`` victim replies
(probabilities clamped to ``eps`` before the log). ``gamma`` and ``T_R`` follow linear schedules.
The buffer stores the components ``(log p_ref, log c)`` so that replayed samples are re-scored
with the *current* schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from iclr25.common.data.attack_world import ToxicityClassifier, Victim
from iclr25.methods.gfn_redteam.tb import sequence_log_prob

__all__ = [
    "CompositeLogReward",
    "LinearSchedule",
    "PairToxicityClassifier",
    "RefLMLogLikelihood",
    "RewardComponents",
    "ToxicityClassifier",
    "Victim",
    "VictimToxicity",
    "reply_toxicity",
]


@runtime_checkable
class PairToxicityClassifier(Protocol):
    """Scores (attack, reply) pairs: ``score_pairs(attacks, replies)`` returns P(unsafe) per pair.

    A judge that reads the user's request as well as the answer (Llama-Guard, used for the chat
    victims) implements this; a reply-only classifier (:class:`ToxicityClassifier`, e.g. the
    RoBERTa hate-speech model) need not.
    """

    def score_pairs(self, attacks: Sequence[str], replies: Sequence[str]) -> np.ndarray: ...


def reply_toxicity(
    classifier: ToxicityClassifier | PairToxicityClassifier, attacks: Sequence[str], replies: Sequence[str]
) -> np.ndarray:
    """P(toxic) of each reply, given the attack it answers, shape (n,).

    Pairs go to ``classifier.score_pairs`` where the classifier has it; otherwise the replies
    alone go to ``classifier.predict_proba``.

    Example:
        >>> class Judge:
        ...     def score_pairs(self, attacks, replies):
        ...         return np.array([float("x" in a) for a in attacks])
        >>> reply_toxicity(Judge(), ["x", "y"], ["ok", "ok"]).tolist()
        [1.0, 0.0]
    """
    if len(attacks) != len(replies):
        raise ValueError(f"{len(attacks)} attacks for {len(replies)} replies")
    if isinstance(classifier, PairToxicityClassifier):
        p = classifier.score_pairs(list(attacks), list(replies))
    elif isinstance(classifier, ToxicityClassifier):
        p = classifier.predict_proba(list(replies))
    else:
        raise TypeError(
            f"{type(classifier).__name__} is no toxicity classifier: it needs predict_proba(replies) "
            "or score_pairs(attacks, replies)"
        )
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    if len(p) != len(replies):
        raise ValueError(f"the classifier returned {len(p)} probabilities for {len(replies)} replies")
    return p


@dataclass(frozen=True)
class LinearSchedule:
    """A value moving linearly from ``start`` to ``end`` over ``steps`` steps, then constant.

    Example:
        >>> s = LinearSchedule(2.0, 1.0, 500)
        >>> s(0), s(250), s(500), s(900)
        (2.0, 1.5, 1.0, 1.0)
    """

    start: float
    end: float
    steps: int

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")

    def __call__(self, step: int) -> float:
        if self.steps == 0 or step >= self.steps:
            return float(self.end)
        frac = max(step, 0) / self.steps
        return float(self.start + (self.end - self.start) * frac)


@dataclass
class RewardComponents:
    """Per-sample reward components (all shape (B,)).

    Args:
        log_p_ref: log-likelihood under the reference (SFT) attacker, short penalty applied.
        log_c: mean log-toxicity of the victim's replies (the geometric mean's log).
        mean_tox: arithmetic mean toxicity of the replies (what evaluation thresholds at 0.5).
    """

    log_p_ref: torch.Tensor
    log_c: torch.Tensor
    mean_tox: torch.Tensor


class RefLMLogLikelihood:
    """log p_ref(x | prompt) under the SFT attacker: the policy with its adapter disabled.

    Args:
        model: a ``peft`` model (its adapter is disabled while scoring and re-enabled after), or
            any frozen causal LM used as is.
        prompt_ids: (P,) the meta-prompt.
        eos_token_id: end-of-sequence id.
        banned_token_ids: ids masked at every step (as in sampling).
    """

    def __init__(
        self,
        model: nn.Module,
        prompt_ids: torch.Tensor,
        *,
        eos_token_id: int,
        banned_token_ids: Sequence[int] = (),
    ):
        self.model, self.prompt_ids = model, prompt_ids
        self.eos_token_id, self.banned = eos_token_id, tuple(banned_token_ids)

    @torch.no_grad()
    def __call__(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        kw = dict(eos_token_id=self.eos_token_id, banned_token_ids=self.banned)
        if hasattr(self.model, "disable_adapter"):
            with self.model.disable_adapter():
                return sequence_log_prob(self.model, self.prompt_ids, tokens, mask, **kw)
        return sequence_log_prob(self.model, self.prompt_ids, tokens, mask, **kw)


class VictimToxicity:
    """Queries a victim ``n_responses`` times per attack and scores the replies.

    Args:
        victim: answers attacks (:class:`Victim`).
        classifier: P(toxic) of a reply (:class:`ToxicityClassifier`), or of an (attack, reply)
            pair (:class:`PairToxicityClassifier`, e.g. Llama-Guard).
        n_responses: m, replies per attack (paper: 5).
        eps: probabilities are clamped to ``[eps, 1]`` before the log.

    Returns (call):
        ``(log_c, mean_tox)``, each a float tensor of shape (B,).
    """

    def __init__(
        self,
        victim: Victim,
        classifier: ToxicityClassifier | PairToxicityClassifier,
        *,
        n_responses: int = 5,
        eps: float = 1e-6,
    ):
        if n_responses < 1:
            raise ValueError(f"n_responses must be >= 1, got {n_responses}")
        self.victim, self.classifier = victim, classifier
        self.n_responses, self.eps = n_responses, eps

    def __call__(self, attacks: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        replies = self.victim.respond(list(attacks), self.n_responses)
        flat = [r for rs in replies for r in rs]
        asked = [a for a, rs in zip(attacks, replies, strict=True) for _ in rs]  # the attack of each reply
        p = reply_toxicity(self.classifier, asked, flat).reshape(len(attacks), -1)
        if not np.isfinite(p).all():
            raise ValueError("the toxicity classifier returned non-finite probabilities")
        log_c = np.log(np.clip(p, self.eps, 1.0)).mean(1)  # geometric mean, in log space
        return torch.tensor(log_c, dtype=torch.float32), torch.tensor(p.mean(1), dtype=torch.float32)


class CompositeLogReward:
    """log R = [log p_ref / gamma + log c / beta] / T_R, with the short-attack guard.

    Args:
        prior: ``prior(tokens, mask) -> log p_ref`` (B,), e.g. :class:`RefLMLogLikelihood`.
        task: ``task(attacks) -> (log_c, mean_tox)``, e.g. :class:`VictimToxicity`.
        beta: beta (> 0), the toxicity term's inverse weight (paper 0.1).
        gamma: gamma schedule, the prior's inverse weight (paper 1.0, or 1.0 -> 1.2).
        temperature: T_R schedule (paper 2.0 -> 1.0).
        min_len: attacks with fewer tokens (EOS not counted) get ``short_penalty`` as log p_ref.
        short_penalty: the guard value (paper -500).
        eos_token_id: the end-of-sequence id (for lengths).

    Example:
        >>> prior = lambda t, m: torch.zeros(len(t))
        >>> task = lambda a: (torch.zeros(len(a)), torch.zeros(len(a)))
        >>> r = CompositeLogReward(prior, task, beta=0.5, gamma=LinearSchedule(1, 1, 0),
        ...                        temperature=LinearSchedule(2, 1, 10), min_len=0, eos_token_id=3)
        >>> r.combine(torch.tensor([-2.0]), torch.tensor([-1.0]), step=0)
        tensor([-2.])
    """

    def __init__(
        self,
        prior: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        task: Callable[[Sequence[str]], tuple[torch.Tensor, torch.Tensor]],
        *,
        beta: float,
        gamma: LinearSchedule,
        temperature: LinearSchedule,
        min_len: int,
        eos_token_id: int,
        short_penalty: float = -500.0,
    ):
        if beta <= 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        if min(gamma.start, gamma.end) <= 0:
            raise ValueError("gamma must stay > 0")
        if min(temperature.start, temperature.end) <= 0:
            raise ValueError("the reward temperature must stay > 0")
        if min_len < 0:
            raise ValueError(f"min_len must be >= 0, got {min_len}")
        self.prior, self.task = prior, task
        self.beta, self.gamma, self.temperature = beta, gamma, temperature
        self.min_len, self.short_penalty, self.eos_token_id = min_len, short_penalty, eos_token_id

    def components(
        self, tokens: torch.Tensor, mask: torch.Tensor, attacks: Sequence[str]
    ) -> RewardComponents:
        """Score a batch: prior log-likelihood (with the guard) and victim toxicity."""
        if len(attacks) != len(tokens):
            raise ValueError(f"{len(attacks)} attack strings for {len(tokens)} token rows")
        log_p_ref = self.prior(tokens, mask).float()
        length = (mask.bool() & (tokens != self.eos_token_id)).sum(1)
        log_p_ref = torch.where(
            length < self.min_len, torch.full_like(log_p_ref, self.short_penalty), log_p_ref
        )
        log_c, mean_tox = self.task(attacks)
        # the victim and classifier may answer on another device: components live with the prior's
        log_c, mean_tox = log_c.to(log_p_ref.device), mean_tox.to(log_p_ref.device)
        for name, v in (("log p_ref", log_p_ref), ("log c", log_c)):
            if torch.isnan(v).any():
                raise ValueError(f"the reward's {name} term returned NaN")
        return RewardComponents(log_p_ref, log_c.float(), mean_tox.float())

    def combine(self, log_p_ref: torch.Tensor, log_c: torch.Tensor, step: int) -> torch.Tensor:
        """log R at a training step, from stored components and the current schedules."""
        out = (log_p_ref / self.gamma(step) + log_c / self.beta) / self.temperature(step)
        if torch.isnan(out).any():
            raise ValueError("the log reward is NaN; check the prior and task terms")
        return out
