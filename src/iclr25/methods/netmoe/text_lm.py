"""Real routing for NetMoE: a byte-level MoE language model trained on text shipped with Python packages.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025)
rests on routing **locality** (Sec. 3, Fig. 2): tokens of one training sample prefer a few
experts. Its objective (Eq. 5/6/10) prices a sample's device by layer l's combine *and* layer
l+1's dispatch, and Sec. 3.3 predicts layer l+1's routing by feeding layer l's input to the
router of layer l+1. This module supplies both from a real model:

* :func:`package_text_corpus`: a heterogeneous, fully local corpus, read byte by byte from files
  that ship with the Python standard library, ``torch``, ``numpy`` and ``scipy`` (Python source,
  English help text, C/C++/CUDA headers, type stubs, Cython declarations, numeric text data).
  The file list is a fixed set of glob patterns, sorted; files are split into training and
  held-out sets by their position in that list.
* :class:`TextMoELM`: a small causal transformer whose FFNs are top-k MoE blocks (sparse expert
  compute), trained by :func:`train_text_moe_lm` with a Switch-style balance loss.
* :meth:`TextMoELM.trace`: per layer, the routed experts and the **predicted** experts of the
  next layer (router l+1 applied to the input of MoE layer l), for samples longer than the
  training context (routed in consecutive context-sized chunks).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from iclr25._core.claims import ProgressFn

__all__ = ["RoutingTrace", "TextCorpus", "TextMoELM", "package_text_corpus", "train_text_moe_lm"]

#: (kind, package, glob pattern relative to the package folder); ``stdlib`` is the folder of ``os``.
_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("python", "stdlib", "*.py"),
    ("prose", "stdlib", "pydoc_data/topics.py"),
    ("cpp_header", "torch", "include/c10/util/*.h"),
    ("cuda_header", "torch", "include/**/*.cuh"),
    ("c_header", "numpy", "_core/include/numpy/*.h"),
    ("stub", "numpy", "**/*.pyi"),
    ("cython", "scipy", "**/*.pxd"),
    ("data", "scipy", "**/*.txt"),
)


def _package_dir(name: str) -> Path:
    if name == "stdlib":
        return Path(os.__file__).parent
    module = __import__(name)
    return Path(module.__file__).parent


@dataclass(frozen=True)
class TextCorpus:
    """Byte windows cut from local package files, split into training and held-out files.

    Args:
        train: ``[N_train, context + 1]`` int64 training windows (inputs and next-byte labels).
        heldout: ``[N_eval, sample_len]`` int64 windows from held-out files (one file each).
        heldout_kind: ``[N_eval]`` int64 index into ``kinds`` of each held-out window.
        kinds: names of the file kinds.
        files: number of files read.
    """

    train: np.ndarray
    heldout: np.ndarray
    heldout_kind: np.ndarray
    kinds: tuple[str, ...]
    files: int


def package_text_corpus(
    *,
    context: int,
    sample_len: int,
    max_files_per_kind: int = 64,
    train_windows_per_file: int = 24,
    heldout_windows_per_file: int = 4,
    heldout_every: int = 4,
) -> TextCorpus:
    """Read the fixed list of package files and cut them into byte windows.

    Every ``heldout_every``-th file of each kind (in sorted order) is held out; the rest give
    training windows of ``context + 1`` bytes (evenly spaced, at most ``train_windows_per_file``
    per file), the held-out files windows of ``sample_len`` bytes. Files shorter than one window
    are skipped. Single-file kinds (``prose``) are split by byte range instead: the last quarter
    is held out.

    Args:
        context: training context (bytes per training input).
        sample_len: S, bytes of one held-out sample (may exceed ``context``).
        max_files_per_kind: cap on files of one kind (the first ones in sorted order).
        train_windows_per_file: cap on training windows per file (per quarter for ``prose``).
        heldout_windows_per_file: cap on held-out windows per file.
        heldout_every: hold out every n-th file of a kind.

    Returns:
        A :class:`TextCorpus`.

    Raises:
        RuntimeError: no file of some kind could be found (a broken installation).
    """
    if context < 1 or sample_len < 1 or heldout_every < 2:
        raise ValueError("context and sample_len must be >= 1 and heldout_every >= 2")
    train: list[np.ndarray] = []
    held: list[np.ndarray] = []
    held_kind: list[int] = []
    kinds = tuple(dict.fromkeys(k for k, _, _ in _SOURCES))
    n_files = 0

    def windows(data: np.ndarray, width: int, cap: int) -> list[np.ndarray]:
        n = len(data) // width
        if n == 0:
            return []
        picks = np.unique(np.linspace(0, n - 1, min(n, cap)).astype(np.int64))
        return [data[p * width : (p + 1) * width] for p in picks]

    for kind in kinds:
        files: list[Path] = []
        for k, pkg, pattern in _SOURCES:
            if k == kind:
                files += sorted(p for p in _package_dir(pkg).glob(pattern) if p.is_file())
        files = files[:max_files_per_kind]
        if not files:
            raise RuntimeError(f"no {kind!r} files found for the local text corpus")
        for idx, path in enumerate(files):
            data = np.frombuffer(path.read_bytes(), dtype=np.uint8).astype(np.int64)
            n_files += 1
            if len(files) == 1:  # one long file: split by byte range
                cut = len(data) * 3 // 4
                train += windows(data[:cut], context + 1, 4 * train_windows_per_file)
                got = windows(data[cut:], sample_len, 4 * heldout_windows_per_file)
            elif idx % heldout_every == heldout_every - 1:
                got = windows(data, sample_len, heldout_windows_per_file)
            else:
                train += windows(data, context + 1, train_windows_per_file)
                got = []
            held += got
            held_kind += [kinds.index(kind)] * len(got)
    if not held or not train:
        raise RuntimeError("the local text corpus is empty")
    return TextCorpus(
        train=np.stack(train),
        heldout=np.stack(held),
        heldout_kind=np.asarray(held_kind, dtype=np.int64),
        kinds=kinds,
        files=n_files,
    )


class _MoE(nn.Module):
    """Top-k MoE FFN with sparse expert compute (copies sorted by expert, one matmul per expert)."""

    def __init__(self, d: int, d_ff: int, experts: int, top_k: int, gen: torch.Generator) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Parameter(torch.randn(d, experts, generator=gen) * d**-0.5)
        self.w1 = nn.Parameter(torch.randn(experts, d, d_ff, generator=gen) * d**-0.5)
        self.w2 = nn.Parameter(torch.randn(experts, d_ff, d, generator=gen) * d_ff**-0.5)
        self.experts, self.top_k = experts, top_k

    def route(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(expert ids [..., k], their renormalised probabilities [..., k], softmax [..., E])``."""
        logits = self.norm(h) @ self.gate  # [..., E]
        top_val, top_idx = logits.topk(self.top_k, dim=-1)
        return top_idx, torch.softmax(top_val, -1), torch.softmax(logits, -1)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, probs, full = self.route(h)
        x = self.norm(h).reshape(-1, h.shape[-1])  # [T, d]
        flat = ids.reshape(-1)  # [T*k]
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.experts).tolist()
        xs = x[order // self.top_k]  # [T*k, d] copies grouped by expert
        outs = []
        for e, chunk in enumerate(torch.split(xs, counts)):
            if chunk.shape[0]:
                outs.append(F.gelu(chunk @ self.w1[e]) @ self.w2[e])
        y_sorted = torch.cat(outs)  # [T*k, d]
        y = torch.empty_like(y_sorted).index_copy(0, order, y_sorted)  # back to (token, slot) order
        y = (y.view(*ids.shape, -1) * probs.unsqueeze(-1)).sum(-2)  # [..., d]
        return h + y, ids, full


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, experts: int, top_k: int, gen: torch.Generator) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        with torch.no_grad():  # every weight from ``gen``: the global RNG is never read
            bound = math.sqrt(6.0 / (4 * d))  # Xavier-uniform bound of the [3d, d] input projection
            self.attn.in_proj_weight.copy_((torch.rand(3 * d, d, generator=gen) * 2 - 1) * bound)
            self.attn.in_proj_bias.zero_()
            self.attn.out_proj.weight.copy_((torch.rand(d, d, generator=gen) * 2 - 1) * d**-0.5)
            self.attn.out_proj.bias.zero_()
        self.moe = _MoE(d, d_ff, experts, top_k, gen)


