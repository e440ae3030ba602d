"""Configuration of BiGR (binary latent codes for generation and representation).

Paper: *BiGR: Harnessing Binary Latent Codes for Image Generation and Improved Visual Representation
Capabilities*, Shaozhe Hao, Xuantong Liu, Xianbiao Qi, Shihao Zhao, Bojia Zi, Rong Xiao, Kai Han,
Kwan-Yee K. Wong, ICLR 2025, arXiv:2410.14672. :class:`BinaryAEConfig` is the binary autoencoder,
:class:`BiGRConfig` the generator (with its :class:`TranscoderConfig`), :class:`SamplerConfig` the
confidence-ordered sampler and :class:`ClaimConfig` the CPU claim check; :class:`FeatureNetRecipe`
and :class:`TokenizerRecipe` are the recipes of the shipped perceptual feature net and B-AE.
Paper-scale presets are functions (:func:`l_d24`, :func:`xl_d24`, ...) that only build configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = [
    "BiGRConfig",
    "BinaryAEConfig",
    "ClaimConfig",
    "FeatureNetRecipe",
    "SamplerConfig",
    "TokenizerRecipe",
    "TranscoderConfig",
    "bae_d24",
    "bae_d32",
    "l_d24",
    "l_d32_512",
    "tiny",
    "xl_d24",
    "xxl_d24",
    "xxl_d32",
]


def _positive(obj: object, *names: str) -> None:
    for name in names:
        v = getattr(obj, name)
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


@dataclass(frozen=True)
class BinaryAEConfig:
    """The binary autoencoder (B-AE): a VQGAN-style conv encoder/decoder with a Bernoulli quantiser.

    Example:
        >>> BinaryAEConfig().code_dim, BinaryAEConfig().downsample
        (24, 16)
    """

    in_channels: int = param(3, doc="image channels", source="paper: RGB")
    nf: int = param(128, doc="base channel width", source="paper: B-AE nf 128")
    ch_mult: tuple[int, ...] = param(
        (1, 1, 2, 2, 4), doc="channel multiplier per level (len - 1 downsamples)", source="paper: B-AE config"
    )
    num_res_blocks: int = param(2, doc="residual blocks per level", source="paper: B-AE config")
    attn_resolutions: tuple[int, ...] = param(
        (16,), doc="feature-map sizes that get a self-attention block", source="paper: attention at 16x16"
    )
    emb_dim: int = param(256, doc="width of the code embedding E (K x emb_dim)", source="paper: emb_dim 256")
    code_dim: int = param(24, doc="K: bits per token", source="paper: d24 (also d32)")
    resolution: int = param(256, doc="input image side in pixels", source="paper: 256 px")
    code_weight: float = param(
        0.0, doc="weight of the mean p(1 - p) code regulariser", source="paper: default 0"
    )

    def __post_init__(self) -> None:
        _positive(self, "in_channels", "nf", "num_res_blocks", "emb_dim", "code_dim", "resolution")
        if not self.ch_mult:
            raise ValueError("ch_mult must not be empty")
        if self.resolution % self.downsample:
            raise ValueError(f"resolution {self.resolution} is not divisible by {self.downsample}")

    @property
    def downsample(self) -> int:
        """Spatial reduction factor of the encoder."""
        return 2 ** (len(self.ch_mult) - 1)

    @property
    def grid(self) -> int:
        """Side of the token grid (h = w)."""
        return self.resolution // self.downsample


@dataclass(frozen=True)
class TranscoderConfig:
    """The binary transcoder: per-token Bernoulli diffusion over K bits (an adaLN residual MLP)."""

    depth: int = param(3, doc="residual adaLN blocks", source="paper: BiGR-L 3 blocks")
    width: int = param(1024, doc="hidden width (the backbone's D by default)", source="paper: width D")
    timesteps: int = param(256, doc="T: diffusion steps in training", source="paper: T = 256")
    sample_steps: int = param(
        100, doc="reverse steps at sampling (linearly sub-sampled from T)", source="paper: 100"
    )
    freq_dim: int = param(
        256, doc="width of the sinusoidal timestep embedding before the timestep MLP",
        source="paper: 256 (the official head's timestep embedder, as in DiT)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        _positive(self, "depth", "width", "timesteps", "sample_steps", "freq_dim")
        if self.sample_steps > self.timesteps:
            raise ValueError(f"sample_steps {self.sample_steps} > timesteps {self.timesteps}")


@dataclass(frozen=True)
class BiGRConfig:
    """The BiGR generator: Llama blocks (bidirectional, 2D RoPE, adaLN-single) + a bit head.

    Example:
        >>> c = tiny(); (c.dim, c.depth, c.num_tokens)
        (64, 2, 16)
    """

    code_dim: int = param(24, doc="K: bits per token (must match the tokenizer)", source="paper: d24")
    grid: int = param(16, doc="token grid side (N = grid ** 2)", source="paper: 256 px / 16")
    num_classes: int = param(
        1000, doc="class labels (one more id is the null class)", source="paper: ImageNet"
    )
    dim: int = param(1024, doc="D: model width", source="paper: BiGR-L")
    depth: int = param(24, doc="Llama blocks", source="paper: BiGR-L 24")
    heads: int = param(16, doc="attention heads", source="paper: BiGR-L 16")
    dropout: float = param(0.1, doc="attention / residual dropout", source="paper: 0.1")
    class_dropout: float = param(0.1, doc="label dropout for CFG (label -> null)", source="paper: 0.1")
    causal: bool = param(
        False, doc="causal mask + next-token loss on all tokens (a control, not BiGR)", source="paper: False"
    )
    head: Literal["transcoder", "bit"] = param(
        "transcoder",
        doc="bit head: Bernoulli-diffusion transcoder, or independent per-bit logits (a control)",
        source="paper: transcoder",
    )
    transcoder: TranscoderConfig = param(
        TranscoderConfig(), doc="the transcoder head", source="paper: BiGR-L head"
    )

    def __post_init__(self) -> None:
        _positive(self, "code_dim", "grid", "num_classes", "dim", "depth", "heads")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if (self.dim // self.heads) % 4:
            raise ValueError("head dim must be divisible by 4 for 2D RoPE (row and column halves)")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.class_dropout < 1.0:
            raise ValueError("dropout and class_dropout must lie in [0, 1)")
        if self.head not in ("transcoder", "bit"):
            raise ValueError(f"head must be 'transcoder' or 'bit', got {self.head!r}")

    @property
    def num_tokens(self) -> int:
        """N: tokens per image."""
        return self.grid * self.grid


@dataclass(frozen=True)
class SamplerConfig:
    """The confidence-ordered sampler (sample scripts' defaults)."""

    num_iter: int = param(20, doc="S: unmasking iterations", source="paper: sample scripts S = 20")
    cfg_scale: float = param(3.0, doc="s: classifier-free guidance scale (constant)", source="paper: 3.0")
    gumbel_temp: float = param(0.01, doc="Gumbel noise on confidences", source="paper: 0.01")
    gumbel_schedule: Literal["constant", "down", "up"] = param(
        "constant", doc="how the Gumbel temperature changes over iterations", source="paper: constant"
    )
    temperature: float = param(1.0, doc="logit temperature in the transcoder", source="paper: 1.0")
    order: Literal["confidence", "entropy", "random"] = param(
        "confidence",
        doc="unmasking order: mean |2p - 1|, -binary entropy, or random (a baseline)",
        source="paper: code's mean |2p - 1|",
    )

    def __post_init__(self) -> None:
        _positive(self, "num_iter")
        if self.cfg_scale < 0:
            raise ValueError(f"cfg_scale must be >= 0, got {self.cfg_scale}")
        if self.gumbel_temp < 0 or self.temperature <= 0:
            raise ValueError("gumbel_temp must be >= 0 and temperature > 0")


def bae_d24() -> BinaryAEConfig:
    """Paper's B-AE with K = 24 (256 px -> 16 x 16 tokens)."""
    return BinaryAEConfig(code_dim=24)


def bae_d32() -> BinaryAEConfig:
    """Paper's B-AE with K = 32."""
    return BinaryAEConfig(code_dim=32)


def l_d24() -> BiGRConfig:
    """BiGR-L-d24 (24 layers, 16 heads, D 1024, 3 transcoder blocks; about 336M parameters)."""
    return BiGRConfig(
        code_dim=24, dim=1024, depth=24, heads=16, transcoder=TranscoderConfig(depth=3, width=1024)
    )


def xl_d24() -> BiGRConfig:
    """BiGR-XL-d24 (36 layers, 20 heads, D 1280, 6 transcoder blocks)."""
    return BiGRConfig(
        code_dim=24, dim=1280, depth=36, heads=20, transcoder=TranscoderConfig(depth=6, width=1280)
    )


def xxl_d24() -> BiGRConfig:
    """BiGR-XXL-d24 (48 layers, 24 heads, D 1536, 8 transcoder blocks)."""
    return BiGRConfig(
        code_dim=24, dim=1536, depth=48, heads=24, transcoder=TranscoderConfig(depth=8, width=1536)
    )


def xxl_d32() -> BiGRConfig:
    """BiGR-XXL-d32 (as XXL-d24 with K = 32)."""
    return BiGRConfig(
        code_dim=32, dim=1536, depth=48, heads=24, transcoder=TranscoderConfig(depth=8, width=1536)
    )


def l_d32_512() -> BiGRConfig:
    """BiGR-L-d32 at 512 px (32 x 32 = 1,024 tokens; 6 transcoder blocks of width 1280)."""
    return BiGRConfig(
        code_dim=32, grid=32, dim=1024, depth=24, heads=16, transcoder=TranscoderConfig(depth=6, width=1280)
    )


def tiny(*, code_dim: int = 8, grid: int = 4, num_classes: int = 4) -> BiGRConfig:
    """A tiny CPU model for tests and examples (D 64, 2 layers, 4 heads, T 32, 8 reverse steps)."""
    return BiGRConfig(
        code_dim=code_dim, grid=grid, num_classes=num_classes, dim=64, depth=2, heads=4, dropout=0.0,
        transcoder=TranscoderConfig(depth=2, width=64, timesteps=32, sample_steps=8),
    )  # fmt: skip


@dataclass(frozen=True)
class FeatureNetRecipe:
    """How the shipped feature net of the perceptual loss is trained (``iclr25 pretrain bigr
    feature_net``): a :class:`~iclr25.methods.bigr.perceptual.FeatureNet` naming the shape and
    colour of shapes-world images of the split "perceptual" (every background), Adam on the
    cross-entropy."""

    seed: int = param(
        100, doc="seed of the world, the initialisation and the batches",
        source="deviation: outside the check's seeds 0-2 (the world draws the same distribution)",
    )  # fmt: skip
    image_size: int = param(16, doc="image side", source="deviation: the claim's 16 x 16 images")
    n_images: int = param(8000, doc="training images (split 'perceptual')", source="deviation: CPU scale")
    n_heldout: int = param(
        1000,
        doc="held-out images (split 'perceptual_test') of the reported accuracy",
        source="deviation: CPU scale",
    )
    widths: tuple[int, int, int] = param(
        (32, 64, 128), doc="channels of the three blocks", source="deviation: CPU stand-in for VGG"
    )
    steps: int = param(2000, doc="Adam steps", source="deviation: CPU scale")
    batch_size: int = param(64, doc="images per step", source="deviation: CPU scale")
    lr: float = param(1e-3, doc="Adam learning rate", source="deviation: CPU scale")


@dataclass(frozen=True)
class TokenizerRecipe:
    """How the shipped B-AE of the claim's shapes world is trained (``iclr25 pretrain bigr
    bae_shapes16``): L1 + the perceptual term over the shipped feature net, stochastic bits with
    the straight-through estimator, Adam with a cosine schedule (the paper's recipe less the GAN).
    The quality it records is read by an evaluator CNN trained on the same seed's images."""

    seed: int = param(
        100, doc="seed of the world, the initialisation and the batches",
        source="deviation: outside the check's seeds 0-2 (the world draws the same distribution)",
    )  # fmt: skip
    ae: BinaryAEConfig = param(
        BinaryAEConfig(nf=16, ch_mult=(1, 2, 2), num_res_blocks=1, attn_resolutions=(), emb_dim=64,
                       code_dim=10, resolution=16),
        doc="the B-AE: 4 x 4 tokens of K = 10 bits for 16 x 16 images",
        source="deviation: CPU scale (the claim's ae_* fields)",
    )  # fmt: skip
    backgrounds: tuple[str, ...] = param(
        ("plain", "tint", "gradient"), doc="shapes-world backgrounds", source="deviation: the claim's world"
    )
    n_train: int = param(5000, doc="training images (split 'train')", source="deviation: the claim's n_train")
    n_test: int = param(1000, doc="test images of the reported quality", source="deviation: CPU scale")
    steps: int = param(
        8000, doc="Adam steps (cosine schedule over all of them)", source="deviation: CPU scale"
    )
    batch_size: int = param(32, doc="images per step", source="deviation: CPU scale")
    lr: float = param(2e-3, doc="Adam learning rate", source="deviation: pilot on seed 100")
    perceptual_weight: float = param(1.0, doc="weight of the perceptual term", source="paper: LPIPS weight 1")
    eval_steps: int = param(
        1200,
        doc="training steps of the evaluator CNN of the quality",
        source="deviation: the claim's eval_steps",
    )


@dataclass(frozen=True)
class ClaimConfig:
    """Size of the CPU claim check (shapes world, 16 x 16 images, 4 x 4 tokens)."""

    dataset: Literal["shapes", "digits"] = param(
        "shapes", doc="main data set", source="deviation: shapes world stands in for ImageNet"
    )
    digits_line: bool = param(
        False,
        doc="also probe BiGR vs AR on scikit-learn digits (reported only)",
        source="deviation: off in full for time",
    )
    image_size: int = param(16, doc="image side", source="deviation: CPU scale (paper 256)")
    n_train: int = param(5000, doc="training images", source="deviation: CPU scale")
    n_val: int = param(1000, doc="validation images (probe layer choice)", source="deviation: CPU scale")
    n_test: int = param(
        1000, doc="test images (probe accuracy, FID reference)", source="deviation: CPU scale"
    )
    backgrounds: tuple[str, ...] = param(
        ("plain", "tint", "gradient"),
        doc="shapes-world single-object backgrounds (no per-pixel noise: no short binary code holds it)",
        source="deviation: pilot on seed 100 (raw-pixel probe 0.66 <= 0.70 without noise)",
    )
    code_dim: int = param(10, doc="K: bits per token", source="deviation: K <= 12 so AR can use 2^K ids")
    tokenizer: Literal["shipped", "train"] = param(
        "shipped",
        doc="shapes: load the shipped B-AE (trained once, seed 100) or train one per seed "
        "(ae_* fields); digits always trains one",
        source="paper: one pre-trained tokenizer shared by every generator",
    )
    ae_downsample: int = param(
        4, doc="B-AE spatial reduction (2: 8 x 8 tokens, 4: 4 x 4)", source="deviation: pilot on seed 100"
    )
    ae_nf: int = param(16, doc="B-AE base width", source="deviation: CPU scale (paper 128)")
    ae_batch: int = param(32, doc="B-AE batch size", source="deviation: CPU scale")
    ae_steps: int = param(
        600, doc="B-AE training steps with tokenizer=train (L1 loss)", source="deviation: CPU scale"
    )
    ae_lr: float = param(3e-3, doc="B-AE Adam learning rate", source="deviation: pilot on seed 100")
    ae_code_weight: float = param(
        0.0,
        doc="code_weight of the B-AE (mean p(1 - p) regulariser)",
        source="paper: default 0 (0.02 collapsed every bit once the GroupNorm fix was in)",
    )
    dim: int = param(64, doc="D of every generator", source="deviation: CPU scale (paper 1024)")
    depth: int = param(3, doc="Llama blocks of every generator", source="deviation: CPU scale (paper 24)")
    heads: int = param(4, doc="attention heads", source="deviation: CPU scale")
    transcoder_depth: int = param(2, doc="transcoder blocks", source="deviation: CPU scale (paper 3)")
    timesteps: int = param(64, doc="T of the transcoder", source="deviation: CPU scale (paper 256)")
    diffusion_steps: int = param(
        16, doc="reverse steps at sampling", source="deviation: CPU scale (paper 100)"
    )
    generators: Literal["shipped", "train"] = param(
        "shipped",
        doc="load the shipped generators of seeds 0-2 (trained once by `iclr25 pretrain bigr`) or train "
        "every arm in the check",
        source="deviation: 10,000 steps of four generators take about 20 min a seed on one core",
    )
    steps: int = param(
        10_000,
        doc="AdamW steps of every generator",
        source="deviation: CPU scale; BiGR's validation loss still fell at 3,500 steps",
    )
    batch_size: int = param(
        64, doc="batch size of every generator", source="deviation: CPU scale (paper 512)"
    )
    lr: float = param(
        1e-3, doc="AdamW learning rate", source="deviation: CPU scale (paper 1e-4 at batch 512)"
    )
    ema_decay: float = param(
        0.99,
        doc="EMA decay of every generator's weights; sampling and probes read the EMA copy",
        source="deviation: paper 0.9999 (a 10,000-step horizon over about 1M steps at lr 1e-4); "
        "0.99 averages over about 100 steps, a tenth of full's 1,000 steps at the 10x larger lr",
    )
    n_evals: int = param(
        40, doc="validation-loss evaluations along each generator's training (the convergence curve)",
        source="deviation: CPU scale",
    )  # fmt: skip
    n_val_loss: int = param(
        512, doc="validation images of the convergence curve (8 batches of 64, fixed masks and noise)",
        source="deviation: CPU scale",
    )  # fmt: skip
    num_iter: int = param(6, doc="S: sampler iterations (<= N / 2)", source="deviation: CPU scale (paper 20)")
    cfg_scale: float = param(3.0, doc="CFG scale for BiGR and AR", source="paper: 3.0")
    gumbel_temp: float = param(0.01, doc="Gumbel temperature on confidences", source="paper: 0.01")
    n_samples: int = param(
        512, doc="generated images per arm for the FID proxy", source="deviation: CPU scale"
    )
    eval_steps: int = param(
        1200,
        doc="training steps of the evaluator CNN (batch 64, about 15 epochs)",
        source="deviation: CPU scale",
    )
    steps_sweep: tuple[int, ...] = param(
        (2, 8),
        doc="sampler iterations for the quality-against-steps figure",
        source="deviation: CPU scale",
    )
    run_causal: bool = param(True, doc="train the causal=True BiGR control", source="paper: spec control")
    n_sweep: int = param(
        256, doc="samples per point of the quality-against-steps sweep", source="deviation: CPU scale"
    )
    n_inpaint: int = param(
        256, doc="test images refilled in the inpainting check", source="deviation: CPU scale"
    )
    n_probe: int = param(2500, doc="training images of the linear probes", source="deviation: CPU scale")
    pixel_probe_iter: int = param(
        100,
        doc="L-BFGS iterations of the raw-pixel probe (768 inputs; reported only)",
        source="deviation: time",
    )
    digits_ae_steps: int = param(200, doc="B-AE steps of the digits line", source="deviation: time")
    digits_steps: int = param(400, doc="generator steps of the digits line", source="deviation: CPU scale")

    def __post_init__(self) -> None:
        _positive(
            self, "n_train", "n_val", "n_test", "code_dim", "ae_steps", "steps", "n_samples", "num_iter"
        )
        if self.code_dim > 12:
            raise ValueError("code_dim must be <= 12 so the AR baseline can use 2^K ids")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must lie in [0, 1), got {self.ema_decay}")
        if not 2 <= self.n_evals <= self.steps:
            raise ValueError(f"n_evals must lie in [2, steps], got {self.n_evals}")
        if self.ae_downsample not in (2, 4):
            raise ValueError(f"ae_downsample must be 2 or 4, got {self.ae_downsample}")
