"""Configuration of FTCT (Fragmented at Training, Chained at Testing).

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Section 3 defines the task (causal
graph, fragments, noise vertices, few-shot chain-of-thought prompts); Section 4 and Appendix
list the training settings. Defaults below are the CPU claim-check setting; the paper's
settings are the presets :meth:`ClaimConfig.paper_normal`, :meth:`ClaimConfig.paper_gptsmall`
and :meth:`ClaimConfig.paper_gptlarge`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "FTCTConfig", "ModelConfig", "TrainConfig"]


@dataclass(frozen=True)
class FTCTConfig:
    """The causal graph and the training/test data generator (Section 3).


    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.

    Example:
        >>> cfg = FTCTConfig(depth=5, max_child_len=3)
        >>> cfg.max_child_len / cfg.depth  # the relative knowledge ratio λ = M/n
        0.6
    """

    depth: int = param(5, doc="n: vertices per full chain (graph depth)", source="paper: Sec. 3, n = 5")
    width: int = param(2, doc="chains merged into the graph (graph width)", source="paper: configs, width 2")
    merge_pos: int = param(0, doc="level where the chains share one vertex", source="paper: configs, merge 0")
    max_child_len: int = param(
        3, doc="M: most vertices in a training fragment (edge length <= M-1)", source="paper: Sec. 4, M = 3"
    )
    n_letters: int = param(
        26, doc="vertex alphabet size (letters A-Z, then a-z)", source="deviation: CPU scale (paper: 52)"
    )
    root_low: int = param(60, doc="smallest root value", source="deviation: CPU scale (paper: 100)")
    root_count: int = param(
        10, doc="number of root values", source="deviation: CPU scale, smaller value tables (paper: 50)"
    )
    modulus: int = param(
        200, doc="values are |parent op a| mod this", source="deviation: CPU scale (paper: 1000)"
    )
    noise_high: int = param(
        10, doc="noise values are [0, noise_high) minus admissible values", source="paper: configs, 10"
    )
    context_div: int = param(
        4, doc="private context tokens per letter", source="deviation: CPU scale (paper: 7)"
    )
    context_range: tuple[int, int] = param(
        (1, 3),
        doc="context tokens per step: [low, high) sampled without replacement",
        source="deviation: CPU scale (paper: [1, 7))",
    )
    examples_per_seq: int = param(
        4,
        doc="traces packed per training sequence (same vertex order)",
        source="deviation: CPU scale (paper: 5)",
    )
    n_structure: int = param(
        2000, doc="structure (ICL) training sequences", source="deviation: CPU scale (paper: 5000)"
    )
    n_fragment: int = param(
        8000, doc="fragment (MK) training sequences", source="deviation: CPU scale (paper: 20000)"
    )
    addlen: int = param(
        2, doc="traces have up to depth + addlen vertices", source="deviation: CPU scale (paper: 5)"
    )
    tl_low: int = param(4, doc="smallest fragment-sequence length", source="paper: configs, tl_low 4")
    nearlen: int = param(
        100, doc="fragment vertices spread over at most len+nearlen positions", source="paper: configs, 100"
    )
    leak_prob_node: float = param(
        0.0, doc="probability a noise slot holds an off-fragment graph letter", source="paper: configs, 0"
    )
    leak_prob_val: float = param(
        0.0, doc="probability such a leaked letter gets an admissible value", source="paper: configs, 0"
    )

    def __post_init__(self) -> None:
        if self.depth < 3:
            raise ValueError(f"depth must be >= 3 (so that 2 <= M < depth), got {self.depth}")
        if self.max_child_len < 2:
            raise ValueError(f"max_child_len (M) must be >= 2, got {self.max_child_len}")
        if self.max_child_len >= self.depth:
            raise ValueError(
                f"max_child_len (M={self.max_child_len}) must be < depth (n={self.depth}): "
                "otherwise full chains appear in training"
            )
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")
        if not 0 <= self.merge_pos < self.depth:
            raise ValueError(f"merge_pos must be in [0, depth), got {self.merge_pos}")
        if not 1 <= self.n_letters <= 52:
            raise ValueError(f"n_letters must be in [1, 52], got {self.n_letters}")
        n_graph = self.width * self.depth - (self.width - 1)
        needed = n_graph + self.depth + self.addlen
        if self.n_letters < needed:
            raise ValueError(
                f"n_letters={self.n_letters} too small: the graph and noise letters need {needed}"
            )
        lo, hi = self.context_range
        if not 0 <= lo < hi <= self.context_div + 1:
            raise ValueError(
                f"context_range must satisfy 0 <= low < high <= context_div + 1, got {self.context_range}"
            )
        if self.root_low < 0 or self.root_count < 1:
            raise ValueError("root_low must be >= 0 and root_count >= 1")
        if self.modulus <= self.root_low + self.root_count:
            raise ValueError(f"modulus={self.modulus} must exceed root_low + root_count")
        if not 0 < self.noise_high <= self.modulus:
            raise ValueError(f"noise_high must be in (0, modulus], got {self.noise_high}")
        for name in ("examples_per_seq", "tl_low"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_structure", "n_fragment", "addlen", "nearlen"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("leak_prob_node", "leak_prob_val"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")

    @property
    def lam(self) -> float:
        """λ = M / n, the relative knowledge ratio."""
        return self.max_child_len / self.depth


@dataclass(frozen=True)
class ModelConfig:
    """The GPT-2 model (Section 4).


    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> ModelConfig(n_layer=3, n_head=3, d_model=96).d_model // 3
        32
    """

    arch: Literal["gpt2", "llama"] = param(
        "gpt2", doc="architecture of the tiny HF causal LM", source="paper: Sec. 4"
    )
    n_layer: int = param(3, doc="transformer blocks", source="paper: Sec. 4, 3 layers")
    n_head: int = param(
        3, doc="attention heads per block (must divide d_model)", source="paper: Sec. 4, 3 heads"
    )
    d_model: int = param(48, doc="hidden size", source="deviation: CPU scale (paper: 720)")
    max_positions: int = param(256, doc="position table size", source="deviation: CPU scale (paper: 1024)")
    dropout: float = param(0.0, doc="dropout in every slot", source="deviation: short training (paper: 0.1)")

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "d_model", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_head:
            raise ValueError(f"n_head={self.n_head} must divide d_model={self.d_model}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation (AdamW on next-token loss over the supervised positions).


    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> TrainConfig(steps=100).steps
        100
    """

    lr: float = param(3e-3, doc="AdamW learning rate", source="deviation: short training (paper: 5e-5)")
    batch_size: int = param(32, doc="sequences per step", source="deviation: CPU scale (paper: 8)")
    steps: int = param(
        1500,
        doc="optimiser steps (0: use epochs)",
        source="deviation: CPU scale (paper: 14 epochs, 43,750 steps)",
    )
    epochs: float = param(
        14.0, doc="passes over the corpus when steps == 0", source="paper: configs, 14 epochs"
    )
    schedule: Literal["cosine", "linear", "constant"] = param(
        "cosine",
        doc="learning-rate decay after warm-up",
        source="deviation: short training (paper: HF linear)",
    )
    warmup_steps: int = param(100, doc="linear warm-up steps", source="deviation: short training (paper: 0)")
    weight_decay: float = param(0.01, doc="AdamW weight decay", source="deviation: short training (paper: 0)")
    grad_clip: float = param(1.0, doc="gradient-norm clip", source="paper: HF Trainer default 1.0")
    dtype: Literal["float32", "bfloat16"] = param(
        "float32", doc="autocast dtype on CUDA (CPU always float32)", source="paper: float32"
    )

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if self.steps == 0 and self.epochs <= 0:
            raise ValueError("steps == 0 needs epochs > 0")
        if self.warmup_steps < 0 or self.weight_decay < 0 or self.grad_clip <= 0:
            raise ValueError("warmup_steps and weight_decay must be >= 0, grad_clip > 0")


