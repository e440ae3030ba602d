"""GFlowNet red-teaming: trajectory-balance fine-tuning of an attacker LM, then MLE smoothing.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning*, Seanie Lee, Minsu Kim, Lynn Cherif, David Dobre, Juho Lee, Sung Ju Hwang, Kenji
Kawaguchi, Gauthier Gidel, Yoshua Bengio, Nikolay Malkin, Moksh Jain, ICLR 2025, arXiv:2405.18540.
"""

from iclr25.methods.gfn_redteam.buffer import BufferItem, DiverseReplayBuffer
from iclr25.methods.gfn_redteam.config import ClaimConfig, GFNRedTeamConfig
from iclr25.methods.gfn_redteam.exact import ToyReward, enumerate_sequences, model_log_probs, total_variation
from iclr25.methods.gfn_redteam.hf import HFToxicityClassifier, HFVictim, LlamaGuardToxicity, load_attacker
from iclr25.methods.gfn_redteam.metrics import (
    cosine_diversity,
    edit_diversity,
    effective_modes,
    frontier_gap,
    mode_shares,
    redteam_metrics,
    shares_tv,
)
from iclr25.methods.gfn_redteam.reward import (
    CompositeLogReward,
    LinearSchedule,
    PairToxicityClassifier,
    RefLMLogLikelihood,
    RewardComponents,
    ToxicityClassifier,
    Victim,
    VictimToxicity,
    reply_toxicity,
)
from iclr25.methods.gfn_redteam.smoothing import mle_smoothing, select_smoothing_set
from iclr25.methods.gfn_redteam.tb import (
    LogZHead,
    Samples,
    sample_sequences,
    sequence_log_prob,
    trajectory_balance_loss,
    vargrad_loss,
)
from iclr25.methods.gfn_redteam.trainer import (
    AttackPrompt,
    GFNTrainer,
    History,
    ReinforceAttackerTrainer,
    attach_lora,
    mle_finetune,
    model_device,
    pad_batch,
)

__all__ = [
    "AttackPrompt",
    "BufferItem",
    "ClaimConfig",
    "CompositeLogReward",
    "DiverseReplayBuffer",
    "GFNRedTeamConfig",
    "GFNTrainer",
    "HFToxicityClassifier",
    "HFVictim",
    "History",
    "LinearSchedule",
    "LlamaGuardToxicity",
    "LogZHead",
    "PairToxicityClassifier",
    "RefLMLogLikelihood",
    "ReinforceAttackerTrainer",
    "RewardComponents",
    "Samples",
    "ToxicityClassifier",
    "ToyReward",
    "Victim",
    "VictimToxicity",
    "attach_lora",
    "cosine_diversity",
    "edit_diversity",
    "effective_modes",
    "enumerate_sequences",
    "frontier_gap",
    "load_attacker",
    "mle_finetune",
    "mle_smoothing",
    "mode_shares",
    "model_device",
    "model_log_probs",
    "pad_batch",
    "redteam_metrics",
    "reply_toxicity",
    "sample_sequences",
    "select_smoothing_set",
    "sequence_log_prob",
    "shares_tv",
    "total_variation",
    "trajectory_balance_loss",
    "vargrad_loss",
]
