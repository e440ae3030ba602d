"""Configuration of VIE-DM (vision-guided expression diffusion) and its claim check.

Paper: *Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for Boosting
Referring Expression Generation and Comprehension*, Jingcheng Ke, Jun-Cheng Chen, I-Hong Jhuo,
Chia-Wen Lin, Yen-Yu Lin, ICLR 2025 (arXiv id not confirmed). The base text diffusion follows
DiffuSeq (Gong et al., ICLR 2023), whose defaults are quoted as ``paper: DiffuSeq``.

:class:`DiffusionConfig` is the Gaussian sequence diffusion, :class:`VIEDMConfig` the expression
generator (visual encoder, vision-text condition module, denoiser), :class:`ListenerConfig` the
REC model, and :class:`ClaimConfig` sizes the claim check. ``tiny()`` presets are the CPU sizes,
``refcoco()`` presets the paper scale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "DiffusionConfig", "ListenerConfig", "TextPretrainConfig", "VIEDMConfig"]


def _positive(obj: object, *names: str) -> None:
    for name in names:
        if getattr(obj, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(obj, name)}")


@dataclass(frozen=True)
class DiffusionConfig:
    """The continuous embedding-space sequence diffusion (DiffuSeq, Sec. 3).

    Example:
        >>> DiffusionConfig.tiny().steps
        200
    """

    steps: int = param(2000, doc="T: diffusion steps", source="paper: DiffuSeq T = 2000")
    schedule: Literal["sqrt", "linear", "cosine"] = param(
        "sqrt", doc="noise schedule of alpha-bar_t", source="paper: DiffuSeq sqrt schedule"
    )
    schedule_offset: float = param(
        1e-4, doc="s in alpha-bar(t) = 1 - sqrt(t/T + s)", source="paper: Diffusion-LM / DiffuSeq 1e-4"
    )
    sampling_steps: int = param(
        2000, doc="reverse steps at sampling (respaced when < T)", source="paper: DiffuSeq samples at T"
    )
    clamp: bool = param(True, doc="replace x0-hat by its nearest word embedding", source="paper: DiffuSeq")
    clamp_below: int = param(
        -1,
        doc="clamp only at original timesteps t < clamp_below (-1: at every step)",
        source="paper: DiffuSeq clamps from the start by default",
    )
    timestep_sampler: Literal["loss_aware", "uniform"] = param(
        "loss_aware", doc="training timestep sampler", source="paper: DiffuSeq lossaware"
    )
    sampler_history: int = param(10, doc="losses kept per t by the loss-aware sampler", source="paper: 10")
    sampler_uniform: float = param(
        0.001, doc="uniform mixing weight of the loss-aware sampler", source="paper: DiffuSeq 0.001"
    )

    def __post_init__(self) -> None:
        _positive(self, "steps", "sampling_steps", "sampler_history")
        if self.sampling_steps > self.steps:
            raise ValueError(f"sampling_steps ({self.sampling_steps}) cannot exceed steps T ({self.steps})")
        if not 0.0 <= self.sampler_uniform <= 1.0:
            raise ValueError(f"sampler_uniform must be in [0, 1], got {self.sampler_uniform}")

    @classmethod
    def tiny(cls) -> DiffusionConfig:
        """CPU scale: T = 200, 40 respaced sampling steps."""
        return cls(steps=200, sampling_steps=40)


@dataclass(frozen=True)
class VIEDMConfig:
    """The VIE-DM expression generator.

    Example:
        >>> VIEDMConfig.tiny().top_k
        8
    """

    vocab_size: int = param(30522, doc="tokenizer vocabulary (specials included)", source="paper: BERT")
    seq_len: int = param(40, doc="L: tokens per expression (eos and pads included)", source="paper: REG")
    d_emb: int = param(128, doc="d_emb: word-embedding width diffused", source="paper: DiffuSeq 128")
    d_model: int = param(768, doc="transformer width", source="paper: DiffuSeq BERT-base size")
    heads: int = param(12, doc="attention heads", source="paper: BERT-base")
    vtc_layers: int = param(
        2, doc="layers of the vision-text condition module (cross-attention)", source="deviation: unstated"
    )
    denoiser_layers: int = param(10, doc="bidirectional layers after the VTC", source="deviation: 12 in all")
    visual_channels: int = param(1024, doc="channels of the visual feature map", source="paper: Swin-B")
    roi_size: int = param(
        3, doc="RoIAlign output grid (roi_size x roi_size target tokens)", source="deviation: design decision"
    )
    top_k: int | None = param(
        32,
        doc="token selection: visual tokens kept (None: all, the no-selection ablation)",
        source="deviation: k unstated in the paper",
    )
    use_vtc: bool = param(
        True,
        doc="False: the no-VTC ablation (pooled visual prefix, no cross-attention)",
        source="paper: ablation",
    )
    diffusion: DiffusionConfig = param(DiffusionConfig(), doc="sequence diffusion", source="paper: DiffuSeq")

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "seq_len", "d_emb", "d_model", "heads", "vtc_layers", "roi_size")
        _positive(self, "visual_channels")
        if self.denoiser_layers < 0:
            raise ValueError(f"denoiser_layers must be >= 0, got {self.denoiser_layers}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")

    def replace(self, **changes: object) -> VIEDMConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def tiny(cls, vocab_size: int = 64) -> VIEDMConfig:
        """CPU scale: d = 64, d_emb = 32, 2 VTC + 2 denoiser layers, top-k 8, T = 200."""
        return cls(
            vocab_size=vocab_size, seq_len=12, d_emb=32, d_model=64, heads=4, vtc_layers=2,
            denoiser_layers=2, visual_channels=32, roi_size=3, top_k=8, diffusion=DiffusionConfig.tiny(),
        )  # fmt: skip

    @classmethod
    def refcoco(cls, vocab_size: int = 30522) -> VIEDMConfig:
        """Paper scale: DiffuSeq-sized denoiser (12 layers, 768, d_emb 128, T = 2000) over Swin-B."""
        return cls(vocab_size=vocab_size)


@dataclass(frozen=True)
class ListenerConfig:
    """The REC listener (text encoder + RoI candidates, one score per candidate box).

    Example:
        >>> ListenerConfig.tiny().d_model
        64
    """

    vocab_size: int = param(30522, doc="tokenizer vocabulary", source="paper: BERT")
    seq_len: int = param(40, doc="tokens per expression", source="paper: REC")
    d_model: int = param(256, doc="width", source="deviation: project listener (QRNet at paper scale)")
    heads: int = param(8, doc="attention heads", source="deviation: project listener")
    text_layers: int = param(2, doc="text-encoder layers", source="deviation: project listener")
    fusion_layers: int = param(
        2, doc="candidate layers (self-attn + cross-attn to text)", source="deviation: CPU size"
    )
    visual_channels: int = param(1024, doc="channels of the visual feature map", source="paper: Swin-B")
    roi_size: int = param(3, doc="RoIAlign output grid", source="deviation: design decision")

    def __post_init__(self) -> None:
        _positive(self, "vocab_size", "seq_len", "d_model", "heads", "text_layers", "fusion_layers")
        _positive(self, "visual_channels", "roi_size")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")

    def replace(self, **changes: object) -> ListenerConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def tiny(cls, vocab_size: int = 64) -> ListenerConfig:
        """CPU scale: width 64, one text layer, two fusion layers."""
        return cls(
            vocab_size=vocab_size, seq_len=12, d_model=64, heads=4, text_layers=1, fusion_layers=2,
            visual_channels=32, roi_size=3,
        )  # fmt: skip

    @classmethod
    def refcoco(cls, vocab_size: int = 30522) -> ListenerConfig:
        """Paper scale (for exports, the paper retrains QRNet-style REC models instead)."""
        return cls(vocab_size=vocab_size)


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the claim check on the shapes world.

    Example:
        >>> ClaimConfig().n_per_object
        5
    """

    image_size: int = param(48, doc="scene height = width in pixels", source="deviation: CPU (COCO images)")
    n_objects: tuple[int, int] = param((3, 5), doc="objects per scene", source="deviation: spec 3-5")
    n_pool: int = param(
        600,
        doc="scenes of the disjoint pool that pre-trains the image encoder",
        source="deviation: pilot (seed 100): shape probe 0.84 with 300 scenes, 0.90 with 600",
    )
    n_train: int = param(
        50,
        doc="scenes of the small real REC/REG training set (one expression per object)",
        source="deviation: the grammar ceiling's REC gain (seeds 0/1/2) is +0.14/+0.10/+0.13 with 50 "
        "scenes, +0.05 with 75-150 and +0.03-0.05 with 250, and must reach 2 x the 3-point bar",
    )
    n_test: int = param(250, doc="disjoint test scenes (REC accuracy)", source="deviation: CPU size")
    n_val: int = param(
        120, doc="disjoint validation scenes (split 'val') of the generators' curves", source="deviation: CPU"
    )
    n_val_objects: int = param(
        150,
        doc="validation objects (2 samples each) read every eval_every steps",
        source="deviation: a standard error of about 0.03 in oracle accuracy",
    )
    eval_every: int = param(
        100, doc="generator steps between validation readings", source="deviation: ten readings a run"
    )
    converged_eps: float = param(
        0.05,
        doc="largest move of a generator's validation accuracy over its last fifth that counts as a plateau",
        source="deviation: about 1.5 standard errors of a reading",
    )
    meteor: bool = param(
        True, doc="score METEOR 1.5 (needs Java; skipped with a note without it)", source="paper: REG metric"
    )
    foundation: bool = param(
        True,
        doc="start the generators from the shipped text foundation (when it is shipped)",
        source="paper: text side from DiffuSeq",
    )
    n_quality: int = param(
        150,
        doc="test objects whose generated expressions are scored (oracle, CIDEr, diversity)",
        source="deviation: sampling cost",
    )
    seq_len: int = param(
        8,
        doc="L: tokens per expression (the world's expressions have <= 5 words)",
        source="deviation: spec L <= 12",
    )
    encoder_epochs: int = param(
        15, doc="encoder pre-training epochs (attribute heads)", source="deviation: CPU size"
    )
    d_model: int = param(64, doc="transformer width of every model", source="deviation: spec d = 64")
    d_emb: int = param(32, doc="d_emb of the diffusion", source="deviation: spec d_emb = 32")
    vtc_layers: int = param(2, doc="VTC cross-attention layers", source="deviation: spec 2")
    denoiser_layers: int = param(
        2, doc="self-attention layers after the VTC", source="deviation: spec 3-4 total"
    )
    top_k: int = param(8, doc="token selection k (of 144 visual tokens)", source="deviation: spec k = 8")
    T: int = param(200, doc="diffusion steps", source="deviation: spec T = 200-500")
    sampling_steps: int = param(20, doc="respaced reverse steps", source="deviation: spec 20-50")
    reg_steps: int = param(
        1000,
        doc="optimiser steps of each diffusion model (VIE-DM and the ablation alike)",
        source="deviation: budget (pilot, seed 100: about 0.13 s a step on a loaded core)",
    )
    reg_lr: float = param(
        3e-3,
        doc="AdamW lr of the diffusion models",
        source="deviation: 1e-4 in DiffuSeq; pilot (seed 100): oracle 0.29 at 1,000 steps vs 0.19 at 1e-3",
    )
    reg_batch: int = param(32, doc="batch of the generators", source="deviation: 2048 in DiffuSeq")
    ema: float = param(
        0.995, doc="EMA decay of the diffusion weights", source="deviation: 0.9999 in DiffuSeq"
    )
    ar_steps: int = param(
        500,
        doc="optimiser steps of the AR speaker (read at its best validation step, like VIE-DM)",
        source="deviation: it peaks at 200-300 steps and then overfits (probe, seed 100)",
    )
    ar_lr: float = param(1e-3, doc="AdamW lr of the AR speaker", source="deviation: pilot setting")
    beam: int = param(
        5, doc="beam width of the AR speaker (returns n_per_object beams)", source="deviation: CPU size"
    )
    n_per_object: int = param(5, doc="generated expressions per object", source="deviation: spec 5")
    listener_steps: int = param(
        500,
        doc="listener optimiser steps, the same in every arm",
        source="deviation: pilot (seed 100): the listener plateaus by 500 steps",
    )
    listener_lr: float = param(1e-3, doc="AdamW lr of the listener", source="deviation: project listener")
    listener_batch: int = param(32, doc="listener batch (scenes x expressions)", source="deviation: CPU size")

    def __post_init__(self) -> None:
        _positive(self, "n_pool", "n_train", "n_test", "reg_steps", "ar_steps", "n_per_object", "beam")
        _positive(self, "n_quality", "seq_len", "n_val", "n_val_objects", "eval_every")
        _positive(self, "listener_steps", "listener_batch", "reg_batch", "T", "sampling_steps")
        if self.sampling_steps > self.T:
            raise ValueError(f"sampling_steps ({self.sampling_steps}) cannot exceed T ({self.T})")
        if self.beam < self.n_per_object:
            raise ValueError(f"beam ({self.beam}) must be >= n_per_object ({self.n_per_object})")

    @classmethod
    def smoke(cls) -> ClaimConfig:
        """A few seconds: every arm and metric, tiny sizes."""
        return cls(
            n_pool=16, n_train=16, n_test=12, encoder_epochs=1, reg_steps=12, ar_steps=8, listener_steps=10,
            sampling_steps=5, n_quality=12, n_val=6, meteor=False, n_val_objects=8, eval_every=4,
        )  # fmt: skip


