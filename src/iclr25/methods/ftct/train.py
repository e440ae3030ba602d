"""Training of FTCT models: a tiny GPT-2 from scratch on the fragmented corpus.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements the training of
Section 4: next-token cross-entropy on the supervised positions (everything after each trace's
head), AdamW, a Hugging Face GPT-2 with random initialisation; plus local checkpointing with
``save_pretrained``/``from_pretrained``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from iclr25.common.tiny_lm import build_tiny_lm, load_tiny_lm
from iclr25.methods.ftct.config import ModelConfig, TrainConfig
from iclr25.methods.ftct.data import Corpus
from iclr25.methods.ftct.vocab import FTCTTokenizer

__all__ = ["build_model", "lm_loss", "load_checkpoint", "save_checkpoint", "train_model"]


def build_model(cfg: ModelConfig, tok: FTCTTokenizer, *, seed: int) -> PreTrainedModel:
    """A randomly initialised causal LM over the FTCT vocabulary (eager attention).

    Args:
        cfg: the model config.
        tok: the vocabulary (its size and special ids).
        seed: initialisation seed.

    Returns:
        The model on the CPU, float32, eval mode.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> tok = FTCTTokenizer(n_letters=26, modulus=200, context_div=4)
        >>> m = build_model(ModelConfig(n_layer=1, n_head=2, d_model=16), tok, seed=0)
        >>> m.config.n_layer
        1
    """
    return build_tiny_lm(
        cfg.arch,
        vocab_size=len(tok),
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_model=cfg.d_model,
        max_positions=cfg.max_positions,
        seed=seed,
        attn_implementation="eager",
        dropout=cfg.dropout,
        pad_token_id=tok.pad_id,
        eos_token_id=tok.eos_id,
    )


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over supervised positions (labels != -100).

    Args:
        logits: Shape ``(B, T, V)``.
        labels: Shape ``(B, T)``; position ``t`` is predicted from the prefix ending at ``t - 1``.

    Returns:
        The mean loss (a scalar).

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.
    """
    shift_logits = logits[:, :-1].reshape(-1, logits.shape[-1])  # (B*(T-1), V)
    shift_labels = labels[:, 1:].reshape(-1)  # (B*(T-1),)
    return F.cross_entropy(shift_logits.float(), shift_labels, ignore_index=-100)


def _lr_factor(step: int, total: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    frac = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    if cfg.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac)))
    if cfg.schedule == "linear":
        return max(0.0, 1.0 - frac)
    return 1.0


def train_model(
    model: torch.nn.Module,
    corpus: Corpus,
    cfg: TrainConfig,
    *,
    seed: int,
    device: str | torch.device = "cpu",
    progress: Callable[[str, int, int], None] | None = None,
    checkpoints: Sequence[int] = (),
    on_checkpoint: Callable[[int, torch.nn.Module], None] | None = None,
) -> list[float]:
    """Train ``model`` on ``corpus`` with AdamW; batches are trimmed to their longest sequence.

    Any module mapping ``(input_ids, attention_mask)`` to logits (or to an output with
    ``.logits``) can be trained. ``cfg.dtype == "bfloat16"`` autocasts on CUDA.

    Args:
        model: the model, already on ``device``.
        corpus: the training corpus.
        cfg: optimisation settings.
        seed: seed of the batch order.
        device: where the model lives.
        progress: optional ``progress(stage, done, total)``, called about every 2% of the steps
            with the stage ``"training"``.
        checkpoints: step counts (1..total) after which ``on_checkpoint`` runs, e.g. to record a
            learning curve.
        on_checkpoint: ``on_checkpoint(step, model)``, called with the model in eval mode; the
            model returns to train mode afterwards. It must not change the weights.

    Returns:
        The loss of every step.

    Raises:
        ValueError: empty corpus, or a checkpoint outside ``1..total`` steps.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.
    """
    n = len(corpus)
    if n == 0:
        raise ValueError("empty corpus")
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = cfg.steps if cfg.steps > 0 else round(cfg.epochs * steps_per_epoch)
    marks = {int(c) for c in checkpoints}
    if any(not 1 <= c <= total for c in marks):
        raise ValueError(f"checkpoints must lie in 1..{total} steps, got {sorted(marks)}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, total, cfg))
    use_amp = cfg.dtype == "bfloat16" and torch.device(device).type == "cuda"
    lengths = corpus.attention_mask.sum(1)
    model.train()
    losses: list[float] = []
    order = torch.randperm(n, generator=gen)
    cursor = 0
    every = max(1, total // 50)
    for step in range(total):
        if cursor + cfg.batch_size > n:
            order, cursor = torch.randperm(n, generator=gen), 0
        idx = order[cursor : cursor + cfg.batch_size]
        cursor += cfg.batch_size
        width = int(lengths[idx].max())
        ids = corpus.input_ids[idx, :width].to(device)
        mask = corpus.attention_mask[idx, :width].to(device)
        labels = corpus.labels[idx, :width].to(device)
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if use_amp else contextlib.nullcontext()
        with ctx:
            out = model(input_ids=ids, attention_mask=mask)
            logits = out if isinstance(out, torch.Tensor) else out.logits
            loss = lm_loss(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()
        losses.append(loss.detach().item())
        if progress is not None and ((step + 1) % every == 0 or step + 1 == total):
            progress("training", step + 1, total)
        if on_checkpoint is not None and step + 1 in marks:
            model.eval()
            on_checkpoint(step + 1, model)
            model.train()
    model.eval()
    return losses


def save_checkpoint(model: PreTrainedModel, tok: FTCTTokenizer, path: str | os.PathLike[str]) -> None:
    """Save model and tokenizer to a local folder with ``save_pretrained``."""
    model.save_pretrained(path)
    tok.save_pretrained(path)


def load_checkpoint(
    path: str | os.PathLike[str], *, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, FTCTTokenizer]:
    """Load a folder written by :func:`save_checkpoint` (local files only, never a hub).

    Args:
        path: the checkpoint folder.
        dtype: optional weight dtype (e.g. ``torch.bfloat16`` on a GPU).

    Returns:
        ``(model, tokenizer)``; the caller moves the model to its device.
    """
    kwargs = {} if dtype is None else {"dtype": dtype}
    return load_tiny_lm(path, **kwargs), FTCTTokenizer.from_pretrained(path)
