"""The pretrained base of the claim check: a tiny Llama that recalls key→value pairs, shipped as
package data, and the synthetic task it was trained on.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. The paper trains beacons on a
frozen, already pretrained LLM (Sec. 3.2, Sec. 4); this module provides such a base at toy scale.

The task (``make_pair_recall``) places key→value pairs ``k v`` in random filler and asks for
every value at the end of the sequence by repeating its key. A pair's value is only reachable
through a composed circuit: an earlier layer copies each key into the next position (a
previous-token head), and a later layer matches the queried key against it and reads the value
(an induction head). So the value is read in layer ≥ 1, where beacon key/values carry content
(a beacon's layer-0 key/values come from the ⟨b⟩ embedding alone).

``train_base`` is the deterministic training loop used by
``experiments/activation_beacon_base.py``; ``load_base`` reads the shipped weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from iclr25._core.config import param

__all__ = [
    "BASE_DIR",
    "BaseTrainConfig",
    "PairTask",
    "build_base",
    "load_base",
    "make_pair_recall",
    "retrieval_mass",
    "train_base",
]

#: Folder of the shipped base: ``config.json``, ``model.safetensors``, ``training.json``.
BASE_DIR = Path(__file__).parent / "data" / "base"


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


@dataclass(frozen=True)
class BaseTrainConfig:
    """Architecture and training of the shipped base."""

    d_model: int = param(64, doc="hidden size", source="deviation: toy base")
    n_layer: int = param(2, doc="decoder layers", source="deviation: toy base (2 = minimal composition)")
    n_head: int = param(4, doc="attention heads", source="paper: spec, 4 heads")
    n_kv_head: int = param(2, doc="key/value heads (GQA)", source="paper: spec, 2 KV heads")
    intermediate: int = param(128, doc="MLP width", source="deviation: toy base")
    max_positions: int = param(1024, doc="Llama max positions", source="deviation: toy base")
    seq_len: int = param(256, doc="training length L (the claim scores at 512)", source="deviation: CPU time")
    query_len: int = param(16, doc="final query span (= the claim's chunk w)", source="deviation: w=16")
    n_pairs: int = param(
        8, doc="pairs per training row (more answers per step)", source="deviation: toy base"
    )
    steps: int = param(2000, doc="AdamW steps", source="deviation: to convergence on the toy task")
    batch_size: int = param(16, doc="rows per step", source="deviation: toy base")
    lr: float = param(
        3e-3, doc="peak learning rate (linear warm-up, cosine decay)", source="deviation: toy base"
    )
    warmup: int = param(100, doc="warm-up steps", source="deviation: toy base")
    seed: int = param(
        0, doc="seed of the initialisation and of the data stream", source="deviation: toy base"
    )


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
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1.0 + torch.cos(torch.tensor(t * torch.pi)).item())


def train_base(
    cfg: BaseTrainConfig,
    *,
    steps: int | None = None,
    log: Callable[[int, float], None] | None = None,
) -> tuple[LlamaForCausalLM, list[float]]:
    """Train the base with full attention on :func:`make_pair_recall` (answer tokens only).

    Deterministic for a given ``cfg`` on one thread: batch ``s`` uses data seed
    ``cfg.seed * 1_000_003 + s``. ``steps`` stops early (the learning-rate schedule stays that
    of ``cfg.steps``), so a short run reproduces the first losses of the full one.

    Args:
        cfg: architecture and training settings.
        steps: stop after this many steps (default ``cfg.steps``).
        log: called as ``log(step, loss)`` after every step.

    Returns:
        The trained model (eval mode, eager attention) and the per-step training losses.
    """
    n = cfg.steps if steps is None else steps
    if n < 0 or n > cfg.steps:
        raise ValueError(f"steps must be in [0, {cfg.steps}], got {n}")
    model = build_base(cfg)
    model.config._attn_implementation = "sdpa"  # training speed; the maps are the same maths
    model.train()
    task = PairTask(n_pairs=cfg.n_pairs)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.98))
    losses: list[float] = []
    for s in range(n):
        for group in opt.param_groups:
            group["lr"] = _lr_at(s, cfg)
        ids, labels = make_pair_recall(
            cfg.batch_size, cfg.seq_len, cfg.query_len, seed=cfg.seed * 1_000_003 + s, task=task
        )
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if log is not None:
            log(s, losses[-1])
    model.config._attn_implementation = "eager"
    return model.eval(), losses


def load_base(directory: str | Path = BASE_DIR) -> LlamaForCausalLM:
    """The shipped base (or one saved by the training script to ``directory``), fp32, eval mode.

    Raises:
        FileNotFoundError: the folder lacks ``config.json`` or ``model.safetensors``.
    """
    d = Path(directory)
    for f in ("config.json", "model.safetensors"):
        if not (d / f).is_file():
            raise FileNotFoundError(f"base folder {str(d)!r} has no {f}")
    model = LlamaForCausalLM.from_pretrained(d, local_files_only=True, attn_implementation="eager")
    return model.eval()


def training_record(directory: str | Path = BASE_DIR) -> dict:
    """The shipped base's ``training.json``: its config, command and recorded losses."""
    return json.loads((Path(directory) / "training.json").read_text())


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
