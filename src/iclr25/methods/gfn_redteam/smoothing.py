"""MLE smoothing: fine-tune the original (SFT) attacker on the high-reward training-time attacks.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540), Sec. 3.2 ("MLE smoothing"). The unique attacks
seen during GFlowNet training whose toxicity c (the geometric mean over replies) exceeds
``tox_threshold`` (0.7) and whose prior log-likelihood exceeds ``logp_threshold`` (-100) are kept;
the **SFT** attacker (not the GFlowNet model), all of its parameters, is then fitted to them by
maximum likelihood.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.gfn_redteam.config import GFNRedTeamConfig
from iclr25.methods.gfn_redteam.trainer import AttackPrompt, History, mle_finetune

__all__ = ["mle_smoothing", "select_smoothing_set"]


def select_smoothing_set(
    history: History, *, tox_threshold: float = 0.7, logp_threshold: float = -100.0
) -> list[tuple[int, ...]]:
    """The unique training-time attacks with c > ``tox_threshold`` and log p_ref > ``logp_threshold``.

    Example:
        >>> h = History(tokens=[(5, 3), (5, 3), (6, 3), (7, 3)], log_c=[-0.1, -0.1, -0.1, -2.0],
        ...             log_p_ref=[-5.0, -5.0, -200.0, -5.0])
        >>> select_smoothing_set(h)
        [(5, 3)]
    """
    if not 0.0 <= tox_threshold < 1.0:
        raise ValueError(f"tox_threshold must lie in [0, 1), got {tox_threshold}")
    keep: dict[tuple[int, ...], None] = {}
    for tok, lc, lp in zip(history.tokens, history.log_c, history.log_p_ref, strict=True):
        if math.exp(lc) > tox_threshold and lp > logp_threshold:
            keep.setdefault(tuple(tok), None)
    return list(keep)


def mle_smoothing(
    sft_model: nn.Module,
    history: History,
    prompt: AttackPrompt,
    config: GFNRedTeamConfig,
    *,
    tox_threshold: float | None = None,
    logp_threshold: float | None = None,
    generator: torch.Generator | None = None,
    progress: ProgressFn = no_progress,
) -> tuple[nn.Module, int]:
    """A copy of the SFT attacker fine-tuned by MLE on the filtered training-time attacks.

    Args:
        sft_model: the SFT attacker (left untouched; a plain causal LM, not the adapter model).
        history: the GFlowNet run's :class:`~iclr25.methods.gfn_redteam.trainer.History`.
        prompt: the meta-prompt and token conventions.
        config: ``mle_*`` values and the default thresholds (``smooth_tox``, ``smooth_logp``).
        tox_threshold: c threshold (default ``config.smooth_tox``).
        logp_threshold: log p_ref threshold (default ``config.smooth_logp``).
        generator: batch-sampling randomness.
        progress: progress callback.

    Returns:
        The smoothed model and how many unique attacks it was fitted on.

    Raises:
        ValueError: no attack passes the filter.
    """
    data = select_smoothing_set(
        history,
        tox_threshold=config.smooth_tox if tox_threshold is None else tox_threshold,
        logp_threshold=config.smooth_logp if logp_threshold is None else logp_threshold,
    )
    if not data:
        raise ValueError("no training-time attack passes the smoothing filter (toxicity and prior)")
    model, _ = mle_finetune(
        sft_model,
        prompt,
        data,
        steps=config.mle_steps,
        batch_size=config.mle_batch,
        lr=config.mle_lr,
        warmup_steps=config.mle_warmup,
        weight_decay=config.mle_weight_decay,
        generator=generator,
        copy_model=True,
        progress=progress,
        stage="MLE smoothing",
    )
    return model, len(data)
