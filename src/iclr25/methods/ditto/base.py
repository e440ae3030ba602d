"""The shipped base LM of the claim check: a tiny GPT-2 pretrained on the style world's base mixture.

Paper: *Aligning Language Models with Demonstrated Feedback*, Omar Shaikh, Michelle S. Lam,
Joey Hejna, Yijia Shao, Hyundong Cho, Michael S. Bernstein, Diyi Yang, ICLR 2025,
arXiv:2406.00888. DITTO starts from an instruction-tuned model that already follows the task
prompt (Mistral-7B-Instruct-v0.2, Sec. 5); this module provides such a model at toy scale.

The base is trained on chat texts ``user : write a note about TOPIC to AUDIENCE assistant :
RESPONSE <eos>`` whose responses come from the world's base mixture (generic style, each user
style with a small prior mass). Every step draws a fresh batch from a seeded generator, so the
model never sees a text twice and is trained to a plateau of its loss rather than to memorise a
corpus. ``pretrain_base`` is the recipe of the shipped weights (``iclr25 pretrain ditto base``);
``load_base`` reads them. The recipe records two qualities on held-out draws: the KL divergence
from the world's exact base distribution to the model (a Monte-Carlo estimate of
E[log p_base(y|x) − log p_model(y|x)], in nats per note) and the fraction of well-formed notes the
model samples at temperature 1 over every prompt of the world.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr25._core.claims import ProgressFn
from iclr25._core.config import param
from iclr25._core.pretrained import require_artefact
from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import StyleWorld, StyleWorldConfig, build_style_tokenizer
from iclr25.common.lm_recipe import run_lm_recipe
from iclr25.common.tiny_lm import build_tiny_lm, load_tiny_lm

from .trainer import _seeded_generate

__all__ = ["BASE_DIR", "BaseTrainConfig", "base_quality", "load_base", "pretrain_base", "train_base"]

#: Folder of the shipped base: ``config.json``, ``model.safetensors``, ``training.json``.
BASE_DIR = Path(__file__).parent / "pretrained" / "base"


@dataclass(frozen=True)
class BaseTrainConfig:
    """Architecture and pretraining schedule of the shipped base LM.

    Example:
        >>> BaseTrainConfig().n_layer, BaseTrainConfig().d_model
        (4, 128)
    """

    world: StyleWorldConfig = param(StyleWorldConfig(), doc="the style world", source="deviation: synthetic")
    n_layer: int = param(4, doc="GPT-2 blocks", source="deviation: spec 2-4 layers, upper end")
    n_head: int = param(4, doc="attention heads", source="deviation: tiny-model choice")
    d_model: int = param(128, doc="hidden width", source="deviation: spec 64-128 dims, upper end")
    max_positions: int = param(64, doc="position table size", source="deviation: notes are < 32 tokens")
    steps: int = param(5000, doc="optimiser steps", source="deviation: sized to ~40 min on one core")
    batch: int = param(64, doc="notes per step (fresh draws)", source="deviation: tiny-model choice")
    lr: float = param(1e-3, doc="peak AdamW learning rate", source="deviation: tiny-model choice")
    warmup: int = param(200, doc="linear warmup steps", source="deviation: tiny-model choice")
    min_lr_ratio: float = param(
        0.05, doc="cosine floor as a fraction of lr", source="deviation: tiny-model choice"
    )
    seed: int = param(
        0, doc="seed of the initialisation and of the data stream", source="deviation: tiny-model choice"
    )


def _lr_at(step: int, cfg: BaseTrainConfig) -> float:
    """Linear warmup to ``lr``, then cosine decay to ``min_lr_ratio · lr`` at ``steps``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


