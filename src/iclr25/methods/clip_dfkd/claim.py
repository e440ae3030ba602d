"""Claim check of CLIP-DFKD: text-driven inversion (SDD + CCM) with meta-KD customises a student
that clearly beats BN-statistics and plain text-inversion baselines on the real test distribution.

The teacher is the shipped tiny CLIP with BatchNorm (a ModifiedResNet trained contrastively on
shapes-world image-caption pairs whose images carry a face-like distractor 80 % of the time, so its
BN statistics are confounded, the analogue of CLIP's people-heavy web data). The task is the six
shape classes, any colour or style. Every inversion arm synthesises the same 1,152 images with the
same parameterisation, augmentations and step budget; every student arm distils the teacher's
zero-shot head into the same student with the same 1,440 steps. Accuracy is measured on real test
renders in the six training styles and the held-out "checkered" style (equal weight per style);
validation renders give the learning curves and pick the best baseline.

Preconditions: the teacher's zero-shot accuracy is at least 0.85; a real-data oracle (the same
student, KD on as many real renders) comes within 10 points of the teacher; every student arm
plateaued. Gate: the full method beats the best baseline (DeepInversion, CE-only inversion, plain
matching; chosen on validation) by 5 points; its falsifier, the same pipeline with style
diversification off, must miss that margin. Reported: whether a distractor detector flags
DeepInversion's images more than text-inverted ones, SDD on the held-out style, meta-KD against
plain KD, and full against DeepInversion. An untrained BN-free ViT shows that DeepInversion is
inapplicable without BatchNorm (the error is recorded in the notes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
    value,
)
from iclr25._core.config import param
from iclr25._core.convergence import converged, read_curve
from iclr25._core.media import MediaResult, Picture, image_grid
from iclr25.methods.clip_dfkd import (
    DEFAULT_STYLES,
    TASK_SHAPES,
    TEST_STYLES,
    CLIPTeacher,
    DistillConfig,
    InversionConfig,
    SyntheticSet,
    TeacherConfig,
    TinyResNet,
    ZeroShotClassifier,
    accuracy,
    build_tiny_clip,
    deep_inversion,
    distill,
    invert_dataset,
    load_shipped_teacher,
    real_renders,
    teacher_world,
    tokenizer_for,
)

__all__ = ["CLAIM", "ClaimConfig", "run"]

#: The test styles: the six training styles, then the held-out "checkered".
_TEST_STYLES: tuple[str, ...] = TEST_STYLES

#: Learning-curve readings are on the validation renders (7 styles x ``val_per_style``). An
#: accuracy on n images has standard error at most sqrt(0.25 / n); the plateau gap is a difference
#: of two readings of the same set, so its noise is at most sqrt(2 * 0.25 / n). At n = 420 that is
#: 0.035, and a gap within two such errors (0.07) is read as a plateau.
_EPSILON = 0.07


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the claim check."""

    shipped_teacher: bool = param(
        True,
        doc="the shipped BN teacher (pretrained/teacher_bn); False: an untrained one",
        source="deviation: smoke uses an untrained teacher",
    )
    teacher_bn: TeacherConfig = param(
        TeacherConfig.tiny("resnet"),
        doc="the BN teacher's architecture (the untrained one of smoke; renders' world)",
        source="deviation: tiny RN50 analogue",
    )
    teacher_vit: TeacherConfig = param(
        TeacherConfig.tiny("vit"),
        doc="the BN-free teacher, untrained: only shows DeepInversion is inapplicable",
        source="deviation: tiny ViT-B/32 analogue",
    )
    n_classes: int = param(6, doc="task classes (the first shapes)", source="deviation: one 6-way task")
    inversion: InversionConfig = param(
        InversionConfig.tiny().replace(images_per_class=192, steps=40),
        doc="Stage 1 of every inversion arm (1,152 images)",
        source="deviation: CPU scale (paper 64 per class, 400 steps)",
    )
    distill: DistillConfig = param(
        DistillConfig(epochs=40, warmup_epochs=20, batch_size=32),
        doc="Stage 2 of every arm: 40 epochs of 36 batches = 1,440 student steps",
        source="deviation: CPU scale (the real-data oracle learns the task at this size)",
    )
    di_bn_weight: float = param(1.0, doc="weight of DeepInversion's BN loss", source="deviation: unstated")
    test_per_style: int = param(
        100, doc="real test renders per style (7 styles)", source="deviation: CPU scale"
    )
    val_per_style: int = param(
        60,
        doc="real validation renders per style: learning curves and the choice of best baseline",
        source="deviation: CPU scale",
    )
    detector_per_style: int = param(
        40,
        doc="real renders per style and per condition (with / without distractor) to train the detector",
        source="deviation: CPU scale",
    )
    detector_epochs: int = param(15, doc="epochs of the distractor detector", source="deviation: CPU scale")


