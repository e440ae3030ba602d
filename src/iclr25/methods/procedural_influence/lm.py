"""The tiny Llama trained on the synthetic corpus: tokenisation, training with replay, greedy queries.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580 (Sec. 3: queries are completed zero-shot by the model itself and kept
with a correctness flag).

Training is replayable: the batch order of every epoch is a function of the seed and the epoch, and
:func:`train_lm` can return the model and optimiser state at the start of a late epoch. The
leave-k-out oracle restarts there and replays the same batches with some documents' loss weight set
to zero, so removing documents is the only difference from the original run.

Devices: the model is built on the CPU (seeded) and moved; :func:`train_lm` trains on
``device`` (default: where the model already is) and moves each batch there; the NLL and greedy
helpers feed their tensors to the model's device. Batch orders come from numpy generators, so a
run's batches do not depend on the device.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.procedural_influence.corpus import (
    TASKS,
    Corpus,
    Query,
    _steps,
    query_prompts,
    valid_solutions,
)

__all__ = [
    "Checkpoint",
    "build_lm",
    "completion_nll",
    "completion_token_nll",
    "encode_documents",
    "encode_queries",
    "greedy_complete",
    "make_queries",
    "train_lm",
]


def build_lm(
    vocab_size: int, cfg: object, *, seed: int, device: torch.device | str | None = None
) -> torch.nn.Module:
    """The Llama-style tiny LM of the claim (``nn.Linear`` layers only, tied embeddings).

    Args:
        vocab_size: tokenizer size.
        cfg: an :class:`~iclr25.methods.procedural_influence.config.LMConfig`.
        seed: initialisation seed.
        device: where to put the model (None: the CPU). The weights are always drawn on the
            CPU, so a seed gives the same initial model on every device.
    """
    from iclr25.common.tiny_lm import build_tiny_lm

    model = build_tiny_lm(
        "llama",
        vocab_size=vocab_size,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_model=cfg.d_model,
        max_positions=cfg.context,
        seed=seed,
        attn_implementation="eager",
    )
    return model if device is None else model.to(device)


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _ids(tok: object, text: str) -> list[int]:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if tok.unk_token_id in ids:
        raise ValueError(f"text has words outside the vocabulary: {text!r}")
    return ids


def encode_documents(texts: Sequence[str], tok: object, context: int) -> dict[str, torch.Tensor]:
    """``<bos> text <eos>`` right-padded to ``context``; labels are the ids, -100 on padding.

    Raises:
        ValueError: no texts, or a text longer than the context.

    Shape:
        every tensor [D, context].
    """
    if not texts:
        raise ValueError("the corpus is empty")
    rows = []
    for t in texts:
        ids = [tok.bos_token_id, *_ids(tok, t), tok.eos_token_id]
        if len(ids) > context:
            raise ValueError(f"a document of {len(ids)} tokens exceeds the context of {context}")
        rows.append(ids)
    return _pad(rows, [0] * len(rows), context, tok.pad_token_id)


def encode_queries(
    prompts: Sequence[str], completions: Sequence[str], tok: object, context: int
) -> dict[str, torch.Tensor]:
    """``<bos> prompt completion`` right-padded; labels -100 on the prompt and padding (Trap 2).

    Raises:
        ValueError: an empty completion or a query longer than the context.

    Shape:
        every tensor [Q, context].
    """
    rows, n_prompt = [], []
    for p, c in zip(prompts, completions, strict=True):
        if not c.strip():
            raise ValueError(f"query {p!r} has an empty completion")
        head = [tok.bos_token_id, *_ids(tok, p)]
        ids = head + _ids(tok, c)
        if len(ids) > context:
            raise ValueError(f"a query of {len(ids)} tokens exceeds the context of {context}")
        rows.append(ids)
        n_prompt.append(len(head))
    return _pad(rows, n_prompt, context, tok.pad_token_id)


def _pad(rows: list[list[int]], n_masked: list[int], context: int, pad: int) -> dict[str, torch.Tensor]:
    n = len(rows)
    input_ids = torch.full((n, context), pad, dtype=torch.long)
    attention = torch.zeros((n, context), dtype=torch.long)
    labels = torch.full((n, context), -100, dtype=torch.long)
    for i, (ids, m) in enumerate(zip(rows, n_masked, strict=True)):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        labels[i, m : len(ids)] = torch.tensor(ids[m:])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def _token_nll(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], *, precise: bool = False
) -> torch.Tensor:
    """Per-token next-token NLL, 0 where the label is -100. Shape [B, T-1], on the model's device.

    ``precise`` takes the softmax in float64, so a near-certain token keeps a positive NLL
    (in float32 it rounds to exactly 0, and per-nat normalisation would divide by zero). The
    batch is moved to the model's device first.
    """
    dev = _device_of(model)
    batch = {k: v.to(dev) for k, v in batch.items()}
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    if precise:
        logits = logits.double()
    labels = batch["labels"][:, 1:]  # shift: position t predicts token t+1
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels.clamp_min(0), reduction="none")
    return nll * (labels != -100)


@torch.no_grad()
def completion_token_nll(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-token ``-log p`` of the labelled tokens (0 elsewhere); entry t scores token t+1. [B, T-1].

    The batch may live anywhere: it is moved to the model's device, where the result stays.
    """
    return _token_nll(model, batch, precise=True)


