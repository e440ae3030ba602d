"""CLIP-style teachers: a wrapper over any open_clip model, its zero-shot head, and tiny teachers
trained contrastively on the shapes world and cached on disk.

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Wei et al.,
ICLR 2025. The zero-shot head is the CLIP classifier the paper distils from (Sec. 3): logits
s * cos(f_I(x), t_c) with the teacher's logit scale s and t_c the renormalised mean of the class's
template embeddings.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.clip_dfkd.config import TeacherConfig

__all__ = [
    "TASK_COLORS",
    "TASK_SHAPES",
    "TEST_STYLES",
    "CLIPTeacher",
    "ZeroShotClassifier",
    "build_tiny_clip",
    "check_images",
    "check_names",
    "default_cache_dir",
    "load_open_clip_teacher",
    "load_or_train_teacher",
    "load_shipped_teacher",
    "multi_positive_clip_loss",
    "pretrain_teacher",
    "real_renders",
    "require_teacher",
    "teacher_world",
    "tokenizer_for",
    "train_teacher",
    "zero_shot_accuracy",
]

#: The shapes and colours of the teachers' world; the task's classes are the shapes.
TASK_SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "hexagon", "cross")
TASK_COLORS: tuple[str, ...] = ("red", "green", "blue", "yellow")


def check_images(x: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``x`` is a float (N, 3, H, W) batch in [0, 1]."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"images must have shape (N, 3, H, W), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"images must be floating point in [0, 1], got {x.dtype}")
    if x.numel() and (float(x.min()) < 0.0 or float(x.max()) > 1.0):
        raise ValueError(f"images must lie in [0, 1], got range [{float(x.min()):.3g}, {float(x.max()):.3g}]")


def check_names(names: Sequence[str], what: str = "class names") -> None:
    """Raise ``ValueError`` on an empty list, an empty name or a repeated name."""
    if len(names) == 0:
        raise ValueError(f"{what} must not be empty")
    if any(not isinstance(n, str) or not n.strip() for n in names):
        raise ValueError(f"{what} must be non-empty strings, got {list(names)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be distinct, got {list(names)}")


class CLIPTeacher(nn.Module):
    """A frozen CLIP-style model seen through images in [0, 1] and plain strings.

    Wraps any object with ``encode_image``, ``encode_text`` and ``logit_scale`` (open_clip's
    ``CLIP``) and a tokenizer callable (``open_clip.SimpleTokenizer``). Images are normalised with
    the teacher's own mean and std here, after the parameterisation maps to [0, 1].

    Args:
        model: the CLIP model.
        tokenizer: ``tokenizer(list_of_str) -> LongTensor (n, context_length)``.
        mean: per-channel input mean of the teacher (the default 0.5 is the project's tiny
            teachers'; a pretrained model has its own: use :meth:`from_open_clip` or
            :meth:`from_transformers`, which read it from the model).
        std: per-channel input std of the teacher (the default 0.25 is the tiny teachers').

    Raises:
        TypeError: ``model`` lacks ``encode_image``, ``encode_text`` or ``logit_scale`` (a
            transformers ``CLIPModel`` goes through :meth:`from_transformers`).

    Example:
        >>> t = CLIPTeacher(build_tiny_clip(TeacherConfig()), tokenizer_for(TeacherConfig()))
        >>> t.encode_image(torch.rand(2, 3, 32, 32)).shape, t.encode_text(["a star"]).shape
        (torch.Size([2, 32]), torch.Size([1, 32]))
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Callable[[list[str]], torch.Tensor],
        *,
        mean: Sequence[float] = (0.5, 0.5, 0.5),
        std: Sequence[float] = (0.25, 0.25, 0.25),
    ) -> None:
        super().__init__()
        _require_clip_interface(model, "CLIPTeacher")
        self.model = model
        self.tokenizer = tokenizer
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1))
        self.freeze()

    @classmethod
    def from_open_clip(cls, model: nn.Module, tokenizer: Callable[[list[str]], torch.Tensor]) -> CLIPTeacher:
        """Wrap an open_clip ``CLIP`` with its own input normalisation.

        The mean and std are ``model.visual.image_mean`` / ``image_std`` (set by
        ``open_clip.create_model``), else the OpenAI CLIP values open_clip defaults to.

        Raises:
            TypeError: ``model`` lacks ``encode_image`` / ``encode_text`` / ``logit_scale``.
        """
        import open_clip

        _require_clip_interface(model, "an open_clip CLIP")
        visual = getattr(model, "visual", None)
        mean = getattr(visual, "image_mean", None) or open_clip.OPENAI_DATASET_MEAN
        std = getattr(visual, "image_std", None) or open_clip.OPENAI_DATASET_STD
        return cls(model, tokenizer, mean=tuple(mean), std=tuple(std))

    @classmethod
    def from_transformers(cls, model: nn.Module, processor: Any) -> CLIPTeacher:
        """Wrap a Hugging Face ``transformers`` ``CLIPModel`` and its processor.

        The normalisation is ``processor.image_processor.image_mean`` / ``image_std``; prompts go
        through ``processor.tokenizer`` (padded, ``input_ids`` kept). The images are passed to the
        model at the size they come in (the caller resizes to the model's ``image_size``).

        Args:
            model: a ``CLIPModel`` (``get_image_features``, ``get_text_features``, ``logit_scale``).
            processor: a ``CLIPProcessor`` or any object with ``image_processor`` and ``tokenizer``.

        Raises:
            TypeError: the model or the processor lacks what is needed.
        """
        for attr in ("get_image_features", "get_text_features", "logit_scale"):
            if not hasattr(model, attr):
                raise TypeError(f"from_transformers needs a transformers CLIPModel; {type(model).__name__} "
                                f"has no {attr!r}")  # fmt: skip
        image_processor = getattr(processor, "image_processor", None)
        text_tokenizer = getattr(processor, "tokenizer", None)
        mean = getattr(image_processor, "image_mean", None)
        std = getattr(image_processor, "image_std", None)
        if mean is None or std is None or text_tokenizer is None:
            raise TypeError(
                "from_transformers needs a processor with image_processor.image_mean / image_std and a "
                f"tokenizer; got {type(processor).__name__}"
            )

        def tokenize(texts: list[str]) -> torch.Tensor:
            out = text_tokenizer(texts, padding=True, return_tensors="pt")
            return out if isinstance(out, torch.Tensor) else out["input_ids"]

        return cls(_TransformersCLIP(model), tokenize, mean=tuple(mean), std=tuple(std))

    def freeze(self) -> CLIPTeacher:
        """Eval mode (BN statistics and dropout frozen) and no parameter gradients."""
        self.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        return self

    @property
    def logit_scale(self) -> float:
        """s: the teacher's (exponentiated) logit scale."""
        return float(self.model.logit_scale.exp())

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised image embeddings of images in [0, 1], on the teacher's device.

        Shape: (N, 3, H, W) -> (N, D).
        """
        return self.model.encode_image((x.to(self.mean.device) - self.mean) / self.std)

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """L2-normalised text embeddings (no gradients). Shape: (len(texts), D)."""
        device = self.mean.device
        return F.normalize(self.model.encode_text(self.tokenizer(list(texts)).to(device)), dim=-1)


def _features(out: Any) -> torch.Tensor:
    """transformers 5 returns a model output whose ``pooler_output`` holds the projected features."""
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if not isinstance(pooled, torch.Tensor):
        raise TypeError(
            f"expected a feature tensor or an output with pooler_output, got {type(out).__name__}"
        )
    return pooled


class _TransformersCLIP(nn.Module):
    """open_clip's interface (``encode_image``, ``encode_text``, ``logit_scale``) over a ``CLIPModel``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.clip = model
        self.logit_scale = model.logit_scale

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        return _features(self.clip.get_image_features(pixel_values=x))

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        return _features(self.clip.get_text_features(input_ids=ids))