_LONG = ClaimConfig()
#: A third of the long bed: 64 images per class (the paper's count) and 480 student steps; the
#: real-data oracle decides whether the task can be learnt at this size.
_FULL = ClaimConfig(
    inversion=InversionConfig.tiny().replace(images_per_class=64, steps=40),
    distill=DistillConfig(epochs=40, warmup_epochs=20, batch_size=32),
)
_SMOKE = ClaimConfig(
    shipped_teacher=False,
    n_classes=2,
    inversion=InversionConfig.tiny().replace(images_per_class=4, steps=5, batch_size=8),
    distill=DistillConfig(epochs=2, warmup_epochs=1, batch_size=4),
    test_per_style=6,
    val_per_style=4,
    detector_per_style=2,
    detector_epochs=1,
)


def _teacher(cfg: ClaimConfig) -> CLIPTeacher:
    if cfg.shipped_teacher:
        return load_shipped_teacher()
    with torch.random.fork_rng():
        torch.manual_seed(cfg.teacher_bn.seed)
        return CLIPTeacher(build_tiny_clip(cfg.teacher_bn), tokenizer_for(cfg.teacher_bn))


class _Eval:
    """Accuracy of a classifier on real renders: per style, seen styles, held-out, all."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, style: torch.Tensor) -> None:
        self.images, self.labels, self.style = images, labels, style

    def __call__(self, model: torch.nn.Module) -> dict[str, float]:
        per = [
            accuracy(model, self.images[self.style == k], self.labels[self.style == k])
            for k in range(len(_TEST_STYLES))
        ]
        return {"acc": float(np.mean(per)), "acc_seen": float(np.mean(per[:-1])), "acc_heldout": per[-1]}


def _distractor_detector(cfg: ClaimConfig, seed: int, progress: ProgressFn) -> tuple[torch.nn.Module, float]:
    """A small CNN told real renders with the face-like distractor from the same renders without.

    Trained on ``detector_per_style`` renders per style and condition (split "train"), read on as
    many held-out renders (split "val"). Returns the detector (eval mode) and its held-out accuracy.
    """

    def renders(split: str, start: int, p: float) -> torch.Tensor:
        xs = []
        for style in _TEST_STYLES[:-1]:
            world = teacher_world(cfg.teacher_bn, styles=(style,), distractor_p=p)
            xs += [world.single_object(start + i, split=split)[0] for i in range(cfg.detector_per_style)]
        return torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).float() / 255.0

    def both(split: str, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        with_d, without = renders(split, start, 1.0), renders(split, start, 0.0)
        y = torch.cat([torch.ones(len(with_d)), torch.zeros(len(without))]).long()
        return torch.cat([with_d, without]), y

    x, y = both("train", 300_000 + seed * 10_000)
    xv, yv = both("val", 300_000 + seed * 10_000)
    with torch.random.fork_rng():
        torch.manual_seed(seed * 1000 + 900)
        net = TinyResNet(2)
    gen = torch.Generator().manual_seed(seed * 1000 + 901)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for epoch in range(cfg.detector_epochs):
        net.train()
        order = torch.randperm(len(y), generator=gen)
        for b in range(0, len(y), 32):
            idx = order[b : b + 32]
            loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        progress("distractor detector", epoch + 1, cfg.detector_epochs)
    net.eval()
    return net, accuracy(net, xv, yv)


@torch.no_grad()
def _flagged(detector: torch.nn.Module, images: torch.Tensor) -> float:
    """Share of ``images`` the detector calls distractor-bearing."""
    return float((detector(images).argmax(1) == 1).float().mean())


def run(cfg: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress) -> RunResult:
    """One seed: every arm's synthesis and distillation, real-render accuracy, the distractor part.

    The teacher and the students run on ``device``; every random draw (initial images, batch
    orders, augmentations) comes from CPU generators, and the image sets stay on the CPU. The
    distractor detector and the untrained ViT teacher are small and stay on the CPU.
    """
    t_start = time.perf_counter()
    classes = TASK_SHAPES[: cfg.n_classes]
    n_syn = cfg.inversion.images_per_class * cfg.n_classes
    tb = cfg.teacher_bn

    def renders(split: str, per: int, start: int, styles: tuple[str, ...] = _TEST_STYLES) -> tuple:
        return real_renders(
            tb, per_style=per, split=split, start=start, n_classes=cfg.n_classes, styles=styles
        )

    test = _Eval(*renders("test", cfg.test_per_style, seed * 10 * cfg.test_per_style))
    # validation renders (split "val", far from the teacher recipe's readings at 0..): curves and the
    # choice of the best baseline, never the test set
    val = _Eval(*renders("val", cfg.val_per_style, 200_000 + seed * 10 * cfg.val_per_style))
    m: dict[str, dict[str, float]] = {}
    curves: dict[str, list[float]] = {}
    synthetic: dict[str, SyntheticSet] = {}
    notes: list[str] = []

    teacher = _teacher(cfg).to(device)
    head = ZeroShotClassifier(teacher, classes, (cfg.inversion.class_template,))
    m["teacher_bn"] = test(head)

    def gen(k: int) -> torch.Generator:
        return torch.Generator().manual_seed(seed * 1000 + k)

    def syn_teacher_acc(s: SyntheticSet) -> float:
        with torch.no_grad():
            return float((head(s.images.to(device)).argmax(1).cpu() == s.labels).float().mean())

    def invert(arm: str, mode: str, k: int) -> SyntheticSet:
        t0 = time.perf_counter()
        s = invert_dataset(
            teacher,
            classes,
            image_size=tb.image_size,
            styles=DEFAULT_STYLES,
            config=cfg.inversion.replace(mode=mode),
            generator=gen(k),
            progress=progress,
        )
        synthetic[arm] = s
        m.setdefault(arm, {})["inv_s"] = time.perf_counter() - t0
        m[arm]["syn_teacher_acc"] = syn_teacher_acc(s)
        return s

    def student_arm(arm: str, data: SyntheticSet, meta: bool, k: int) -> None:
        t0 = time.perf_counter()
        with torch.random.fork_rng():
            torch.manual_seed(seed * 1000 + 500)  # every arm's student starts from the same weights
            net = TinyResNet(cfg.n_classes).to(device)
        curve: list[float] = []

        def on_epoch(epoch: int, model: torch.nn.Module) -> None:
            curve.append(val(model)["acc"])

        distill(
            head,
            net,
            data,
            config=cfg.distill.replace(meta=meta),
            generator=gen(100 + k),
            progress=progress,
            on_epoch=on_epoch,
        )
        reading = read_curve(range(1, len(curve) + 1), curve)
        m.setdefault(arm, {}).update(test(net))
        m[arm]["val_acc"] = curve[-1]
        m[arm]["plateau_gap"] = reading.plateau_gap
        m[arm]["kd_s"] = time.perf_counter() - t0
        curves[arm] = curve

    # the oracle first: KD on as many real training renders (six training styles, no distractor)
    per = max(1, n_syn // len(DEFAULT_STYLES))
    xr, yr, sr = renders("train", per, 100_000 + seed * per * 10, _TEST_STYLES[:-1])
    real = SyntheticSet(xr, yr, sr, DEFAULT_STYLES)
    student_arm("real_kd", real, meta=False, k=0)
    # the method, its same-set plain-KD twin, the control without style diversification
    full = invert("full", "sdd_ccm", 1)
    student_arm("full", full, meta=True, k=1)
    student_arm("kd_only", full, meta=False, k=2)
    m["kd_only"]["syn_teacher_acc"] = m["full"]["syn_teacher_acc"]
    student_arm("ctrl_no_sdd", invert("ctrl_no_sdd", "match_ccm", 3), meta=True, k=3)
    # baselines, each with plain KD (their papers distil plainly)
    student_arm("match", invert("match", "match", 4), meta=False, k=4)
    student_arm("ce_only", invert("ce_only", "ce", 5), meta=False, k=5)
    t0 = time.perf_counter()
    di = deep_inversion(
        teacher,
        classes,
        image_size=tb.image_size,
        images_per_class=cfg.inversion.images_per_class,
        steps=cfg.inversion.steps,
        lr=cfg.inversion.lr,
        bn_weight=cfg.di_bn_weight,
        tv_weight=cfg.inversion.tv_weight,
        batch_size=cfg.inversion.batch_size,
        base_size=cfg.inversion.base_size,
        init_std=cfg.inversion.init_std,
        generator=gen(6),
        progress=progress,
    )
    synthetic["deepinv"] = di
    m["deepinv"] = {"inv_s": time.perf_counter() - t0, "syn_teacher_acc": syn_teacher_acc(di)}
    student_arm("deepinv", di, meta=False, k=6)
    baselines = ("match", "ce_only", "deepinv")
    best = max(baselines, key=lambda a: m[a]["val_acc"])  # chosen on validation renders
    m["best_baseline"] = {key: m[best][key] for key in ("acc", "acc_seen", "acc_heldout", "val_acc")}
    m["best_baseline"]["which"] = float(baselines.index(best))
    notes.append(f"best baseline this seed (on validation renders): {best}")
    # the BN-free teacher (untrained: only its architecture matters here)
    with torch.random.fork_rng():
        torch.manual_seed(cfg.teacher_vit.seed)
        vit = CLIPTeacher(build_tiny_clip(cfg.teacher_vit), tokenizer_for(cfg.teacher_vit))
    try:
        deep_inversion(vit, classes, image_size=cfg.teacher_vit.image_size, images_per_class=1, steps=1)
    except ValueError as err:
        notes.append(f"DeepInversion on the ViT teacher: {err}")
    # the distractor part: is the face-like distractor measurable, and do DeepInversion's images show it?
    t0 = time.perf_counter()
    detector, det_acc = _distractor_detector(cfg, seed, progress)
    m["detector"] = {"acc": det_acc, "train_s": time.perf_counter() - t0}
    for arm in ("full", "deepinv"):
        m[arm]["distractor_share"] = _flagged(detector, synthetic[arm].images)
    m["real_kd"]["distractor_share"] = _flagged(detector, real.images)
    m["full"]["total_s"] = time.perf_counter() - t_start

    order = [
        a for a in ("full", "kd_only", "ctrl_no_sdd", "match", "ce_only", "deepinv", "real_kd") if a in m
    ]
    notes.append("accuracy-by-arm x positions: " + ", ".join(f"{i}={a}" for i, a in enumerate(order)))
    series = {
        "accuracy_by_arm": Series(
            title="Real-render accuracy by arm (x: "
            + ", ".join(f"{i} {a}" for i, a in enumerate(order))
            + ")",
            xlabel="arm",
            ylabel="accuracy (mean over 7 styles)",
            x=[float(i) for i in range(len(order))],
            lines={
                "all styles": [m[a]["acc"] for a in order],
                "held-out style": [m[a]["acc_heldout"] for a in order],
            },
            kind="bar",
        ),
        "learning_curves": Series(
            title="Student accuracy on the validation renders during distillation",
            xlabel="epoch",
            ylabel="validation accuracy",
            x=[float(i + 1) for i in range(len(curves["full"]))],
            lines={a: curves[a] for a in order if a in curves},
        ),
    }
    if cfg.shipped_teacher:
        series["teacher_curve"] = _teacher_curve()
    return MediaResult(
        metrics=m, series=series, notes=notes, media=_grids({**synthetic, "real_kd": real}, classes)
    )


def _teacher_curve() -> Series:
    """The shipped teacher's zero-shot curve during its training (from its ``training.json``)."""
    from iclr25._core.pretrained import artefact_dir, read_training

    curve = read_training(artefact_dir("clip_dfkd", "teacher_bn"))["zero_shot_curve"]
    return Series(
        title="The shipped teacher's zero-shot accuracy during its training (real renders, 7 styles)",
        xlabel="training step",
        ylabel="zero-shot accuracy",
        x=[float(c["step"]) for c in curve],
        lines={"teacher_bn": [float(c["zero_shot_accuracy"]) for c in curve]},
    )


