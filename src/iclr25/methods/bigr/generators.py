"""The claim check's four generators, trained to a plateau once per seed and shipped.

BiGR, the causal AR baseline, the per-bit control and the causal BiGR learn slowly at CPU scale:
BiGR's validation loss still falls after 3,500 steps, and three seeds of 10,000 steps for all four
arms take about an hour of two cores. So, as the tokenizer, they are trained once by their recipe
(``iclr25 pretrain bigr generators_seed0`` ... ``generators_seed2``) and shipped, and the claim
check evaluates them. Each folder ``pretrained/generators_seed<s>/`` holds:

- ``config.json``: the seed, the number of classes and the :class:`ClaimConfig` fields that shape
  the generators and their data (the check refuses a config that differs);
- ``model.safetensors``: every arm's EMA weights (what sampling and probes read), keys
  ``<arm>.<parameter>``;
- ``training.json``: the per-step losses of every arm in turn (``loss_curve``) and, per arm, the
  validation curve the convergence preconditions read (``arms``).

The same functions build, train and read the generators when the check trains them itself
(``--set generators=train``), so the two paths differ only in where the weights come from.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, training setup (the generators are trained with
    AdamW at a constant learning rate; inference reads an EMA of their weights).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25._core.claims import ProgressFn
from iclr25._core.pretrained import RecipeRun, artefact_dir, read_training, require_artefact
from iclr25.methods.bigr.baselines import CausalAR
from iclr25.methods.bigr.config import BiGRConfig, ClaimConfig, TranscoderConfig
from iclr25.methods.bigr.model import BiGR, train_bigr
from iclr25.methods.bigr.tokenizer import BinaryAutoencoder, load_tokenizer

__all__ = [
    "ARMS",
    "GENERATOR_FIELDS",
    "RECIPE_EVALS",
    "RECIPE_STEPS",
    "SHIPPED_SEEDS",
    "ArmTraining",
    "bigr_config",
    "build_generator",
    "encode_probs",
    "generators_dir",
    "load_generators",
    "pretrain_generators",
    "pretrain_generators_seed0",
    "pretrain_generators_seed1",
    "pretrain_generators_seed2",
    "shapes_data",
    "train_arm",
    "val_loss_fn",
]

#: The trained arms, in training order.
ARMS = ("bigr", "ar", "perbit", "causal")
#: Seeds with shipped generators (the claim check's seeds).
SHIPPED_SEEDS = (0, 1, 2)
#: AdamW steps of every arm in the recipe, and validation readings along them (every 250 steps).
RECIPE_STEPS, RECIPE_EVALS = 10_000, 40
#: The :class:`ClaimConfig` fields that decide the shipped generators and their data.
GENERATOR_FIELDS = (
    "dataset", "image_size", "n_train", "n_val", "n_test", "backgrounds", "code_dim", "tokenizer",
    "ae_downsample", "dim", "depth", "heads", "transcoder_depth", "timesteps", "diffusion_steps", "steps",
    "batch_size", "lr", "ema_decay", "n_evals", "n_val_loss",
)  # fmt: skip

Data = tuple[torch.Tensor, ...]


def generators_dir(seed: int) -> Path:
    """The shipped folder of one seed's generators."""
    return artefact_dir("bigr", f"generators_seed{seed}")


# ---------------------------------------------------------------------------------------------
# data and models, shared by the recipe and the claim check
# ---------------------------------------------------------------------------------------------


def shapes_data(cfg: ClaimConfig, seed: int) -> tuple[Data, int]:
    """The claim's shapes world of ``seed``: (train images, labels, val ..., test ...) in [-1, 1],
    and the number of classes (4 shapes x 4 colours)."""
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    world = ShapesWorld(
        WorldConfig(
            image_size=cfg.image_size, shapes=("circle", "square", "triangle", "star"),
            colors=("red", "green", "blue", "yellow"), backgrounds=cfg.backgrounds,
        ),
        seed=seed,
    )  # fmt: skip
    out = []
    for split, n in (("train", cfg.n_train), ("val", cfg.n_val), ("test", cfg.n_test)):
        X, y = world.classification_arrays(n, split=split)
        out += [torch.tensor(X, dtype=torch.float32).permute(0, 3, 1, 2) / 127.5 - 1, torch.tensor(y)]
    return tuple(out), len(world.class_names("shape_color"))