def _require_clip_interface(model: object, what: str) -> None:
    missing = [a for a in ("encode_image", "encode_text", "logit_scale") if not hasattr(model, a)]
    if missing:
        raise TypeError(
            f"{what} needs encode_image, encode_text and logit_scale; {type(model).__name__} lacks "
            f"{', '.join(missing)} (wrap a transformers CLIPModel with CLIPTeacher.from_transformers)"
        )


def require_teacher(teacher: object) -> CLIPTeacher:
    """``teacher`` if it is a :class:`CLIPTeacher`, else a TypeError that says how to wrap it."""
    if isinstance(teacher, CLIPTeacher):
        return teacher
    raise TypeError(
        f"expected a CLIPTeacher, got {type(teacher).__name__}: wrap the model first, e.g. "
        "CLIPTeacher.from_open_clip(model, tokenizer) for open_clip or "
        "CLIPTeacher.from_transformers(model, processor) for a transformers CLIPModel"
    )


class ZeroShotClassifier(nn.Module):
    """The teacher's zero-shot head: logits s * cos(f_I(x), t_c).

    t_c is the mean of the normalised embeddings of ``template.format(name)`` over ``templates``,
    renormalised (CLIP's prompt ensembling). Class order follows ``class_names``.

    Args:
        teacher: the frozen teacher.
        class_names: the task's class names.
        templates: prompt templates with one ``{}`` slot.

    Shape:
        images (N, 3, H, W) in [0, 1] -> logits (N, len(class_names)).
    """

    def __init__(
        self, teacher: CLIPTeacher, class_names: Sequence[str], templates: Sequence[str] = ("a {}",)
    ) -> None:
        super().__init__()
        check_names(class_names)
        if not templates or any("{}" not in t for t in templates):
            raise ValueError(f"templates need one '{{}}' slot each, got {list(templates)}")
        self.teacher = teacher
        self.class_names = tuple(class_names)
        emb = torch.stack(
            [teacher.encode_text([t.format(c) for t in templates]) for c in class_names]
        )  # (C, T, D)
        self.register_buffer("text_features", F.normalize(emb.mean(1), dim=-1))  # (C, D)

    def logits_from_features(self, v: torch.Tensor) -> torch.Tensor:
        """Logits from image embeddings (normalised here). Shape: (N, D) -> (N, C)."""
        return self.teacher.logit_scale * F.normalize(v, dim=-1) @ self.text_features.T

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits_from_features(self.teacher.encode_image(images))