@torch.no_grad()
def completion_nll(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``-log p(c | p)`` per row: the summed NLL of the labelled tokens (float64). Shape [B].

    The batch may live anywhere: it is moved to the model's device, where the result stays.
    """
    return _token_nll(model, batch, precise=True).sum(1)


@dataclass
class Checkpoint:
    """Model and optimiser state at the start of ``epoch`` (for replaying the last epochs)."""

    epoch: int
    model: dict[str, torch.Tensor]
    optimizer: dict


def _batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    order = np.random.default_rng([seed, 7, epoch]).permutation(n)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def train_lm(
    model: torch.nn.Module,
    data: dict[str, torch.Tensor],
    cfg: object,
    *,
    seed: int,
    start: Checkpoint | None = None,
    exclude: Collection[int] = (),
    checkpoint_epoch: int | None = None,
    on_epoch: Callable[[int, torch.nn.Module], None] | None = None,
    progress: ProgressFn = no_progress,
    device: torch.device | str | None = None,
) -> tuple[list[float], Checkpoint | None]:
    """Train on the encoded corpus with AdamW, linear warm-up and cosine decay to 10 % (in place).

    Args:
        model: the LM.
        data: :func:`encode_documents` output.
        cfg: an :class:`~iclr25.methods.procedural_influence.config.LMConfig`.
        seed: seed of the batch order (epoch ``e`` always uses the same batches).
        start: resume from this checkpoint (replay) instead of epoch 0.
        exclude: document indices whose loss weight is zero (the batches stay the same).
        checkpoint_epoch: return the state at the start of this epoch.
        on_epoch: called as ``on_epoch(epoch, model)`` after every epoch (e.g. a validation
            loss); the model is in ``eval()`` mode during the call and back in ``train()`` after.
        progress: progress callback.
        device: where to train: the model is moved there (in place) and every batch with it
            (None: where the model already is). ``data`` may stay on the CPU.

    Returns:
        Mean training loss per epoch, and the checkpoint (or None); the checkpoint's tensors live
        on the training device.
    """
    n = len(data["input_ids"])
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = cfg.epochs * steps_per_epoch
    warmup = max(1, total // 20)
    if device is not None:
        model.to(device)
    dev = _device_of(model)

    def lr_at(step: int) -> float:
        if step < warmup:
            return cfg.lr * (step + 1) / warmup
        cosine = 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
        return cfg.lr * (0.1 + 0.9 * cosine)  # decays to 10 % of the peak

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    first = 0
    if start is not None:
        model.load_state_dict(start.model)
        opt.load_state_dict(start.optimizer)
        first = start.epoch
    keep = torch.ones(n)
    if exclude:
        keep[torch.as_tensor(sorted(exclude), dtype=torch.long)] = 0.0
    model.train()
    losses: list[float] = []
    ckpt = None
    for epoch in range(first, cfg.epochs):
        if epoch == checkpoint_epoch:
            ckpt = Checkpoint(epoch, copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        run = 0.0
        for i, idx in enumerate(_batches(n, cfg.batch_size, seed, epoch)):
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch * steps_per_epoch + i)
            width = int(data["attention_mask"][idx].sum(1).max())  # trim shared right padding
            batch = {k: v[idx, :width].to(dev) for k, v in data.items()}
            nll = _token_nll(model, batch)  # [B, T-1]
            n_tok = (batch["labels"][:, 1:] != -100).sum()
            loss = (nll.sum(1) * keep[idx].to(dev)).sum() / n_tok  # removed documents weigh zero
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            run += float(loss.detach())
        losses.append(run / steps_per_epoch)
        if on_epoch is not None:
            model.eval()
            on_epoch(epoch, model)
            model.train()
        progress("training", epoch + 1, cfg.epochs)
    model.eval()
    return losses, ckpt


@torch.no_grad()
def greedy_complete(model: torch.nn.Module, tok: object, prompt: str, *, max_new: int, context: int) -> str:
    """The model's greedy completion of a prompt, up to ``<eos>`` (not included); the model may
    live on any device."""
    dev = _device_of(model)
    ids = [tok.bos_token_id, *_ids(tok, prompt)]
    out: list[int] = []
    while len(out) < max_new and len(ids) < context:
        logits = model(input_ids=torch.tensor([ids], device=dev)).logits[0, -1]
        nxt = int(logits.argmax())
        if nxt == tok.eos_token_id:
            break
        out.append(nxt)
        ids.append(nxt)
    return tok.decode(out)


def make_queries(
    corpus: Corpus,
    model: torch.nn.Module,
    tok: object,
    *,
    n_factual: int,
    n_reasoning: int,
    n_control: int,
    context: int,
    seed: int,
    tasks: Sequence[str] = TASKS[:2],
) -> list[Query]:
    """Factual, reasoning and control queries, completed greedily by the model.

    Factual: "the <relation> of <entity> is" completed by the model, correct when it names the
    fact's value. Reasoning: a held-out problem in one of the two formats, completed by the model,
    correct when its final answer is right. Controls: the same look as a reasoning prompt with a
    completion that only restates its numbers (no reasoning, no retrieval).

    Raises:
        ValueError: more queries asked for than held-out problems or facts.
    """
    rng = np.random.default_rng([seed, 29])
    queries: list[Query] = []
    if n_factual > len(corpus.facts):
        raise ValueError(f"{n_factual} factual queries but only {len(corpus.facts)} facts")
    for i in rng.choice(len(corpus.facts), size=n_factual, replace=False):
        f = corpus.facts[int(i)]
        prompt = f"the {f.relation} of {f.entity} is"
        comp = greedy_complete(model, tok, prompt, max_new=4, context=context)
        ok = comp.split()[:1] == [f.value]
        queries.append(
            Query(prompt, comp if comp.strip() else ".", "factual", 0, ok, (), f.fact_id, (), f.value)
        )
    for task in tasks:
        pool = corpus.holdout[task]
        if n_reasoning + n_control > len(pool):
            raise ValueError(f"{task}: {n_reasoning + n_control} queries but {len(pool)} held-out problems")
        pick = rng.permutation(len(pool))
        for j in range(n_reasoning):
            p, t = pool[int(pick[j])], j % 2
            steps, ans = _steps(task, p)
            prompt = query_prompts(task, p, t)
            comp = greedy_complete(model, tok, prompt, max_new=context, context=context)
            ok = comp.split()[-1:] == [ans] and comp in valid_solutions(task, p, t)  # any wording
            queries.append(Query(prompt, comp if comp.strip() else ".", task, t, ok, steps, -1, p, ans))
        for j in range(n_control):
            p, t = pool[int(pick[n_reasoning + j])], j % 2
            _, ans = _steps(task, p)
            nums = " ".join(str(v) for v in p)
            queries.append(
                Query(
                    query_prompts(task, p, t),
                    f"the numbers are {nums} .",
                    f"control_{task}",
                    t,
                    True,
                    (),
                    -1,
                    p,
                    ans,
                )
            )
    return queries