@torch.no_grad()
def encode_probs(ae: BinaryAutoencoder, x: torch.Tensor) -> torch.Tensor:
    """Bernoulli parameters of every image's tokens, (n, N, K)."""
    return torch.cat([ae.encode(c).probs.flatten(2).transpose(1, 2) for c in x.split(500)])


def bigr_config(cfg: ClaimConfig, num_classes: int, **kw: Any) -> BiGRConfig:
    """The claim's BiGR generator config (``kw``: ``head="bit"``, ``causal=True`` for the controls)."""
    tc = TranscoderConfig(
        depth=cfg.transcoder_depth, width=cfg.dim, timesteps=cfg.timesteps, sample_steps=cfg.diffusion_steps
    )
    return BiGRConfig(
        code_dim=cfg.code_dim, grid=cfg.image_size // cfg.ae_downsample, num_classes=num_classes,
        dim=cfg.dim, depth=cfg.depth, heads=cfg.heads, dropout=0.0, transcoder=tc, **kw,
    )  # fmt: skip


def build_generator(arm: str, cfg: ClaimConfig, num_classes: int, seed: int) -> nn.Module:
    """One arm, initialised from its own seed (so the check can rebuild the untrained model).

    Raises:
        ValueError: an unknown arm.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown generator arm {arm!r}; the arms are {', '.join(ARMS)}")
    torch.manual_seed(1000 * seed + ARMS.index(arm))
    if arm == "ar":
        return CausalAR(
            code_dim=cfg.code_dim, grid=cfg.image_size // cfg.ae_downsample, num_classes=num_classes,
            dim=cfg.dim, depth=cfg.depth, heads=cfg.heads,
        )  # fmt: skip
    kw = {"bigr": {}, "perbit": {"head": "bit"}, "causal": {"causal": True}}[arm]
    return BiGR(bigr_config(cfg, num_classes, **kw))


def val_loss_fn(probs: torch.Tensor, labels: torch.Tensor, seed: int) -> Callable[[nn.Module], float]:
    """A generator's own objective on a fixed validation set: one Bernoulli draw of the codes, and the
    same masks, timesteps and label drops at every evaluation (own RNG, never the training one), in
    batches of 64 so that BiGR's one-mask-count-per-batch rule sees several mask counts."""
    bits = torch.bernoulli(probs, generator=torch.Generator().manual_seed(seed + 7919))

    def val_loss(model: nn.Module) -> float:
        g = torch.Generator().manual_seed(seed + 104729)
        dev = next(model.parameters()).device  # the draws stay on the CPU generator
        parts = [
            float(model.loss(b.to(dev), y.to(dev), generator=g)["loss"])  # type: ignore[operator]
            for b, y in zip(bits.split(64), labels.split(64), strict=True)
        ]
        return float(np.mean(parts))

    return val_loss


@dataclasses.dataclass
class ArmTraining:
    """One trained arm: its EMA model, every step's loss and its validation curve."""

    model: nn.Module
    losses: list[float]
    val_steps: list[float]
    val_curve: list[float]
    seconds: float


