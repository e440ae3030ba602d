"""The pretrained base of the claim check: a tiny Llama that recalls key→value pairs, shipped in
the package, and the synthetic task it was trained on.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. The paper trains beacons on a
frozen, already pretrained LLM (Sec. 3.2, Sec. 4); this module provides such a base at toy scale.

The task (``make_pair_recall``) places key→value pairs ``k v`` in random filler and asks for
every value at the end of the sequence by repeating its key. A pair's value is only reachable
through a composed circuit: an earlier layer copies the pair's tokens into a later position, and
a later layer matches the queried key against that copy and reads the value (an induction
circuit). In layer 0 the query cannot tell the right value from the others, so the value is read
in layer ≥ 1, where beacon key/values carry content (a beacon's layer-0 key/values come from the
⟨b⟩ embedding alone). ``knockout_accuracy`` checks this causally, by blocking one layer's reads of
the context from the query positions.

Trained on pair recall alone, the tiny base sits on a plateau (it guesses among the values in the
row) for thousands of steps. ``train_base`` therefore starts with rows holding a repeated random
segment at a random offset (``make_repeat_segments``), where an induction circuit forms within a
few hundred steps, and then moves to pair recall at growing lengths. ``pretrain_base`` is the
recipe of the shipped weights (``iclr25 pretrain activation_beacon base``): it runs ``train_base``
and records the held-out quality; ``load_base`` reads the shipped weights.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from iclr25._core.claims import ProgressFn
from iclr25._core.config import param
from iclr25._core.pretrained import require_artefact
from iclr25.common.lm_recipe import run_lm_recipe

__all__ = [
    "BASE_DIR",
    "BaseStage",
    "BaseTrainConfig",
    "PairTask",
    "build_base",
    "knockout_accuracy",
    "load_base",
    "make_pair_recall",
    "make_repeat_segments",
    "pretrain_base",
    "retrieval_mass",
    "train_base",
]

#: Folder of the shipped base: ``config.json``, ``model.safetensors``, ``training.json``
#: (written by :func:`pretrain_base`).
BASE_DIR = Path(__file__).parent / "pretrained" / "base"


@dataclass(frozen=True)
class PairTask:
    """Token layout of the key→value recall task (vocabulary of 128 ids).

    Ids 0..3 are pad, unk, bos, eos; filler ids are ``[8, 64)``, keys ``[64, 96)``, values
    ``[96, 128)``. Chance accuracy is 1/32.
    """

    n_pairs: int = param(4, doc="key→value pairs per sequence", source="deviation: toy task")
    filler: tuple[int, int] = param((8, 64), doc="filler id range [lo, hi)", source="deviation: toy task")
    keys: tuple[int, int] = param((64, 96), doc="key id range [lo, hi)", source="deviation: toy task")
    values: tuple[int, int] = param((96, 128), doc="value id range [lo, hi)", source="deviation: toy task")
    bos: int = param(2, doc="bos id (position 0)", source="deviation: toy task")


def make_pair_recall(
    n: int, seq_len: int, query_len: int, *, seed: int, task: PairTask = PairTask()
) -> tuple[torch.Tensor, torch.Tensor]:
    """Key→value recall: ``n_pairs`` pairs ``k v`` in the context, queried at the end.

    Layout of one row: ``bos``, filler with the pairs at random non-overlapping positions in
    ``[1, seq_len - query_len)``, then the last ``query_len`` tokens: filler, closing with
    ``k_t v_t`` for every pair in random order. Keys are distinct within a row. Labels are the
    queried values (−100 elsewhere), so a prediction of ``v_t`` is read at its key ``k_t``.

    Args:
        n: rows.
        seq_len: tokens per row L.
        query_len: length of the final query span (the last chunk in the claim); must hold the
            ``2 * n_pairs`` query tokens.
        seed: seed of this batch (a local generator; the global RNG is untouched).
        task: token layout.

    Returns:
        ``(ids, labels)``, both ``(n, seq_len)`` int64.

    Shape:
        ids, labels: (n, seq_len).

    Raises:
        ValueError: the query span cannot hold the queries, or the context cannot hold the pairs.
    """
    p = task.n_pairs
    ctx = seq_len - query_len
    if query_len < 2 * p:
        raise ValueError(f"query_len={query_len} cannot hold {p} queries (needs {2 * p})")
    if (ctx - 1) // 3 < p:
        raise ValueError(f"seq_len={seq_len} leaves too little context for {p} pairs")
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(*task.filler, (n, seq_len), generator=g)
    ids[:, 0] = task.bos
    labels = torch.full_like(ids, -100)
    n_keys = task.keys[1] - task.keys[0]
    n_vals = task.values[1] - task.values[0]
    # pair slots: split [1, ctx) into cells of 3 tokens, p distinct cells, the pair at offset 0 or 1
    n_cells = (ctx - 1) // 3
    q0 = seq_len - 2 * p
    for i in range(n):
        keys = torch.randperm(n_keys, generator=g)[:p] + task.keys[0]
        vals = torch.randint(0, n_vals, (p,), generator=g) + task.values[0]
        cells = torch.randperm(n_cells, generator=g)[:p]
        starts = 1 + 3 * cells + torch.randint(0, 2, (p,), generator=g)
        ids[i, starts] = keys
        ids[i, starts + 1] = vals
        order = torch.randperm(p, generator=g)
        for j, t in enumerate(order.tolist()):
            ids[i, q0 + 2 * j] = keys[t]
            ids[i, q0 + 2 * j + 1] = vals[t]
            labels[i, q0 + 2 * j + 1] = vals[t]
    return ids, labels


def make_repeat_segments(
    n: int, seq_len: int, *, seed: int, min_len: int = 8, task: PairTask = PairTask()
) -> tuple[torch.Tensor, torch.Tensor]:
    """Induction warm-up rows: a random segment written twice at random offsets in random tokens.

    Layout of one row: ``bos``, then tokens drawn uniformly from the filler, key and value ranges.
    A segment of ``h`` tokens (``min_len <= h <= (seq_len - 1) // 2``, drawn per row) starting at
    a random position is copied to a random later position that does not overlap it. The second
    copy is predicted after its first token, which can only be done by finding the first copy
    (its distance varies from row to row, so no fixed offset works).

    Args:
        n: rows.
        seq_len: tokens per row.
        seed: seed of this batch (a local generator; the global RNG is untouched).
        min_len: shortest segment.
        task: token layout (the vocabulary is ``[task.filler[0], task.values[1])``).

    Returns:
        ``(ids, labels)``, both ``(n, seq_len)`` int64; labels are −100 outside the second copy.

    Raises:
        ValueError: the row cannot hold two segments of ``min_len`` tokens.
    """
    if min_len < 2 or seq_len - 1 < 2 * min_len:
        raise ValueError(f"seq_len={seq_len} cannot hold two segments of min_len={min_len} (min_len >= 2)")
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(task.filler[0], task.values[1], (n, seq_len), generator=g)
    ids[:, 0] = task.bos
    labels = torch.full_like(ids, -100)
    for i in range(n):
        h = int(torch.randint(min_len, (seq_len - 1) // 2 + 1, (1,), generator=g))
        first = 1 + int(torch.randint(0, seq_len - 2 * h, (1,), generator=g))
        second = first + h + int(torch.randint(0, seq_len - first - 2 * h + 1, (1,), generator=g))
        ids[i, second : second + h] = ids[i, first : first + h]
        labels[i, second + 1 : second + h] = ids[i, second + 1 : second + h]
    return ids, labels


@dataclass(frozen=True)
class BaseStage:
    """One stage of the base's training schedule.

    ``kind`` is ``"repeat"`` (:func:`make_repeat_segments`) or ``"pairs"``
    (:func:`make_pair_recall` with ``n_pairs`` pairs).
    """

    kind: str
    seq_len: int
    steps: int
    batch_size: int
    n_pairs: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("repeat", "pairs"):
            raise ValueError(f"stage kind must be 'repeat' or 'pairs', got {self.kind!r}")
        if self.seq_len <= 0 or self.steps < 0 or self.batch_size <= 0:
            raise ValueError(f"stage needs positive seq_len and batch_size and steps >= 0, got {self}")
        if self.kind == "pairs" and self.n_pairs <= 0:
            raise ValueError(f"a 'pairs' stage needs n_pairs > 0, got {self.n_pairs}")


#: The shipped schedule: induction warm-up on repeated segments, then pair recall at growing L.
BASE_SCHEDULE = (
    BaseStage("repeat", 65, 400, 64),
    BaseStage("pairs", 128, 200, 32, n_pairs=4),
    BaseStage("pairs", 256, 200, 16, n_pairs=8),
    BaseStage("pairs", 512, 300, 8, n_pairs=4),
)


@dataclass(frozen=True)
class BaseTrainConfig:
    """Architecture and training of the shipped base."""

    d_model: int = param(64, doc="hidden size", source="deviation: toy base")
    n_layer: int = param(2, doc="decoder layers", source="deviation: toy base (2 = minimal composition)")
    n_head: int = param(4, doc="attention heads", source="paper: spec, 4 heads")
    n_kv_head: int = param(2, doc="key/value heads (GQA)", source="paper: spec, 2 KV heads")
    intermediate: int = param(128, doc="MLP width", source="deviation: toy base")
    max_positions: int = param(1024, doc="Llama max positions", source="deviation: toy base")
    query_len: int = param(16, doc="final query span (= the claim's chunk w)", source="deviation: w=16")
    stages: tuple[BaseStage, ...] = param(
        BASE_SCHEDULE,
        doc="training stages, run in order (repeated-segment warm-up, then pair recall at growing L)",
        source="deviation: toy base; pair recall alone stays on its plateau (README, Diagnosis)",
    )
    lr: float = param(3e-3, doc="learning rate (linear warm-up, then constant)", source="deviation: toy base")
    warmup: int = param(50, doc="warm-up steps", source="deviation: toy base")
    seed: int = param(
        0, doc="seed of the initialisation and of the data stream", source="deviation: toy base"
    )

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("stages must not be empty")

    @property
    def steps(self) -> int:
        """Total AdamW steps over all stages."""
        return sum(st.steps for st in self.stages)

    @classmethod
    def from_dict(cls, d: dict) -> BaseTrainConfig:
        """Inverse of :func:`config_dict` (as stored in ``training.json``)."""
        d = dict(d)
        d["stages"] = tuple(BaseStage(**st) for st in d["stages"])
        return cls(**d)


def build_base(cfg: BaseTrainConfig) -> LlamaForCausalLM:
    """A randomly initialised Llama of the base's shape, seeded by ``cfg.seed`` (fp32, eager)."""
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.n_layer,
        num_attention_heads=cfg.n_head,
        num_key_value_heads=cfg.n_kv_head,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = LlamaForCausalLM(config)
    return model


def _lr_at(step: int, cfg: BaseTrainConfig) -> float:
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup)


