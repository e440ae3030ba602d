"""Configuration of PAL (Pluralistic ALignment reward models).

Paper: *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Daiwei Chen,
Yi Chen, Aniket Rege, Zhi Wang, Ramya Korlakai Vinayak, ICLR 2025, arXiv:2406.08469. Section 3
defines PAL-A (ideal points) and PAL-B (prompt-conditioned prototypes); the appendix lists the
training settings. :class:`PALConfig` is one model; :class:`ClaimConfig` sizes the claim check.
Presets: :meth:`PALConfig.paper_a`, :meth:`PALConfig.paper_b`, :meth:`PALConfig.t2i`,
:meth:`PALConfig.cpu_default`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "PALConfig"]

_USER_MAPS = ("f(Pw)", "Pw", "f(P)w", "|f(P)|w")
_PROJECTOR = re.compile(r"^(identity|mlp(\d+)(-(relu|gelu|tanh|silu))?(-dropout([0-9.]+))?(-residual)?)$")


@dataclass(frozen=True)
class PALConfig:
    """One PAL reward model (Sec. 3) and how it is trained.

    Example:
        >>> cfg = PALConfig(variant="B", k=2, d_in=64, d_pref=32)
        >>> cfg.score, cfg.loss
        ('cosine', 'ce')
    """

    variant: Literal["A", "B"] = param(
        "B",
        doc="PAL-A (ideal points, distance + hinge) or PAL-B (prompt-conditioned, cosine + CE)",
        source="paper: Sec. 3.1 / 3.2; B is used for most headline results",
    )
    k: int = param(
        2, doc="K: number of shared prototypes (K = 1 is a homogeneous BT model)", source="paper: K = 2"
    )
    d_in: int = param(512, doc="dimension of the frozen text embedding e(.)", source="paper: OPT-350m, 512")
    d_pref: int = param(512, doc="dimension of the preference space (projector output)", source="paper: 512")
    projector: str = param(
        "mlp2-gelu-dropout0",
        doc="projector spec mlpL-act-dropoutP[-residual] for f and g_k",
        source="paper: PAL-B config mlp2-gelu-dropout0",
    )
    user_map: Literal["f(Pw)", "Pw", "f(P)w", "|f(P)|w"] = param(
        "f(Pw)",
        doc="PAL-A: how user weights w_i and prototypes P give the ideal point a_i",
        source="paper: official PAL-A default f(Pw)",
    )
    score: Literal["auto", "distance", "cosine"] = param(
        "auto",
        doc="distance (PAL-A) or scaled cosine (PAL-B) reward; auto picks by variant",
        source="paper: Sec. 3",
    )
    loss: Literal["auto", "hinge", "ce"] = param(
        "auto",
        doc="hinge max(0, 1 - y s) (PAL-A) or cross-entropy over two logits (PAL-B); auto picks",
        source="paper: Sec. 3",
    )
    mixing: Literal["softmax", "gumbel"] = param(
        "softmax", doc="w_i = softmax(u_i / tau), or Gumbel-softmax while training", source="paper: softmax"
    )
    tau: float = param(1.0, doc="tau: temperature of the user-weight softmax", source="paper: tau = 1")
    partition: bool = param(
        False, doc="one-hot argmax weights at evaluation (hard partition of users)", source="paper: off"
    )
    logit_scale_init: float = param(
        2.6592600369644043,
        doc="t0 = log(1/0.07); reward scale s = min(exp(t), max)",
        source="paper: CLIP-style init log(1/0.07)",
    )
    logit_scale_max: float = param(100.0, doc="clamp of exp(t) (not of t)", source="paper: 100")
    lr_encoder: float = param(
        9.65e-6, doc="Adam lr of the encoder (only if train_encoder)", source="paper: 9.65e-6"
    )
    lr_projector: float = param(1e-4, doc="Adam lr of f and g_k", source="paper: 1e-4")
    weight_decay: float = param(0.01, doc="weight decay of f and g_k", source="paper: 0.01")
    lr_user: float = param(5e-3, doc="Adam lr of prototypes P and user logits W", source="paper: 5e-3")
    lr_logit_scale: float = param(0.1, doc="Adam lr of the reward scale t", source="paper: 0.1")
    epochs: int = param(1, doc="passes over the seen users' training comparisons", source="paper: 1 epoch")
    batch_size: int = param(4, doc="comparisons per optimiser step", source="paper: PAL-B batch 4")
    new_user_lr: float = param(5e-3, doc="AdamW lr when fitting new users' W only", source="paper: 5e-3")
    new_user_steps: int = param(
        20, doc="full-batch steps when fitting new users' W only", source="paper: 20 epochs"
    )
    new_user_loss: Literal["auto", "hinge", "ce"] = param(
        "auto",
        doc="loss when fitting new users' W: auto (the training loss), hinge, or cross-entropy",
        source="paper: new users are fitted with the training loss",
    )
    train_encoder: bool = param(
        False, doc="also fine-tune the encoder (PAL-B-Large)", source="paper: Tiny: off"
    )
    pooling: Literal["last", "mean"] = param(
        "last",
        doc="pooled vector: last non-pad token (decoders) or masked mean (encoders)",
        source="paper: last token for OPT",
    )
    tokenwise: bool = param(
        False,
        doc="token-wise scoring of the official TL;DR code (parity only)",
        source="deviation: pooled vectors by default; the official token-wise path scores padding",
    )
    seed: int = param(0, doc="seed of parameter init and batch order", source="deviation: explicit seed")

    def __post_init__(self) -> None:
        if self.variant not in ("A", "B"):
            raise ValueError(f"variant must be 'A' or 'B', got {self.variant!r}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        for name in ("d_in", "d_pref", "epochs", "batch_size", "new_user_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not _PROJECTOR.match(self.projector):
            raise ValueError(
                f"projector {self.projector!r} is not 'identity' or mlpL-act-dropoutP[-residual]"
            )
        if self.user_map not in _USER_MAPS:
            raise ValueError(f"user_map must be one of {_USER_MAPS}, got {self.user_map!r}")
        want = "distance" if self.variant == "A" else "cosine"
        if self.score == "auto":
            object.__setattr__(self, "score", want)
        if self.loss == "auto":
            object.__setattr__(self, "loss", "hinge" if self.variant == "A" else "ce")
        if self.score != want:
            raise ValueError(
                f"score: PAL-{self.variant} uses {want!r} (got {self.score!r}); do not mix models"
            )
        if self.loss not in ("hinge", "ce"):
            raise ValueError(f"loss must be 'hinge' or 'ce', got {self.loss!r}")
        if self.new_user_loss not in ("auto", "hinge", "ce"):
            raise ValueError(f"new_user_loss must be 'auto', 'hinge' or 'ce', got {self.new_user_loss!r}")
        if self.mixing not in ("softmax", "gumbel"):
            raise ValueError(f"mixing must be 'softmax' or 'gumbel', got {self.mixing!r}")
        if self.tau <= 0:
            raise ValueError(f"tau must be > 0, got {self.tau}")
        if self.logit_scale_max <= 0:
            raise ValueError(f"logit_scale_max must be > 0, got {self.logit_scale_max}")
        for name in ("lr_encoder", "lr_projector", "lr_user", "lr_logit_scale", "new_user_lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")

    def replace(self, **changes: object) -> PALConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def paper_a(cls) -> PALConfig:
        """PAL-A as in the paper: OPT-350m embeddings (512), K = 2, residual mlp2-relu, hinge."""
        return cls(
            variant="A",
            k=2,
            d_in=512,
            d_pref=512,
            projector="mlp2-relu-dropout0-residual",
            user_map="f(Pw)",
            score="distance",
            loss="hinge",
            batch_size=4,
        )

    @classmethod
    def paper_b(cls) -> PALConfig:
        """PAL-B-Tiny as in the paper: OPT-350m (512), K = 2, mlp2-gelu, cosine + CE, batch 4."""
        return cls(variant="B", k=2, d_in=512, d_pref=512, projector="mlp2-gelu-dropout0")

    @classmethod
    def t2i(cls) -> PALConfig:
        """Pick-a-Pic setting: precomputed CLIP-H embeddings (1024), K = 1, PAL-B head."""
        return cls(variant="B", k=1, d_in=1024, d_pref=1024, projector="mlp2-gelu-dropout0", pooling="mean")

    @classmethod
    def cpu_default(cls) -> PALConfig:
        """A CPU-sized PAL-B: 256-d hashed n-gram embeddings, d_pref 64, larger lrs, more epochs."""
        return cls(
            variant="B",
            k=2,
            d_in=256,
            d_pref=64,
            projector="mlp2-gelu-dropout0",
            lr_projector=1e-3,
            lr_user=5e-2,
            epochs=20,
            batch_size=64,
            new_user_lr=0.05,
            new_user_steps=200,
            pooling="mean",
        )


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the claim check: the numeric ideal-point world (Check 1) and the text world (Check 2).

    Example:
        >>> ClaimConfig().ip_shots
        (2, 5, 10, 20)
    """

    ip_n_seen: int = param(60, doc="Check 1: seen users", source="deviation: synthetic world, 60")
    ip_n_unseen: int = param(40, doc="Check 1: unseen users", source="deviation: synthetic world, 40")
    ip_n_items: int = param(2000, doc="Check 1: item pool size", source="deviation: synthetic world")
    ip_d_item: int = param(
        32, doc="Check 1: item embedding dimension", source="deviation: synthetic world, 32"
    )
    ip_d_true: int = param(8, doc="Check 1: dimension of the true preference space", source="deviation: 8")
    ip_k_true: int = param(3, doc="Check 1: K* true prototypes", source="deviation: synthetic world, 3")
    ip_alpha: float = param(0.3, doc="Check 1: Dirichlet concentration of w*", source="deviation: 0.3")
    ip_train_per_user: int = param(
        80, doc="Check 1: training comparisons per seen user", source="deviation: 80"
    )
    ip_test_per_user: int = param(20, doc="Check 1: test comparisons per seen user", source="deviation: 20")
    ip_unseen_test: int = param(50, doc="Check 1: test comparisons per unseen user", source="deviation: 50")
    ip_shots: tuple[int, ...] = param(
        (2, 5, 10, 20),
        doc="Check 1: training comparisons per unseen user (5 and 20 gate)",
        source="paper: n in {1..100}",
    )
    ip_proto_scale: float = param(
        8.0,
        doc="Check 1: prototype distance from the item centre (item-spread units)",
        source="deviation: set so a shared ideal point reaches about 0.65 (heterogeneous world)",
    )
    ip_bayes: float = param(
        0.9, doc="Check 1: target Bayes accuracy (sets the BT slope kappa)", source="deviation: 0.9"
    )
    ip_k: int = param(3, doc="Check 1: K of PAL-A", source="deviation: K = K* = 3")
    ip_d_pref: int = param(16, doc="Check 1: d_pref of PAL-A", source="deviation: CPU scale")
    ip_epochs: int = param(40, doc="Check 1: training epochs", source="deviation: CPU scale, small data")
    txt_enabled: bool = param(True, doc="run Check 2 (the summary-length text world)", source="deviation: on")
    txt_n_posts: int = param(1500, doc="Check 2: synthetic posts", source="deviation: spec, 1,500")
    txt_n_seen: int = param(
        10, doc="Check 2: seen users (7 prefer longer, 3 shorter)", source="paper: 10 workers"
    )
    txt_train_per_user: int = param(
        400,
        doc="Check 2: training comparisons per seen user",
        source=(
            "deviation: 400; at 100 PAL-B memorised posts (0.99 on training pairs, 0.69 on test) "
            "and the seen users' weights never split into the two groups"
        ),
    )
    txt_test_per_user: int = param(50, doc="Check 2: test comparisons per user", source="deviation: 50")
    txt_n_unseen: int = param(20, doc="Check 2: unseen users", source="deviation: 20")
    txt_shots: tuple[int, ...] = param(
        (2, 5, 10), doc="Check 2: training comparisons per unseen user (10 gates)", source="paper: n <= 10"
    )
    txt_noise: float = param(0.05, doc="Check 2: label-flip probability", source="deviation: 5%")
    txt_dim: int = param(256, doc="Check 2: hashed n-gram embedding dimension", source="deviation: CPU scale")
    txt_d_pref: int = param(64, doc="Check 2: d_pref of PAL-B", source="deviation: spec 64-128")
    txt_epochs: int = param(
        4,
        doc="Check 2: training epochs of PAL-B, K = 1, the shuffled control and the unconstrained arm",
        source="deviation: 4 epochs of 400 comparisons per user (paper: 1 epoch of a far larger set)",
    )
    txt_batch_size: int = param(
        64,
        doc="Check 2: comparisons per step of PAL-B, K = 1, the shuffled control and the unconstrained arm",
        source="deviation: 64 (paper: PAL-B batch 4); 250 steps instead of the 120 of batch 256",
    )
    txt_lr_projector: float = param(
        1e-3,
        doc="Check 2: Adam lr of the projectors (PAL-B, K = 1, shuffled control, unconstrained)",
        source="deviation: 1e-3 (paper: 1e-4) for the few steps of a CPU run",
    )
    txt_lr_user: float = param(
        5e-2,
        doc="Check 2: Adam lr of P, W and free ideal points (PAL-B, K = 1, shuffled control, unconstrained)",
        source="deviation: 5e-2 (paper: 5e-3) for the few steps of a CPU run",
    )
    txt_minilm_posts: int = param(
        100,
        doc="Check 2 on MiniLM: posts of the small summary-length world embedded with MiniLM",
        source="deviation: a subset; MiniLM encodes about 25 texts/s on one CPU thread",
    )
    txt_minilm_train_per_user: int = param(
        100, doc="Check 2 on MiniLM: training comparisons per seen user", source="deviation: subset"
    )
    txt_minilm_test_per_user: int = param(
        30, doc="Check 2 on MiniLM: test comparisons per user", source="deviation: subset"
    )
    txt_minilm_cache: str = param(
        "",
        doc="folder of the on-disk MiniLM embedding cache ('' = the user cache folder, 'off' = none)",
        source="deviation: one .npy per text, keyed by a hash of the text and the model",
    )
    mlp_hidden: int = param(
        1024, doc="Check 2: hidden width of the large MLP reward model", source="deviation: 1024"
    )
    new_user_steps: int = param(
        200, doc="full-batch steps when fitting new users' W", source="deviation: tiny n"
    )
    batch_size: int = param(
        256,
        doc="Check 1: comparisons per step for PAL-A and the unconstrained baseline on seen users",
        source="deviation: CPU speed; 4x the steps of batch 64 cost the same final training loss",
    )
    lr_projector: float = param(
        2e-3,
        doc="Check 1: Adam lr of the projectors (PAL-A and unconstrained)",
        source="deviation: 2x for batch 256 (paper: 1e-4)",
    )
    lr_user: float = param(
        0.1,
        doc="Check 1: Adam lr of P, W and free ideal points on seen users",
        source="deviation: 2x for batch 256 (paper: 5e-3)",
    )
    mlp_epochs: int = param(15, doc="Check 2: epochs of the large MLP", source="deviation: CPU speed")
    mlp_batch_size: int = param(
        128,
        doc="Check 2: batch size of the large MLP",
        source="deviation: CPU speed; same training accuracy as 30 epochs at batch 64",
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, int) and not isinstance(v, bool) and v < 1:
                raise ValueError(f"{f.name} must be >= 1, got {v}")
        if not self.ip_shots or not self.txt_shots or min(self.ip_shots + self.txt_shots) < 1:
            raise ValueError("ip_shots and txt_shots must be non-empty tuples of positive ints")
        if 5 not in self.ip_shots or 20 not in self.ip_shots:
            raise ValueError("ip_shots must contain 5 and 20 (the n = 5 and n = 20 rules)")
        if 10 not in self.txt_shots:
            raise ValueError("txt_shots must contain 10 (the n = 10 rule)")
        if not 0.5 < self.ip_bayes < 1.0:
            raise ValueError(f"ip_bayes must be in (0.5, 1), got {self.ip_bayes}")
        if not 0.0 <= self.txt_noise < 0.5:
            raise ValueError(f"txt_noise must be in [0, 0.5), got {self.txt_noise}")
        if self.lr_projector <= 0 or self.lr_user <= 0:
            raise ValueError(f"lr_projector and lr_user must be > 0, got {self.lr_projector}, {self.lr_user}")
        if self.txt_lr_projector <= 0 or self.txt_lr_user <= 0:
            raise ValueError(
                "txt_lr_projector and txt_lr_user must be > 0, "
                f"got {self.txt_lr_projector}, {self.txt_lr_user}"
            )
        if self.ip_alpha <= 0:
            raise ValueError(f"ip_alpha must be > 0, got {self.ip_alpha}")