def train_arm(
    arm: str, model: nn.Module, cfg: ClaimConfig, probs: torch.Tensor, labels: torch.Tensor,
    val_loss: Callable[[nn.Module], float], *, seed: int, progress: ProgressFn, device: str = "cpu",
    stop: int | None = None, state: Mapping[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> ArmTraining:  # fmt: skip
    """Train one arm for ``cfg.steps`` AdamW steps of ``cfg.batch_size`` (fresh Bernoulli draws of
    its codes as inputs and targets), keeping an EMA of its weights, whose validation loss is read
    ``cfg.n_evals`` times. Batches, masks and noise come from the arm's own generator.

    Args:
        device: where the arm trains; every draw comes from the arm's CPU generator, so a run
            repeats whatever the device, and the returned EMA model lives on the CPU.
        stop: end after this many steps (replay); the returned model is then the EMA so far.
        state: what ``checkpoint`` received in an interrupted run, to resume from.
        checkpoint: called with ``{"trainer", "val_steps", "val_curve", "seconds"}``.
    """
    gen = torch.Generator().manual_seed(1000 * seed + 100 + ARMS.index(arm))
    vs: list[float] = list(state["val_steps"]) if state else []
    vc: list[float] = list(state["val_curve"]) if state else []
    spent = float(state["seconds"]) if state else 0.0
    t0 = time.perf_counter()

    def on_eval(step: int, ema: nn.Module) -> None:
        vs.append(float(step))
        vc.append(val_loss(ema))

    def save(trainer: dict[str, Any]) -> None:
        if checkpoint is not None:
            checkpoint({"trainer": trainer, "val_steps": vs, "val_curve": vc,
                        "seconds": spent + time.perf_counter() - t0})  # fmt: skip

    def bits(idx: torch.Tensor) -> torch.Tensor:  # drawn on the CPU, handed over where the batch is
        return torch.bernoulli(probs[idx.cpu()], generator=gen).to(idx.device)

    losses, ema = train_bigr(
        model.to(device), bits, labels.to(device), steps=cfg.steps,
        batch_size=cfg.batch_size, lr=cfg.lr, ema_decay=cfg.ema_decay, generator=gen, on_eval=on_eval,
        eval_every=max(1, cfg.steps // cfg.n_evals), progress=lambda d, t: progress(f"train {arm}", d, t),
        stop=stop, state=state["trainer"] if state else None, checkpoint=save,
    )  # fmt: skip
    assert ema is not None
    return ArmTraining(ema.cpu(), losses, vs, vc, spent + time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# the recipe
# ---------------------------------------------------------------------------------------------


_CURVE = ("val_steps", "val_curve", "seconds")


def _fields(cfg: ClaimConfig) -> dict[str, Any]:
    return {f: getattr(cfg, f) for f in GENERATOR_FIELDS}


def pretrain_generators(
    out: str | os.PathLike[str], *, seed: int, progress: ProgressFn, max_steps: int | None = None,
    cfg: ClaimConfig | None = None,
) -> list[float]:  # fmt: skip
    """Recipe of one seed's shipped generators: the claim's data of ``seed`` through the shipped
    tokenizer, and each arm of :data:`ARMS` in turn trained by :func:`train_arm` with the full
    budget's :class:`ClaimConfig` for :data:`RECIPE_STEPS` steps. Writes ``config.json``,
    ``model.safetensors`` and ``training.json`` into ``out``; an interrupted run checkpoints every
    500 steps and resumes.

    Args:
        out: the folder to write.
        seed: the claim seed whose data the generators learn.
        progress: ``progress(stage, done, total)`` every 50 steps (stages ``"train <arm>"``).
        max_steps: replay only the first arm's first steps and write nothing.
        cfg: another configuration (tests); by default the full budget's.

    Returns:
        Every arm's per-step losses, in arm order (with ``max_steps``, the first arm's).
    """
    from safetensors.torch import save_file

    cfg = cfg or dataclasses.replace(ClaimConfig(), steps=RECIPE_STEPS, n_evals=RECIPE_EVALS)
    if cfg.dataset != "shapes" or cfg.tokenizer != "shipped":
        raise ValueError("the shipped generators learn the shapes world through the shipped tokenizer")
    run = RecipeRun(out, replay=max_steps is not None)
    (Xtr, ytr, Xva, yva, _, _), n_cls = shapes_data(cfg, seed)
    ae = load_tokenizer()
    p_tr, p_va = encode_probs(ae, Xtr), encode_probs(ae, Xva)
    val_loss = val_loss_fn(p_va[: cfg.n_val_loss], yva[: cfg.n_val_loss], seed)
    done: dict[str, dict[str, Any]] = dict(run.state["done"]) if run.state else {}
    current = run.state["current"] if run.state else None
    for arm in ARMS:
        if arm in done:
            continue
        model = build_generator(arm, cfg, n_cls, seed)
        resume = current if current and current["arm"] == arm else None
        trained = train_arm(
            arm, model, cfg, p_tr, ytr, val_loss, seed=seed, progress=progress, stop=max_steps,
            state=resume,
            checkpoint=lambda st, a=arm: run.checkpoint({"done": done, "current": {"arm": a, **st}}),
        )  # fmt: skip
        if max_steps is not None:
            return trained.losses
        done[arm] = {
            "ema": {k: v.clone() for k, v in trained.model.state_dict().items()},
            "losses": [round(v, 6) for v in trained.losses],
            "val_steps": trained.val_steps,
            "val_curve": trained.val_curve,
            "seconds": round(trained.seconds, 1),
        }
        run.checkpoint({"done": done, "current": None})
    tensors = {f"{a}.{k}": v.contiguous() for a in ARMS for k, v in done[a]["ema"].items()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out / "model.safetensors")
    config = {"seed": seed, "num_classes": n_cls, "claim_config": _fields(cfg)}
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    quality = {}
    for a in ARMS:
        curve = done[a]["val_curve"]
        quality[f"{a}_val_final"] = curve[-1]
        quality[f"{a}_val_first"] = curve[0]
    run.finish(
        command=f"iclr25 pretrain bigr generators_seed{seed} --out {out}",
        loss_curve=[v for a in ARMS for v in done[a]["losses"]],
        quality=quality,
        data=f"shapes world seed {seed}: {cfg.n_train} training images (split 'train') through the "
        f"shipped tokenizer, fresh Bernoulli draws of their codes at every step; validation loss on "
        f"{cfg.n_val_loss} images of split 'val' (one draw, fixed masks and noise)",
        arms={a: {"steps": len(done[a]["losses"])} | {k: done[a][k] for k in _CURVE} for a in ARMS},
        config=_fields(cfg),
    )
    return [v for a in ARMS for v in done[a]["losses"]]


def pretrain_generators_seed0(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of ``generators_seed0`` (:func:`pretrain_generators` with seed 0)."""
    return pretrain_generators(out, seed=0, progress=progress, max_steps=max_steps)


def pretrain_generators_seed1(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of ``generators_seed1`` (:func:`pretrain_generators` with seed 1)."""
    return pretrain_generators(out, seed=1, progress=progress, max_steps=max_steps)


def pretrain_generators_seed2(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of ``generators_seed2`` (:func:`pretrain_generators` with seed 2)."""
    return pretrain_generators(out, seed=2, progress=progress, max_steps=max_steps)


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------


def load_generators(
    seed: int, cfg: ClaimConfig, num_classes: int, directory: str | os.PathLike[str] | None = None
) -> tuple[dict[str, nn.Module], dict[str, Any]]:
    """The shipped EMA generators of ``seed`` (eval mode) and their ``training.json``.

    Args:
        seed: the claim seed.
        cfg: the check's configuration; its :data:`GENERATOR_FIELDS` must equal the recipe's.
        num_classes: classes of the check's data.
        directory: another folder written by the recipe (default: the shipped one).

    Raises:
        ArtefactMissingError: no folder (or a file missing) for that seed; the message says how to
            train the generators in the check instead.
        ValueError: the generators were made with another configuration.
        KeyError: the weights do not fit the arms' models.
    """
    from safetensors.torch import load_file

    from iclr25._core.pretrained import ArtefactMissingError

    d = Path(directory) if directory is not None else generators_dir(seed)
    if directory is None and seed not in SHIPPED_SEEDS:
        raise ArtefactMissingError(
            f"no shipped generators for seed {seed} (shipped: seeds "
            f"{', '.join(map(str, SHIPPED_SEEDS))}); --set generators=train trains them in the check"
        )
    require_artefact(d, method="bigr", name=f"generators_seed{seed}")
    config = json.loads((d / "config.json").read_text())
    want = {k: list(v) if isinstance(v, tuple) else v for k, v in _fields(cfg).items()}
    have = config["claim_config"]
    differ = [f"{k}={have.get(k)!r} (asked {want[k]!r})" for k in want if have.get(k) != want[k]]
    if config["seed"] != seed or config["num_classes"] != num_classes:
        differ.append(f"seed {config['seed']}, {config['num_classes']} classes")
    if differ:
        raise ValueError(
            f"the generators in {str(d)!r} were trained with " + ", ".join(differ)
            + "; use --set generators=train to train them in the check"
        )  # fmt: skip
    tensors = load_file(d / "model.safetensors")
    models = {}
    for arm in ARMS:
        model = build_generator(arm, cfg, num_classes, seed)
        prefix = f"{arm}."
        weights = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if missing or unexpected:
            raise KeyError(f"{d}: {arm} weights do not fit: missing {missing[:5]}, extra {unexpected[:5]}")
        models[arm] = model.eval()
    return models, read_training(d)