@dataclass(frozen=True)
class RoutingTrace:
    """Routing of a batch through every MoE layer.

    Args:
        expert_ids: per layer, routed experts ``[I, S, k]`` (int64).
        predicted_next: per layer l < L, router l+1 applied to the input of MoE layer l
            ``[I, S, k]`` (Sec. 3.3's prediction of layer l+1's routing); L - 1 entries.
    """

    expert_ids: list[np.ndarray]
    predicted_next: list[np.ndarray]


class TextMoELM(nn.Module):
    """A byte-level causal transformer whose FFNs are top-k MoE blocks.

    Args:
        vocab: vocabulary size (256 for bytes).
        d_model: width.
        n_layers: L, blocks (attention + MoE each).
        n_heads: attention heads.
        d_ff: expert hidden width.
        num_experts: E.
        top_k: k.
        context: longest input (learned positions).
        generator: parameter initialisation.

    Shape:
        tokens ``[B, T]`` (T <= context) -> logits ``[B, T, vocab]``.

    Example:
        >>> lm = TextMoELM(d_model=16, n_layers=2, d_ff=16, num_experts=4, context=8,
        ...                generator=torch.Generator().manual_seed(0))
        >>> logits, aux, ids = lm(torch.zeros(2, 8, dtype=torch.long))
        >>> tuple(logits.shape), len(ids), tuple(ids[0].shape)
        ((2, 8, 256), 2, (2, 8, 2))
    """

    def __init__(
        self,
        vocab: int = 256,
        *,
        d_model: int = 64,
        n_layers: int = 4,
        n_heads: int = 4,
        d_ff: int = 128,
        num_experts: int = 16,
        top_k: int = 2,
        context: int = 128,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k must lie in [1, {num_experts}], got {top_k}")
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        with torch.no_grad():
            self.tok.weight.copy_(torch.randn(vocab, d_model, generator=generator) * 0.5)
            self.pos.weight.copy_(torch.randn(context, d_model, generator=generator) * 0.1)
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, d_ff, num_experts, top_k, generator) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(vocab, d_model, generator=generator) * d_model**-0.5)
        self.num_experts, self.context = num_experts, context

    def _run(
        self, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        seq = tokens.shape[1]
        if seq > self.context:
            raise ValueError(f"input of {seq} tokens exceeds the context {self.context}")
        h = self.tok(tokens) + self.pos(torch.arange(seq, device=tokens.device))
        mask = torch.triu(torch.full((seq, seq), float("-inf"), device=tokens.device), diagonal=1)
        aux = h.new_zeros(())
        ids_all: list[torch.Tensor] = []
        pred: list[torch.Tensor] = []
        for li, blk in enumerate(self.blocks):
            x = blk.ln(h)
            h = h + blk.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
            if li + 1 < len(self.blocks):  # Sec. 3.3: this layer's input through the next router
                pred.append(self.blocks[li + 1].moe.route(h)[0])
            h, ids, full = blk.moe(h)
            frac = F.one_hot(ids, self.num_experts).float().mean((0, 1, 2))  # [E] share of copies
            aux = aux + self.num_experts * (frac * full.mean((0, 1))).sum()  # Switch balance loss
            ids_all.append(ids)
        return self.head(self.ln_f(h)), aux, ids_all, pred

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Returns ``(logits, aux_loss, expert_ids per layer [B, T, k])``."""
        logits, aux, ids, _ = self._run(tokens)
        return logits, aux, ids

    @torch.no_grad()
    def trace(self, tokens: torch.Tensor, batch: int = 64) -> RoutingTrace:
        """Routing of samples of any length, routed in consecutive chunks of ``context`` tokens.

        Args:
            tokens: ``[I, S]`` int64.
            batch: chunks per forward.

        Returns:
            A :class:`RoutingTrace` with ``[I, S, k]`` arrays.
        """
        n, seq = tokens.shape
        c = self.context
        chunks = math.ceil(seq / c)
        pad = chunks * c - seq
        padded = F.pad(tokens, (0, pad)) if pad else tokens
        flat = padded.reshape(n * chunks, c)  # [I*chunks, context]
        ids: list[list[torch.Tensor]] = []
        pred: list[list[torch.Tensor]] = []
        for start in range(0, flat.shape[0], batch):
            _, _, i, p = self._run(flat[start : start + batch])
            ids.append(i)
            pred.append(p)

        def cat(parts: list[list[torch.Tensor]], layer: int) -> np.ndarray:
            x = torch.cat([q[layer] for q in parts]).reshape(n, chunks * c, -1)[:, :seq]  # [I, S, k]
            return x.cpu().numpy().astype(np.int64)

        n_layers = len(self.blocks)
        return RoutingTrace(
            expert_ids=[cat(ids, layer) for layer in range(n_layers)],
            predicted_next=[cat(pred, layer) for layer in range(n_layers - 1)],
        )


def train_text_moe_lm(
    model: TextMoELM,
    windows: np.ndarray,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    aux_weight: float = 0.01,
    seed: int,
    progress: ProgressFn | None = None,
) -> list[float]:
    """Next-byte training with Adam (cosine decay) and the balance loss; a fixed number of steps.

    Args:
        model: the LM (trained in place, left in eval mode).
        windows: ``[N, T + 1]`` int64 training windows.
        steps: optimiser steps.
        batch_size: windows per step, drawn with replacement from ``seed``.
        lr: peak learning rate.
        aux_weight: weight of the balance loss.
        seed: seed of the batch draws.
        progress: optional ``progress(stage, done, total)``, called every 5 % of the steps.

    Returns:
        The language-model loss (nats per byte) of every step.
    """
    data = torch.as_tensor(windows)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(steps, 1)))
    )
    gen = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    every = max(1, steps // 20)
    model.train()
    for step in range(steps):
        if progress is not None and step % every == 0:
            progress("text MoE LM training", step, steps)
        batch = data[torch.randint(0, data.shape[0], (batch_size,), generator=gen)]
        logits, aux, _ = model(batch[:, :-1])
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        (lm + aux_weight * aux).backward()
        opt.step()
        sched.step()
        losses.append(float(lm.detach()))
    model.eval()
    return losses
