"""DITTO: align a language model to one user from a handful of demonstrations.

*Aligning Language Models with Demonstrated Feedback* (arXiv: "Show, Don't Tell: Aligning Language
Models with Demonstrated Feedback"), Omar Shaikh, Michelle S. Lam, Joey Hejna, Yijia Shao,
Hyundong Cho, Michael S. Bernstein, Diyi Yang, ICLR 2025, arXiv:2406.00888. Official code:
``SALT-NLP/demonstrated-feedback`` (no licence; read for facts only, nothing copied).
"""

from .base import BASE_DIR, BaseTrainConfig, base_quality, load_base, pretrain_base, train_base
from .config import DittoConfig
from .corpora import AuthorText, author_labels, load_ccat50, load_cmcc, to_dataset, to_demonstrations
from .judge import Judge, LLMJudge, win_rate
from .losses import IGNORE_INDEX, dpo_sigmoid_loss, sequence_logprobs, token_logprobs
from .pairs import (
    PreferencePair,
    Sample,
    SampleCache,
    build_ditto_pairs,
    pair_targets,
    pool_sizes,
    to_trl_rows,
)
from .trainer import Demonstration, DittoCallback, DittoTrainer

__all__ = [
    "BASE_DIR",
    "IGNORE_INDEX",
    "AuthorText",
    "BaseTrainConfig",
    "Demonstration",
    "DittoCallback",
    "DittoConfig",
    "DittoTrainer",
    "Judge",
    "LLMJudge",
    "PreferencePair",
    "Sample",
    "SampleCache",
    "author_labels",
    "base_quality",
    "build_ditto_pairs",
    "dpo_sigmoid_loss",
    "load_base",
    "load_ccat50",
    "load_cmcc",
    "pair_targets",
    "pool_sizes",
    "pretrain_base",
    "sequence_logprobs",
    "to_dataset",
    "to_demonstrations",
    "to_trl_rows",
    "token_logprobs",
    "train_base",
    "win_rate",
]