def _stage_batch(st: BaseStage, cfg: BaseTrainConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    if st.kind == "repeat":
        return make_repeat_segments(st.batch_size, st.seq_len, seed=seed)
    task = PairTask(n_pairs=st.n_pairs)
    return make_pair_recall(st.batch_size, st.seq_len, cfg.query_len, seed=seed, task=task)


def train_base(
    cfg: BaseTrainConfig,
    *,
    steps: int | None = None,
    log: Callable[[int, float], None] | None = None,
) -> tuple[LlamaForCausalLM, list[float]]:
    """Train the base with full attention through ``cfg.stages`` (labelled tokens only).

    Deterministic for a given ``cfg`` on one thread: step ``s`` (counted over all stages) uses
    data seed ``cfg.seed * 1_000_003 + s``. One AdamW optimiser runs through every stage. ``steps``
    stops early, so a short run reproduces the first losses of the full one.

    Args:
        cfg: architecture and training settings.
        steps: stop after this many steps (default ``cfg.steps``).
        log: called as ``log(step, loss)`` after every step.

    Returns:
        The trained model (eval mode, eager attention) and the per-step training losses.
    """
    return _run_base(cfg, steps=steps, log=log)


def _run_base(
    cfg: BaseTrainConfig,
    *,
    steps: int | None = None,
    log: Callable[[int, float], None] | None = None,
    state: dict[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    every: int = 200,
) -> tuple[LlamaForCausalLM, list[float]]:
    """The loop of :func:`train_base`, which can start from a ``state`` that ``checkpoint``
    received (called every ``every`` steps with the model, optimiser, next step and losses)."""
    n = cfg.steps if steps is None else steps
    if n < 0 or n > cfg.steps:
        raise ValueError(f"steps must be in [0, {cfg.steps}], got {n}")
    model = build_base(cfg)
    model.config._attn_implementation = "sdpa"  # training speed; the maps are the same maths
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    losses: list[float] = []
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, losses = state["step"], list(state["losses"])
    stage_of = [st for st in cfg.stages for _ in range(st.steps)]
    for s in range(start, n):
        for group in opt.param_groups:
            group["lr"] = _lr_at(s, cfg)
        ids, labels = _stage_batch(stage_of[s], cfg, cfg.seed * 1_000_003 + s)
        loss = model(input_ids=ids, labels=labels).loss
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
    model.config._attn_implementation = "eager"
    return model.eval(), losses


def _base_quality(model: LlamaForCausalLM, cfg: BaseTrainConfig) -> dict[str, float]:
    """Held-out quality of a trained base: recall of 4 pairs at L = 512 on 512 rows it never saw,
    the recall with each layer's reads of the context blocked, and each layer's attention mass
    from the query key to the fact's value (64 of the rows)."""
    ids, labels = make_pair_recall(512, 512, cfg.query_len, seed=10**7 + cfg.seed)
    with torch.no_grad():
        logits = torch.cat([model(input_ids=ids[i : i + 64]).logits for i in range(0, 512, 64)])
    mask = labels[:, 1:] != -100
    quality = {
        "heldout_accuracy": float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())
    }
    for i in range(cfg.n_layer):
        quality[f"accuracy_layer_{i}_blocked"] = knockout_accuracy(
            model, ids[:64], labels[:64], cfg.query_len, [i]
        )
    for i, mass in enumerate(retrieval_mass(model, ids[:64], labels[:64])):
        quality[f"value_attention_layer_{i}"] = mass
    return quality


def pretrain_base(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of the shipped base: :func:`train_base` with the default :class:`BaseTrainConfig`.

    Writes ``config.json`` and ``model.safetensors`` (``save_pretrained``) and ``training.json``
    into ``out``. ``training.json`` records the config, every step's loss and the quality on
    held-out rows: recall of 4 pairs at L = 512, the recall with each layer's reads of the context
    blocked (:func:`knockout_accuracy`), and each layer's attention on the fact's value
    (:func:`retrieval_mass`). An unfinished run checkpoints into ``out`` every 200 steps and
    resumes from there when called again.

    Args:
        out: the folder to write.
        progress: called as ``progress("base", done, total)`` every 50 steps.
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """
    cfg = BaseTrainConfig()
    return run_lm_recipe(
        out, method="activation_beacon", name="base", config=cfg, steps=cfg.steps,
        train=functools.partial(_run_base, cfg), quality=lambda m: _base_quality(m, cfg),
        progress=progress, max_steps=max_steps,
    )  # fmt: skip


def load_base(directory: str | os.PathLike[str] = BASE_DIR) -> LlamaForCausalLM:
    """The shipped base (or one :func:`pretrain_base` wrote to ``directory``), fp32, eval mode.

    Raises:
        ArtefactMissingError: the folder lacks ``config.json``, ``model.safetensors`` or
            ``training.json`` (the message names the command that trains it).
    """
    d = require_artefact(directory, method="activation_beacon", name="base")
    model = LlamaForCausalLM.from_pretrained(d, local_files_only=True, attn_implementation="eager")
    return model.eval()


def _block_context_hook(query_len: int):
    """A pre-hook for ``self_attn`` that stops the last ``query_len`` positions from reading the
    context before them (bos at position 0 stays visible as the attention sink)."""

    def hook(module, args, kwargs):
        h = kwargs["hidden_states"]
        b, length = h.shape[:2]
        neg = torch.finfo(h.dtype).min
        mask = torch.full((length, length), neg, dtype=h.dtype, device=h.device).triu(1)
        mask[length - query_len :, 1 : length - query_len] = neg
        kwargs["attention_mask"] = mask.expand(b, 1, length, length)
        return args, kwargs

    return hook


@torch.no_grad()
def knockout_accuracy(
    model: LlamaForCausalLM, ids: torch.Tensor, labels: torch.Tensor, query_len: int, layers: list[int]
) -> float:
    """Answer accuracy when ``layers`` cannot read the context from the query span.

    In each listed layer, attention from the last ``query_len`` positions to the context before
    them (positions ``1 .. L - query_len - 1``) is masked out; every other layer and position
    attends as usual. If the recall survives blocking layers ≥ 1 in this way, the value reached
    the query in layer 0; if it collapses, the value is read beyond layer 0.

    Args:
        model: a stock Llama with eager attention (the hook replaces its 4-D additive mask).
        ids: (B, L) rows of :func:`make_pair_recall`, answers within the last ``query_len``.
        labels: (B, L) its labels.
        query_len: length of the final query span.
        layers: indices of the layers to block.

    Returns:
        Accuracy on the labelled tokens, in [0, 1].

    Raises:
        ValueError: the model does not use eager attention, or a layer index is out of range.
    """
    if model.config._attn_implementation != "eager":
        raise ValueError("knockout_accuracy needs eager attention (load_base gives it)")
    blocks = model.model.layers
    if any(not 0 <= i < len(blocks) for i in layers):
        raise ValueError(f"layers must be in [0, {len(blocks)}), got {layers}")
    handles = [
        blocks[i].self_attn.register_forward_pre_hook(_block_context_hook(query_len), with_kwargs=True)
        for i in layers
    ]
    try:
        logits = model(input_ids=ids).logits
    finally:
        for hd in handles:
            hd.remove()
    mask = labels[:, 1:] != -100
    return float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())


def config_dict(cfg: BaseTrainConfig) -> dict:
    """``cfg`` as a JSON-ready dict."""
    return asdict(cfg)


@torch.no_grad()
def retrieval_mass(model: LlamaForCausalLM, ids: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """Attention mass per layer from each query key ``k_t`` to its value ``v_t`` in the context.

    For every answered position (the query key, whose next token is the label), take each
    head's attention weight on the context position holding the same value token right after
    the same key, keep the largest over heads, and average over all queries.

    Args:
        model: a stock Llama with eager attention (attention weights are returned).
        ids: (B, L) rows of :func:`make_pair_recall`.
        labels: (B, L) its labels.

    Returns:
        One float per layer, in [0, 1].
    """
    out = model(input_ids=ids, output_attentions=True)
    per_layer = [[] for _ in out.attentions]
    b_idx, pos = (labels[:, 1:] != -100).nonzero(as_tuple=True)  # pos = query key position
    for b, q in zip(b_idx.tolist(), pos.tolist(), strict=True):
        key, val = ids[b, q], ids[b, q + 1]
        row = ids[b, :q]
        hits = ((row[:-1] == key) & (row[1:] == val)).nonzero(as_tuple=True)[0]
        v_pos = int(hits[0]) + 1  # the fact's value token
        for layer, att in enumerate(out.attentions):
            per_layer[layer].append(float(att[b, :, q, v_pos].max()))
    return [sum(x) / len(x) for x in per_layer]
