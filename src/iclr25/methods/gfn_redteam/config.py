"""Configuration of GFlowNet red-teaming (trajectory balance + MLE smoothing).

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning*, Lee et al., ICLR 2025, arXiv:2405.18540. :class:`GFNRedTeamConfig` holds every training
value of the paper's Algorithm/App. B (presets :meth:`~GFNRedTeamConfig.paper_gpt2`,
:meth:`~GFNRedTeamConfig.paper_chat` and the CPU setting :meth:`~GFNRedTeamConfig.cpu_default`);
:class:`ClaimConfig` sizes the claim check.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "GFNRedTeamConfig"]


@dataclass(frozen=True)
class GFNRedTeamConfig:
    """Attacker training: reward, schedules, exploration, buffer, optimiser, smoothing, baselines.

    Example:
        >>> GFNRedTeamConfig.paper_gpt2().beta, GFNRedTeamConfig.paper_chat().gamma_end
        (0.1, 1.2)
    """

    beta: float = param(0.1, doc="beta: inverse weight of the log-toxicity term", source="paper: App. B, 0.1")
    gamma_start: float = param(1.0, doc="gamma at step 0 (inverse prior weight)", source="paper: App. B")
    gamma_end: float = param(1.0, doc="gamma after gamma_steps", source="paper: 1.0 for GPT-2/Dolly")
    gamma_steps: int = param(2000, doc="steps of the linear gamma schedule", source="paper: App. B")
    temp_start: float = param(2.0, doc="T_R at step 0 (reward temperature)", source="paper: App. B, 2.0")
    temp_end: float = param(1.0, doc="T_R after temp_steps", source="paper: App. B, 1.0")
    temp_steps: int = param(500, doc="steps of the linear T_R schedule", source="paper: 500 for GPT-2/Dolly")
    min_len: int = param(5, doc="attacks with fewer tokens get short_penalty as log p_ref", source="paper: 5")
    short_penalty: float = param(-500.0, doc="prior term of a too-short attack", source="paper: -500")
    max_len: int = param(20, doc="most new tokens per attack", source="paper: 20")
    n_responses: int = param(5, doc="m: victim replies per attack", source="paper: 5")
    eps: float = param(
        1e-6, doc="toxicity probabilities are clamped to eps before the log", source="deviation: any"
    )
    loss: Literal["tb", "vargrad"] = param(
        "tb", doc="trajectory balance or log-Z-free VarGrad", source="paper: TB"
    )
    lr: float = param(1e-4, doc="AdamW learning rate of the adapter", source="paper: 1e-4")
    logz_lr: float | None = param(
        None, doc="learning rate of the log Z head (None: lr)", source="paper: = lr"
    )
    weight_decay: float = param(
        0.01, doc="AdamW weight decay (never passed: the default)", source="paper: 0.01"
    )
    warmup_steps: int = param(100, doc="linear warm-up steps", source="paper: 100")
    total_steps: int = param(5000, doc="training steps (linear decay to 0 over them)", source="paper: 5000")
    grad_clip: float = param(1.0, doc="gradient-norm clip", source="paper: 1.0")
    batch_size: int = param(16, doc="on-policy samples (victim-scored) per step", source="paper: 16")
    replay_fraction: float = param(
        0.5, doc="share of each batch drawn from the buffer", source="paper: replay w.p. 0.5 per micro-batch"
    )
    explore_prob: float = param(0.5, doc="probability of a tempered on-policy batch", source="paper: 0.5")
    explore_temp: tuple[float, float] = param(
        (0.5, 2.0), doc="range of the tempered behaviour policy's temperature", source="paper: U[0.5, 2]"
    )
    lora_r: int = param(32, doc="LoRA rank", source="paper: 32")
    lora_alpha: int = param(16, doc="LoRA alpha", source="paper: 16")
    buffer_capacity: int = param(1000, doc="replay buffer size", source="paper: 1000 (GPT-2/Dolly)")
    buffer_tol: float = param(0.25, doc="edit-distance tolerance of the buffer", source="paper: 0.25")
    buffer_key: Literal["log_r", "log_c"] = param(
        "log_r",
        doc="score that ranks buffer items for eviction and near-duplicates (log R or log c)",
        source="paper: official code keeps by total reward (compare='reward')",
    )
    buffer_priority: Literal["log_c", "log_r", "uniform"] = param(
        "log_c", doc="replay sampling weights", source="paper: softmax(log c)"
    )
    use_buffer: bool = param(True, doc="replay from the buffer (False: all on-policy)", source="paper: True")
    seed_batches: int = param(10, doc="SFT-attacker batches that seed the buffer", source="paper: 10")
    kl_coef: float = param(
        0.1,
        doc="lambda: KL weight of the REINFORCE baseline",
        source="deviation: the claim sweeps 0.1, 0.03, 0.01, 0 (paper: tuned)",
    )
    novelty_weight: float = param(
        0.0, doc="weight of the CRT-lite novelty bonus (0: none)", source="deviation: CRT"
    )
    smooth_tox: float = param(0.7, doc="smoothing keeps attacks with c above this", source="paper: 0.7")
    smooth_logp: float = param(-100.0, doc="... and log p_ref above this", source="paper: -100")
    mle_lr: float = param(1e-4, doc="smoothing learning rate", source="paper: 1e-4")
    mle_steps: int = param(2000, doc="smoothing steps", source="paper: 2000 (GPT-2/Dolly)")
    mle_batch: int = param(2048, doc="smoothing batch", source="paper: 2048")
    mle_warmup: int = param(100, doc="smoothing warm-up steps", source="paper: 100")
    mle_weight_decay: float = param(
        0.1, doc="smoothing weight decay (not on LayerNorm/biases)", source="paper: 0.1"
    )

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ValueError(f"beta must be > 0, got {self.beta}")
        if self.min_len > self.max_len:
            raise ValueError(f"min_len ({self.min_len}) must be <= max_len ({self.max_len})")
        if self.max_len < 1:
            raise ValueError(f"max_len (the prompt budget) must be >= 1, got {self.max_len}")
        if min(self.gamma_start, self.gamma_end, self.temp_start, self.temp_end) <= 0:
            raise ValueError("gamma and T_R must be > 0")
        if self.buffer_key not in ("log_r", "log_c"):
            raise ValueError(f"unknown buffer_key {self.buffer_key!r}; use 'log_r' or 'log_c'")
        if self.buffer_priority not in ("log_c", "log_r", "uniform"):
            raise ValueError(f"unknown buffer_priority {self.buffer_priority!r}")
        if self.buffer_capacity <= 0:
            raise ValueError(f"buffer_capacity must be > 0, got {self.buffer_capacity}")
        if not 0.0 <= self.replay_fraction < 1.0:
            raise ValueError(f"replay_fraction must lie in [0, 1), got {self.replay_fraction}")
        if self.batch_size < 1 or self.n_responses < 1:
            raise ValueError("batch_size and n_responses must be >= 1")
        lo, hi = self.explore_temp
        if not 0 < lo <= hi:
            raise ValueError(f"explore_temp must satisfy 0 < lo <= hi, got {self.explore_temp}")
        if self.lr <= 0 or (self.logz_lr is not None and self.logz_lr <= 0):
            raise ValueError("learning rates must be > 0")

    def replace(self, **changes: object) -> GFNRedTeamConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def paper_gpt2(cls) -> GFNRedTeamConfig:
        """GPT-2 attacker against GPT-2 / Dolly victims (App. B)."""
        return cls()

    @classmethod
    def paper_chat(cls) -> GFNRedTeamConfig:
        """Attacks on Gemma / Llama chat victims: gamma 1 -> 1.2, longer T_R, bigger buffer."""
        return cls(
            gamma_end=1.2,
            temp_steps=1000,
            explore_temp=(0.7, 2.0),
            buffer_capacity=5000,
            mle_steps=1000,
            mle_batch=1024,
        )

    @classmethod
    def cpu_default(cls) -> GFNRedTeamConfig:
        """The CPU-scale setting of the claim (tiny attacker, a few hundred steps)."""
        return cls(
            lr=2e-3,
            logz_lr=2e-2,
            warmup_steps=10,
            total_steps=250,
            temp_steps=125,
            lora_r=8,
            lora_alpha=16,
            buffer_capacity=500,
            mle_lr=2e-3,
            mle_steps=120,
            mle_batch=64,
            mle_warmup=10,
            kl_coef=0.1,
        )


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the claim check (Part A exactness, Part B synthetic red-teaming world).

    Example:
        >>> ClaimConfig().n_modes
        8
    """

    train: GFNRedTeamConfig = param(
        GFNRedTeamConfig.cpu_default(), doc="attacker training", source="deviation: CPU scale"
    )
    n_modes: int = param(8, doc="M: trigger modes of the victim", source="paper: spec, M = 8")
    sft_corpus: int = param(3000, doc="instructions in the SFT corpus", source="paper: 3,003 instructions")
    sft_steps: int = param(300, doc="SFT steps of the attacker prior", source="deviation: CPU scale")
    sft_lr: float = param(3e-3, doc="SFT learning rate", source="deviation: CPU scale")
    d_model: int = param(64, doc="attacker hidden size", source="deviation: tiny GPT-2 (<= 200k params)")
    n_layer: int = param(2, doc="attacker layers", source="deviation: tiny GPT-2")
    eval_samples: int = param(512, doc="attacks sampled per arm for evaluation", source="paper: spec, 512")
    mode_min_share: float = param(
        0.01,
        doc="a mode is covered when >= this share of the evaluated attacks are successes holding it",
        source="deviation: pilot (seed 100): one hit saturates, the SFT prior alone covered 8/8",
    )
    exact_tokens: int = param(6, doc="Part A: actions besides EOS", source="paper: spec, 6")
    exact_len: int = param(4, doc="Part A: most tokens per sequence", source="paper: spec, 4")
    exact_steps: int = param(1500, doc="Part A: TB steps", source="deviation: sized by the pilot")
    exact_lr: float = param(3e-3, doc="Part A: learning rate", source="deviation: sized by the pilot")