# ---------------------------------------------------------------------------------------------
# tiny teachers
# ---------------------------------------------------------------------------------------------


def build_tiny_clip(cfg: TeacherConfig) -> nn.Module:
    """An untrained open_clip ``CLIP`` from a custom config (``pretrained=None``; nothing downloads).

    The ViT has LayerNorm only; the ModifiedResNet has BatchNorm in every conv block.
    """
    from open_clip.model import CLIP

    if cfg.arch == "vit":
        vision = {
            "image_size": cfg.image_size,
            "layers": cfg.vision_layers,
            "width": cfg.vision_width,
            "patch_size": cfg.patch_size,
            "head_width": 32,
            "pool_type": "avg",
        }
    else:
        vision = {
            "image_size": cfg.image_size,
            "layers": [cfg.vision_layers] * 4,
            "width": cfg.vision_width,
            "head_width": cfg.vision_width,
        }
    text = {
        "context_length": cfg.context_length,
        "vocab_size": 49408,
        "width": cfg.text_width,
        "heads": 2,
        "layers": cfg.text_layers,
    }
    return CLIP(embed_dim=cfg.embed_dim, vision_cfg=vision, text_cfg=text)


def tokenizer_for(cfg: TeacherConfig) -> Callable[[list[str]], torch.Tensor]:
    """open_clip's BPE tokenizer (its vocabulary ships inside the package) at the config's length."""
    from open_clip import SimpleTokenizer

    return SimpleTokenizer(context_length=cfg.context_length)


def teacher_world(
    cfg: TeacherConfig, *, styles: Sequence[str] | None = None, distractor_p: float | None = None
) -> Any:
    """The shapes world of the teachers and the task: 6 shapes x 4 colours, given render styles."""
    from iclr25.common.data.shapes_world import DistractorConfig, ShapesWorld, WorldConfig
    from iclr25.common.data.shapes_world.vocab import STYLES

    p = cfg.distractor_p if distractor_p is None else distractor_p
    wc = WorldConfig(
        image_size=cfg.image_size,
        shapes=TASK_SHAPES,
        colors=TASK_COLORS,
        styles=tuple(styles or STYLES),
        distractor=DistractorConfig(p=p),
    )
    return ShapesWorld(wc, seed=cfg.seed)