@dataclass(frozen=True)
class TextPretrainConfig:
    """The recipes of the shipped text foundation: the diffusion text side and the AR speaker, each
    trained on an unlimited stream of grammar expressions with no image (a null visual condition).

    At paper scale the text side starts from a DiffuSeq checkpoint and the AR baselines from a
    pretrained language model; these recipes are their CPU analogue. The sizes equal the claim's
    models so the weights load into them.

    Example:
        >>> TextPretrainConfig().seq_len
        8
    """

    seed: int = param(
        100, doc="world seed of the text stream (scenes of split 'text')", source="deviation: outside 0-2"
    )
    image_size: int = param(48, doc="scene size of the text stream's world", source="deviation: claim's")
    n_objects: tuple[int, int] = param((3, 5), doc="objects per scene", source="deviation: claim's")
    seq_len: int = param(8, doc="L", source="deviation: claim's")
    d_model: int = param(64, doc="width", source="deviation: claim's")
    d_emb: int = param(32, doc="d_emb of the diffusion", source="deviation: claim's")
    heads: int = param(4, doc="attention heads", source="deviation: claim's")
    vtc_layers: int = param(
        2, doc="VTC layers (cross-attention to a null memory)", source="deviation: claim's"
    )
    denoiser_layers: int = param(2, doc="self-attention layers", source="deviation: claim's")
    T: int = param(200, doc="diffusion steps", source="deviation: claim's")
    sampling_steps: int = param(
        20, doc="respaced reverse steps of the quality check", source="deviation: claim's"
    )
    scenes_per_step: int = param(
        10, doc="fresh 'text' scenes per optimiser step (about 4 expressions each)", source="deviation: CPU"
    )
    steps: int = param(
        6000,
        doc="optimiser steps of the diffusion recipe",
        source="deviation: training loss 0.145, 0.133, 0.127 over steps 750-1,000, 1,250-1,500, 2,000-2,250",
    )
    ar_steps: int = param(
        4000, doc="optimiser steps of the AR recipe", source="deviation: a language model of a small grammar"
    )
    lr: float = param(1e-3, doc="AdamW lr of the diffusion text side", source="deviation: 1e-4 in DiffuSeq")
    ar_lr: float = param(1e-3, doc="AdamW lr of the AR speaker", source="deviation: CPU pilot setting")
    ema: float = param(0.999, doc="EMA decay of the shipped diffusion weights", source="deviation: 0.9999")
    eval_every: int = param(500, doc="steps between held-out evaluations", source="deviation: CPU")
    n_heldout_scenes: int = param(
        100, doc="held-out 'text_heldout' scenes of the validation loss", source="deviation: CPU"
    )
    checkpoint_every: int = param(250, doc="steps between resume checkpoints", source="deviation: CPU")

    def __post_init__(self) -> None:
        _positive(self, "seq_len", "d_model", "d_emb", "heads", "vtc_layers", "T", "sampling_steps")
        _positive(self, "scenes_per_step", "steps", "ar_steps", "eval_every", "n_heldout_scenes")
        _positive(self, "checkpoint_every")
        if self.sampling_steps > self.T:
            raise ValueError(f"sampling_steps ({self.sampling_steps}) cannot exceed T ({self.T})")