@dataclass(frozen=True)
class ClaimConfig:
    """Everything one FTCT claim check needs: data, model, training and evaluation.


    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> cfg = ClaimConfig.paper_normal(depth=8, max_child_len=4)
        >>> (cfg.data.depth, cfg.model.d_model, cfg.train.batch_size)
        (8, 720, 8)
    """

    data: FTCTConfig = param(FTCTConfig(), doc="graph and data generator", source="paper: Sec. 3")
    model: ModelConfig = param(ModelConfig(), doc="the GPT-2 model", source="paper: Sec. 4")
    train: TrainConfig = param(TrainConfig(), doc="optimisation", source="paper: Sec. 4")
    shots: tuple[int, ...] = param(
        (0, 1, 2, 3), doc="k values evaluated (0 = zero-shot)", source="deviation: CPU scale (paper: 0-4)"
    )
    prompts_per_k: int = param(200, doc="compositional test prompts per k", source="deviation: CPU scale")
    in_dist_prompts: int = param(
        50, doc="in-distribution (fragment) test prompts per k", source="deviation: CPU scale"
    )
    eval_batch_size: int = param(
        100, doc="prompts decoded together", source="deviation: CPU scale (paper: 50)"
    )
    copy_prompts: int = param(
        100,
        doc="order-copying probe prompts per k and per probe kind (icl, random, chain, chain_noise)",
        source="paper: official icl test, 100 prompts per k",
    )
    curve_points: int = param(
        5,
        doc="evenly spaced training checkpoints of the learning curve (the last is the final step)",
        source="deviation: diagnostic, not in the paper",
    )
    curve_prompts: int = param(
        50, doc="compositional prompts per k at each learning-curve checkpoint", source="deviation: CPU scale"
    )
    shallow_control: bool = param(
        True,
        doc="also train a 1-layer, 1-head model of the same width on the same data and steps",
        source="paper: Sec. 4, layers x heads in {1, 2}^2",
    )

    def __post_init__(self) -> None:
        if not self.shots or any(k < 0 for k in self.shots):
            raise ValueError(f"shots must be non-empty and every k >= 0, got {self.shots}")
        if 0 not in self.shots or max(self.shots) < 1:
            raise ValueError(f"shots must contain 0 and some k >= 1, got {self.shots}")
        if len(set(self.shots)) != len(self.shots):
            raise ValueError(f"shots must be distinct, got {self.shots}")
        for name in ("prompts_per_k", "in_dist_prompts", "eval_batch_size", "copy_prompts", "curve_prompts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.curve_points < 0:
            raise ValueError(f"curve_points must be >= 0, got {self.curve_points}")

    @classmethod
    def paper_normal(cls, depth: int = 5, max_child_len: int = 3) -> ClaimConfig:
        """The paper's normal setting: GPT-2 3L/3H/720, batch 8, 5k + 20k sequences, 14 epochs.

        paper: Sec. 4 and the official ``config_normal`` (context 1-6 from 7-token sets).
        """
        data = FTCTConfig(
            depth=depth,
            max_child_len=max_child_len,
            n_letters=52,
            root_low=100,
            root_count=50,
            modulus=1000,
            noise_high=10,
            context_div=7,
            context_range=(1, 7),
            examples_per_seq=5,
            n_structure=5000,
            n_fragment=20000,
            addlen=5,
            tl_low=4,
            nearlen=100,
        )
        model = ModelConfig(n_layer=3, n_head=3, d_model=720, max_positions=1024, dropout=0.1)
        train = TrainConfig(
            lr=5e-5, batch_size=8, steps=0, epochs=14.0, schedule="linear", warmup_steps=0, weight_decay=0.0
        )
        return cls(
            data=data, model=model, train=train, shots=(0, 1, 2, 3, 4), prompts_per_k=500, eval_batch_size=50
        )

    @classmethod
    def paper_gptsmall(cls, depth: int = 5, max_child_len: int = 3) -> ClaimConfig:
        """GPT-2 12L/12H/720, batch 4, 10k + 20k sequences, context 1-5 from 6-token sets.

        paper: Sec. 4 (larger models) and the official ``config_gptsmall``.
        """
        base = cls.paper_normal(depth, max_child_len)
        data = dataclasses.replace(base.data, context_div=6, context_range=(1, 6), n_structure=10000)
        model = dataclasses.replace(base.model, n_layer=12, n_head=12, d_model=720)
        return dataclasses.replace(
            base, data=data, model=model, train=dataclasses.replace(base.train, batch_size=4)
        )

    @classmethod
    def paper_gptlarge(cls, depth: int = 5, max_child_len: int = 3) -> ClaimConfig:
        """GPT-2 36L/20H/1280, batch 4, 10k + 20k sequences, context 1-5 from 6-token sets.

        paper: Sec. 4 (larger models) and the official ``config_gptlarge``.
        """
        base = cls.paper_gptsmall(depth, max_child_len)
        model = dataclasses.replace(base.model, n_layer=36, n_head=20, d_model=1280)
        return dataclasses.replace(base, model=model)