#: Images per class in the report's grids.
_GRID_PER_CLASS = 6


def _grids(sets: dict[str, SyntheticSet], classes: tuple[str, ...]) -> dict[str, Picture]:
    """One picture per image set: a row per class (in ``classes`` order), its first images, 2x upscaled."""
    out = {}
    for arm, s in sets.items():
        rows = []
        for c in range(len(classes)):
            imgs = s.images[s.labels == c][:_GRID_PER_CLASS]
            rows += [_to_uint8(im) for im in imgs] + [_blank(s.images)] * (_GRID_PER_CLASS - len(imgs))
        what = (
            "real training renders (the oracle's data)"
            if arm == "real_kd"
            else f"synthetic images of `{arm}`"
        )
        out[f"grid_{arm}"] = Picture(
            f"{what}; rows: " + ", ".join(classes),
            image_grid(rows, ncols=_GRID_PER_CLASS),
        )
    return out


def _to_uint8(image: torch.Tensor) -> np.ndarray:
    """(3, H, W) in [0, 1] -> (2H, 2W, 3) uint8, nearest-neighbour upscaled."""
    arr = (image.detach().cpu().clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    return arr.repeat(2, axis=0).repeat(2, axis=1)


def _blank(images: torch.Tensor) -> np.ndarray:
    return np.full((2 * images.shape[2], 2 * images.shape[3], 3), 255, dtype=np.uint8)


_STUDENTS = ("real_kd", "full", "kd_only", "ctrl_no_sdd", "match", "ce_only", "deepinv")

_CRITERIA = (
    value(
        "teacher_bn.acc",
        ">=",
        0.85,
        name="teacher_zero_shot",
        precondition=True,
        explain="The test applies only if the shipped BN teacher's zero-shot head is accurate on the "
        "task's real test renders: at least 0.85 (chance 1/6), so that its students have something to learn.",
    ),
    diff(
        "real_kd.acc",
        "teacher_bn.acc",
        ">=",
        -0.10,
        name="real_data_oracle",
        precondition=True,
        part="students",
        explain="The bed can show the effect only if the same student, distilled from the same teacher "
        "with the same steps on as many REAL training renders, comes within 10 points of the teacher.",
    ),
    *(
        converged(
            arm,
            _EPSILON,
            part="students",
            explain=f"The {arm} student has plateaued: its validation accuracy (420 renders) moved at "
            f"most {_EPSILON} over the last fifth of distillation, two standard errors of a difference "
            "of two readings.",
        )
        for arm in _STUDENTS
    ),
    diff(
        "full.acc",
        "best_baseline.acc",
        ">=",
        0.05,
        name="beats_best_baseline",
        part="students",
        paper="+9.33 points average over DFKD baselines (12 tasks)",
        falsifier="ctrl_no_sdd",
        explain="The full method's student (SDD + CCM inversion, meta-KD) is at least 5 points more "
        "accurate on real test renders (7 styles, held-out included) than the best baseline, picked on "
        "validation renders among DeepInversion, CE-only inversion and plain matching, all distilling "
        "the same BN teacher under the same budget.",
    ),
    fails(
        diff(
            "ctrl_no_sdd.acc",
            "best_baseline.acc",
            ">=",
            0.05,
            name="ctrl_no_sdd",
            part="students",
            explain="Control: the same pipeline with style diversification off (class-prompt matching + "
            "CCM, meta-KD, equal compute) does not clear the same margin.",
        )
    ),
    value(
        "detector.acc",
        ">=",
        0.9,
        name="distractor_measurable",
        gating=False,
        part="distractor",
        explain="Reported: a small detector tells held-out real renders with the face-like distractor "
        "from renders without it at least 90 % of the time; the flagged shares below mean something "
        "only when it does. (Not a precondition: the judge applies every precondition to the overall "
        "verdict, and this reading must not block the headline.)",
    ),
    diff(
        "deepinv.distractor_share",
        "full.distractor_share",
        ">=",
        0.0,
        name="deepinv_shows_distractor",
        gating=False,
        part="distractor",
        paper="BN inversion of CLIP shows irrelevant content (Sec. 3)",
        explain="Reported: the share of DeepInversion's images the detector flags as distractor-bearing, "
        "against the text-inverted images of the full method.",
    ),
    diff(
        "full.acc_heldout",
        "ctrl_no_sdd.acc_heldout",
        ">=",
        0.02,
        name="sdd_heldout",
        gating=False,
        part="students",
        paper="SDD +4.2 % average",
        explain="Reported: SDD + CCM against matching + CCM (both meta-KD) on the held-out style.",
    ),
    diff(
        "full.acc",
        "kd_only.acc",
        ">=",
        -0.005,
        name="mkd_vs_kd",
        gating=False,
        part="students",
        paper="MKD +1.54 %",
        explain="Reported: meta-KD is not worse than plain KD on the same synthetic set (non-inferiority).",
    ),
    diff(
        "full.acc",
        "deepinv.acc",
        ">=",
        0.05,
        name="full_vs_deepinv",
        gating=False,
        part="students",
        paper="BN inversion of CLIP fails (Sec. 3)",
        explain="Reported: the full method against DeepInversion on the same confounded BN teacher.",
    ),
)

CLAIM = Claim(
    name="clip_dfkd",
    paper=PaperRef(
        title="Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation",
        authors="Yongxian Wei, Zixuan Hu, Li Shen, Zhenyi Wang, Chun Yuan, Dacheng Tao",
        arxiv="",
        code="WalkerWorldPeace/CVLM",
    ),
    statement=(
        "Data-free knowledge distillation from CLIP through BN statistics fails (ResNet-CLIP's statistics "
        "carry irrelevant web content; ViT-CLIP has none); inverting surrogate images from text with style "
        "dictionary "
        "diversification and class-consistency maintaining, then (meta) knowledge distillation, customises a "
        "small student from class names alone that beats existing DFKD methods (+9.33 % on average)."
    ),
    arms={
        "teacher_bn": "the shipped BN teacher's zero-shot head (ceiling)",
        "full": "SDD + CCM inversion on the BN teacher, meta-KD",
        "kd_only": "the full method's synthetic set, plain KD",
        "ctrl_no_sdd": "control: style diversification off (class-prompt matching + CCM), meta-KD",
        "match": "baseline: plain image-text matching, plain KD",
        "ce_only": "baseline: CE on the zero-shot head only, plain KD",
        "deepinv": "baseline: DeepInversion (BN statistics + CE + TV) on the BN teacher, plain KD",
        "best_baseline": "the baseline with the best validation accuracy in this seed (test numbers)",
        "real_kd": "oracle: plain KD on as many real training renders",
        "detector": "a small CNN telling real renders with the distractor from renders without",
    },
    criteria=_CRITERIA,
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=15.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=300.0),
        "long": Budget("long", _LONG, seeds=3, seconds=900.0),
    },
    run_fn=run,
    headline="beats_best_baseline",
    figure="accuracy_by_arm",
    deviations=(
        "The teacher is a tiny BatchNorm CLIP (ModifiedResNet) trained contrastively by the project on "
        "1M fresh shapes-world image-caption pairs (80 % carry a face-like distractor), not OpenAI CLIP.",
        "One 6-way task (shapes, any colour or style) on 32 x 32 renders instead of 12 "
        "Caltech/ImageNet/Flower tasks; the style dictionary is the world's six render-style words.",
        "PixelParam (16 x 16 logits upsampled) replaces the VQGAN decoder; 192 images per class, "
        "40 Adam steps (the paper: 64 and 400).",
        "Student: a 78k-parameter residual CNN, 40 epochs of batch 32 (1,440 steps), meta-KD after 20 "
        "warm-up epochs.",
        "Loss forms the paper leaves open (cosine matching, SDD temperature 0.1, KD τ = 4, α = 0.1, "
        "β = 1) are design decisions.",
        "The ViT teacher is untrained: it only shows that DeepInversion is inapplicable without BN.",
        "Not run: DFKD-VLFM prompt diversification, CMI/Fast-DFKD, the VQGAN/decoder parameterisation, "
        "the no-CCM ablation.",
    ),
)