def multi_positive_clip_loss(
    img: torch.Tensor, txt: torch.Tensor, pos: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """Symmetric CLIP loss where a caption may match several images (its words fit each of them).

    Each row's target spreads uniformly over its positives: image i -> every caption consistent with
    it, caption j -> every image it describes (the standard InfoNCE when ``pos`` is the identity).

    Shape:
        img (B, D), txt (B, D) normalised; pos (B, B) bool, pos[i, j] = caption j fits image i.
    """
    logits = scale * img @ txt.T  # (B, B)
    target = pos.float()
    i2t = -(target / target.sum(1, keepdim=True) * logits.log_softmax(1)).sum(1).mean()
    t2i = -(target / target.sum(0, keepdim=True) * logits.log_softmax(0)).sum(0).mean()
    return (i2t + t2i) / 2


def _captions(attrs: list[Any], rng: np.random.Generator, p_drop: float) -> tuple[list[str], np.ndarray]:
    """Captions "a [style] [colour] shape" with the style and colour words dropped at random, and
    the (style or None, colour or None, shape) that each caption mentions."""
    from iclr25.common.data.shapes_world.vocab import STYLE_WORDS

    texts, said = [], []
    for a in attrs:
        style = STYLE_WORDS[a.style] if rng.random() >= p_drop else None
        color = a.color if rng.random() >= p_drop else None
        texts.append(" ".join(w for w in ("a", style, color, a.shape) if w))
        said.append((style, color, a.shape))
    return texts, np.array(said, dtype=object)


def _caption_targets(
    attrs: list[Any], rng: np.random.Generator, p_drop: float
) -> tuple[list[str], torch.Tensor]:
    """Captions of a batch and the (B, B) matrix ``pos[i, j]``: caption j fits image i."""
    from iclr25.common.data.shapes_world.vocab import STYLE_WORDS

    texts, said = _captions(attrs, rng, p_drop)
    img_style = np.array([STYLE_WORDS[a.style] for a in attrs], dtype=object)
    img_color = np.array([a.color for a in attrs], dtype=object)
    img_shape = np.array([a.shape for a in attrs], dtype=object)
    pos = (
        (img_shape[:, None] == said[None, :, 2])
        & ((said[None, :, 0] == None) | (img_style[:, None] == said[None, :, 0]))  # noqa: E711
        & ((said[None, :, 1] == None) | (img_color[:, None] == said[None, :, 1]))  # noqa: E711
    )
    return texts, torch.from_numpy(pos.astype(bool))


def _contrastive_loss(
    teacher: CLIPTeacher, images: torch.Tensor, attrs: list[Any], rng: np.random.Generator, p_drop: float
) -> torch.Tensor:
    """The multi-positive CLIP loss of one batch of images in [0, 1] and fresh captions."""
    model = teacher.model
    texts, pos = _caption_targets(attrs, rng, p_drop)
    v = F.normalize(model.encode_image((images - teacher.mean) / teacher.std), dim=-1)
    t = F.normalize(model.encode_text(teacher.tokenizer(texts)), dim=-1)
    return multi_positive_clip_loss(v, t, pos, model.logit_scale.exp().clamp(max=100))


def _trainable(cfg: TeacherConfig) -> CLIPTeacher:
    """A fresh teacher of ``cfg`` (seeded initialisation) with its parameters trainable."""
    with torch.random.fork_rng():  # open_clip initialises from the global RNG; leave it untouched
        torch.manual_seed(cfg.seed)
        model = build_tiny_clip(cfg)
    teacher = CLIPTeacher(model, tokenizer_for(cfg))
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    return teacher


def train_teacher(cfg: TeacherConfig, *, progress: ProgressFn = no_progress) -> CLIPTeacher:
    """Train a tiny CLIP contrastively on shapes-world images with style-bearing captions.

    Captions say "a striped red star" with the style and colour words each dropped with
    probability ``p_drop`` (so "a star" and "a striped star" are in-distribution prompts); a caption
    is a positive of every image of the batch it describes. Deterministic given ``cfg.seed``.
    """
    teacher = _trainable(cfg)
    model = teacher.model
    world = teacher_world(cfg)
    X = np.empty((cfg.n_images, cfg.image_size, cfg.image_size, 3), dtype=np.uint8)
    attrs = []
    for i in range(cfg.n_images):
        X[i], _, a = world.single_object(i, split="train")
        attrs.append(a)
        if i % 500 == 0:
            progress("teacher data", i, cfg.n_images)
    images = torch.from_numpy(X).permute(0, 3, 1, 2).float() / 255.0  # (N, 3, H, W)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    steps_per_epoch = cfg.n_images // cfg.batch_size
    total = cfg.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=total, pct_start=0.1)
    step = 0
    for _ in range(cfg.epochs):
        order = torch.randperm(cfg.n_images, generator=gen)
        for b in range(steps_per_epoch):
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            loss = _contrastive_loss(teacher, images[idx], [attrs[int(i)] for i in idx], rng, cfg.p_drop)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 20 == 0:
                progress(f"teacher {cfg.arch} loss {float(loss):.3f}", step, total)
    return teacher.freeze()