class _Encoder:
    """Token ids of chat-formatted notes (prompts through the tokenizer's chat template)."""

    def __init__(self, world: StyleWorld, tok: Any) -> None:
        self.tok = tok
        self.prompt_ids = {
            p: list(
                tok(
                    tok.apply_chat_template(
                        [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
                    ),
                    add_special_tokens=False,
                )["input_ids"]
            )
            for p in world.all_prompts()
        }

    def batch(self, notes: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded ``(ids, mask, labels)``; labels cover every token (a base LM's loss) and
        the response's EOS; padding is -100. Shape: (B, T) each."""
        rows = [
            self.prompt_ids[p]
            + list(self.tok(y, add_special_tokens=False)["input_ids"])
            + [self.tok.eos_token_id]
            for p, y in notes
        ]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
            labels[i, : len(r)] = ids[i, : len(r)]
        return ids, mask, labels


def _step_loss(model: Any, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]  # (B, T-1, V)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
    )


def _run(
    cfg: BaseTrainConfig,
    *,
    device: str | torch.device = "cpu",
    steps: int | None = None,
    log: Callable[[int, float], None] | None = None,
    state: dict[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    every: int = 250,
) -> tuple[Any, list[float]]:
    """The training loop; step ``s`` draws its notes from ``numpy_rng(cfg.seed, 11, s)``, so a
    run resumed from ``state`` continues exactly as an uninterrupted one would. The model is
    initialised on the CPU (its seeded draws), then it and every batch go to ``device``."""
    n = cfg.steps if steps is None else steps
    if not 0 <= n <= cfg.steps:
        raise ValueError(f"steps must be in [0, {cfg.steps}], got {n}")
    world = StyleWorld(cfg.world)
    tok = build_style_tokenizer(world)
    enc = _Encoder(world, tok)
    model = build_tiny_lm(
        "gpt2",
        vocab_size=len(tok),
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_model=cfg.d_model,
        max_positions=cfg.max_positions,
        seed=cfg.seed,
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    losses: list[float] = []
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, losses = int(state["step"]), list(state["losses"])
    model.train()
    for s in range(start, n):
        for group in opt.param_groups:
            group["lr"] = _lr_at(s, cfg)
        notes = world.base_corpus(cfg.batch, numpy_rng(cfg.seed, 11, s))
        loss = _step_loss(model, *(t.to(device) for t in enc.batch(notes)))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if log is not None:
            log(s, losses[-1])
        if checkpoint is not None and (s + 1) % every == 0 and s + 1 < n:
            checkpoint({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": s + 1,
                        "losses": losses})  # fmt: skip
    return model.eval(), losses


def train_base(
    cfg: BaseTrainConfig = BaseTrainConfig(),
    *,
    steps: int | None = None,
    device: str | torch.device = "cpu",
) -> tuple[Any, list[float]]:
    """Train the base LM from scratch (deterministic on one thread).

    Args:
        cfg: architecture and schedule.
        steps: stop after this many steps (default ``cfg.steps``); a short run reproduces the
            first losses of the full one.
        device: where the model trains (default the CPU). The initial weights are drawn on the
            CPU and the notes come from NumPy generators, so the device changes no draw.

    Returns:
        The model (eval mode, on ``device``) and the per-step training losses.
    """
    return _run(cfg, steps=steps, device=device)


@torch.no_grad()
def base_quality(
    model: Any, world: StyleWorld | None = None, *, n_kl: int = 2000, n_samples: int = 5, seed: int = 10**6
) -> dict[str, float]:
    """Held-out quality of a base LM on the style world.

    Args:
        model: a causal LM over :func:`~iclr25.common.data.style_world.build_style_tokenizer`'s ids;
            it is scored and sampled on the device it is on, with every draw on a CPU generator.
        world: the style world (default: the default world).
        n_kl: held-out notes for the KL estimate.
        n_samples: samples per prompt (every prompt of the world) for the well-formed rate.
        seed: seed of the held-out draws and of sampling.

    Returns:
        ``kl_to_world``: mean of log p_base(y|x) − log p_model(y|x) over held-out draws (nats
        per note; 0 for a perfect model); ``nll_per_note``: the model's mean −log p(y|x);
        ``entropy_per_note``: the world's; ``well_formed``: fraction of temperature-1 samples
        that parse; ``eos_rate``: fraction of samples that end within 32 tokens.
    """
    world = world or StyleWorld()
    tok = build_style_tokenizer(world)
    enc = _Encoder(world, tok)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    rng = numpy_rng(seed, 1)
    notes = world.base_corpus(n_kl, rng)
    exact = [world.base_logprob(world.parse(p, y)) for p, y in notes]  # every draw parses
    nll = []
    for i in range(0, n_kl, 250):
        chunk = notes[i : i + 250]
        ids, mask, _ = enc.batch(chunk)
        resp = torch.zeros_like(ids, dtype=torch.bool)
        for j, (p, _y) in enumerate(chunk):
            resp[j, len(enc.prompt_ids[p]) : int(mask[j].sum())] = True  # response tokens and EOS
        ids, mask, resp = ids.to(device), mask.to(device), resp.to(device)
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1], -1)
        tok_lp = logp.gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1): log p(token t+1 | ≤ t)
        nll.extend((-(tok_lp * resp[:, 1:]).sum(-1)).cpu().tolist())
    gen = torch.Generator().manual_seed(seed)
    parsed = finished = total = 0
    for p, pids in enc.prompt_ids.items():
        out = _seeded_generate(
            model,
            pids,
            n_samples,
            seed=int(torch.randint(0, 2**62, (1,), generator=gen)),
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=32,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        for row in out[:, len(pids) :].cpu().tolist():
            total += 1
            if tok.eos_token_id in row:
                finished += 1
                row = row[: row.index(tok.eos_token_id)]
            parsed += world.parse(p, tok.decode(row, skip_special_tokens=True)) is not None
    model.train(was_training)
    return {
        "kl_to_world": float(np.mean(exact) + np.mean(nll)),
        "nll_per_note": float(np.mean(nll)),
        "entropy_per_note": float(-np.mean(exact)),
        "well_formed": parsed / total,
        "eos_rate": finished / total,
    }


def pretrain_base(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of the shipped base: :func:`train_base` with the default :class:`BaseTrainConfig`.

    Writes ``config.json``, ``model.safetensors`` and ``training.json`` (config, per-step losses,
    :func:`base_quality`) into ``out``. An unfinished run checkpoints into ``out`` every 250 steps
    and resumes from there when called again.

    Args:
        out: the folder to write.
        progress: called as ``progress("base", done, total)`` every 50 steps.
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """
    cfg = BaseTrainConfig()
    return run_lm_recipe(
        out, method="ditto", name="base", config=cfg, steps=cfg.steps,
        train=functools.partial(_run, cfg), quality=lambda m: base_quality(m, StyleWorld(cfg.world)),
        progress=progress, max_steps=max_steps,
    )  # fmt: skip


def load_base(directory: str | os.PathLike[str] = BASE_DIR) -> Any:
    """The shipped base LM (or one :func:`pretrain_base` wrote to ``directory``), eval mode.

    Raises:
        ArtefactMissingError: the folder lacks ``config.json``, ``model.safetensors`` or
            ``training.json`` (the message names the command that trains it).
    """
    return load_tiny_lm(require_artefact(directory, method="ditto", name="base"))