#: The styles of the task's real renders: the six training styles, then the held-out one.
TEST_STYLES: tuple[str, ...] = ("filled", "outline", "striped", "dotted", "noisy", "blurred", "checkered")


def real_renders(
    cfg: TeacherConfig,
    *,
    per_style: int,
    split: str,
    start: int,
    n_classes: int = len(TASK_SHAPES),
    styles: Sequence[str] = TEST_STYLES,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Real renders of the first ``n_classes`` shapes, without the distractor, ``per_style`` per style.

    Returns:
        images (N, 3, H, W) in [0, 1], shape labels (N,), style index into ``styles`` (N,).
    """
    xs, ys, ss = [], [], []
    for k, style in enumerate(styles):
        world = teacher_world(cfg, styles=(style,), distractor_p=0.0)
        got, i = 0, start
        while got < per_style:  # keep the task's classes only
            x, label, _ = world.single_object(i, split=split, label_scheme="shape")
            i += 1
            if label < n_classes:
                xs.append(x)
                ys.append(label)
                ss.append(k)
                got += 1
    images = torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).float() / 255.0
    return images, torch.tensor(ys), torch.tensor(ss)


def zero_shot_accuracy(
    teacher: CLIPTeacher, images: torch.Tensor, labels: torch.Tensor, style: torch.Tensor
) -> float:
    """The zero-shot head's accuracy ("a {shape}"), the mean over styles of each style's accuracy."""
    head = ZeroShotClassifier(teacher, TASK_SHAPES[: int(labels.max()) + 1])
    with torch.no_grad():
        hit = (head(images).argmax(1) == labels).float()
    return float(torch.stack([hit[style == k].mean() for k in style.unique()]).mean())


def pretrain_teacher(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of the shipped teacher (:class:`~iclr25.methods.clip_dfkd.config.TeacherRecipe`).

    Trains the tiny BatchNorm CLIP of ``TeacherRecipe().teacher`` on a stream of fresh
    image-caption pairs (80 % of images carry the distractor) and writes ``config.json`` (the
    :class:`TeacherConfig`), ``model.safetensors`` and ``training.json`` (every step's loss, the
    zero-shot accuracy on real renders of the seven styles every ``eval_every`` steps, and the
    final zero-shot accuracy on a larger held-out set). An unfinished run checkpoints into ``out``
    at every reading and resumes from there when called again.

    Args:
        out: the folder to write.
        progress: called every 50 steps, and at each reading.
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """
    from safetensors.torch import save_file

    from iclr25._core.pretrained import RecipeRun
    from iclr25.methods.clip_dfkd.config import TeacherRecipe

    recipe = TeacherRecipe()
    cfg = recipe.teacher
    run = RecipeRun(out, replay=max_steps is not None)
    teacher = _trainable(cfg)
    model = teacher.model
    world = teacher_world(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)

    def lr_at(step: int) -> float:  # linear warm-up, then cosine decay to zero
        if step < recipe.warmup:
            return (step + 1) / recipe.warmup
        return 0.5 * (1 + math.cos(math.pi * (step - recipe.warmup) / (recipe.steps - recipe.warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    evals = real_renders(cfg, per_style=recipe.eval_per_style, split="val", start=0)
    losses: list[float] = []
    curve: list[tuple[int, float]] = []
    if run.state is not None:
        model.load_state_dict(run.state["model"])
        opt.load_state_dict(run.state["opt"])
        sched.load_state_dict(run.state["sched"])
        losses, curve = list(run.state["losses"]), [tuple(c) for c in run.state["curve"]]
    stop = recipe.steps if max_steps is None else min(max_steps, recipe.steps)
    for step in range(len(losses), stop):
        first = step * recipe.batch_size
        pairs = [world.single_object(first + j, split="train") for j in range(recipe.batch_size)]
        images = torch.from_numpy(np.stack([p[0] for p in pairs])).permute(0, 3, 1, 2).float() / 255.0
        rng = np.random.default_rng([cfg.seed, step])  # the captions' word drops, per step
        loss = _contrastive_loss(teacher, images, [p[2] for p in pairs], rng, cfg.p_drop)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % 50 == 0:
            progress(f"teacher loss {np.mean(losses[-50:]):.3f}", step + 1, recipe.steps)
        if max_steps is None and ((step + 1) % recipe.eval_every == 0 or step + 1 == recipe.steps):
            model.eval()
            curve.append((step + 1, zero_shot_accuracy(teacher, *evals)))
            model.train()
            progress(f"teacher zero-shot {curve[-1][1]:.3f}", step + 1, recipe.steps)
            run.checkpoint(
                {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                 "losses": losses, "curve": curve}
            )  # fmt: skip
    if max_steps is not None:
        return losses
    teacher.freeze()
    final = real_renders(cfg, per_style=200, split="test", start=10**6)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))
    run.finish(
        command=f"iclr25 pretrain clip_dfkd teacher_bn --out {out}",
        loss_curve=losses,
        quality={"zero_shot_accuracy": zero_shot_accuracy(teacher, *final)},
        zero_shot_curve=[{"step": s, "zero_shot_accuracy": a} for s, a in curve],
        data=f"shapes world seed {cfg.seed}, split 'train': {recipe.steps * recipe.batch_size} fresh "
        f"image-caption pairs, distractor in {cfg.distractor_p:.0%} of images; zero-shot readings "
        f"on split 'val' ({recipe.eval_per_style} per style), the final one on split 'test' "
        "(200 per style, seven styles, no distractor)",
        config=asdict(recipe),
    )
    return losses


def load_shipped_teacher(directory: str | os.PathLike[str] | None = None) -> CLIPTeacher:
    """The shipped BatchNorm teacher (or one written by ``iclr25 pretrain clip_dfkd teacher_bn``).

    Raises:
        ArtefactMissingError: the folder lacks a file; the message names the command to train it.
    """
    from safetensors.torch import load_file

    from iclr25._core.pretrained import artefact_dir, require_artefact

    d = require_artefact(
        directory or artefact_dir("clip_dfkd", "teacher_bn"), method="clip_dfkd", name="teacher_bn"
    )
    cfg = TeacherConfig(**json.loads((d / "config.json").read_text()))
    model = build_tiny_clip(cfg)
    model.load_state_dict(load_file(str(d / "model.safetensors")))
    return CLIPTeacher(model, tokenizer_for(cfg))


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/iclr25/clip_dfkd`` or ``~/.cache/iclr25/clip_dfkd``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "iclr25" / "clip_dfkd"


def _cache_key(cfg: TeacherConfig) -> str:
    import open_clip

    from iclr25.common.data.shapes_world import GENERATOR_VERSION

    blob = json.dumps(
        {
            "cfg": asdict(cfg),
            "world": GENERATOR_VERSION,
            "open_clip": open_clip.__version__,
            "torch": torch.__version__.split("+")[0],
            "v": 1,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_or_train_teacher(
    cfg: TeacherConfig, *, cache_dir: Path | None = None, progress: ProgressFn = no_progress
) -> CLIPTeacher:
    """The tiny teacher of ``cfg``: loaded from ``cache_dir`` (keyed by a hash of the config, the
    world's generator version and the library versions) or trained and saved there."""
    from safetensors.torch import load_file, save_file

    path = (cache_dir or default_cache_dir()) / f"teacher-{cfg.arch}-{_cache_key(cfg)}.safetensors"
    if path.exists():
        model = build_tiny_clip(cfg)
        model.load_state_dict(load_file(str(path)))
        return CLIPTeacher(model, tokenizer_for(cfg))
    teacher = train_teacher(cfg, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    save_file({k: v.contiguous() for k, v in teacher.model.state_dict().items()}, str(tmp))
    os.replace(tmp, path)
    return teacher


def load_open_clip_teacher(model_name: str, checkpoint: str | os.PathLike[str]) -> CLIPTeacher:
    """A paper-scale teacher (e.g. ``"ViT-B-32"`` or ``"RN50"``) from a local open_clip checkpoint.

    Nothing is downloaded: the path must exist, and the OpenAI-style models use open_clip's
    bundled BPE tokenizer. Inputs are normalised with the OpenAI CLIP mean and std.

    Raises:
        FileNotFoundError: the checkpoint path does not exist.
    """
    import open_clip

    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"no open_clip checkpoint at {path}")
    model = open_clip.create_model(model_name, pretrained=str(path))
    return CLIPTeacher.from_open_clip(model, open_clip.get_tokenizer(model_name))
