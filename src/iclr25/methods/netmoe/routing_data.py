"""Routing traces for NetMoE: synthetic locality traces and a tiny MoE language model's real routing.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025)
builds on the observation (Sec. 3, Fig. 2) that tokens of one training sample show locality in
expert routing. Two sources of ``expert_ids [I, S, k]`` are provided:

* :func:`synthetic_trace`: per-sample expert preferences ``p_i ~ Dirichlet(beta 1_E)`` mixed as
  ``lam p_i + (1 - lam) q`` with a global ``q`` (uniform); every token draws k distinct experts
  (Gumbel top-k). Small ``beta`` and ``lam = 1``: strong locality; ``lam = 0``: uniform routing.
* :class:`MemmapCorpus`: the paper-scale data path, a tokenised local corpus (NumPy memmap) with
  a deterministic global batch, so every rank can read any sample (and its labels) by global id.
* :class:`TinyMoELM`: a 2-layer pre-norm transformer whose FFNs are :class:`DenseMoE` blocks,
  trained by :func:`train_tiny_moe_lm` on :func:`domain_corpus` (each document from its own
  domain's Markov chain over a vocabulary subset), so locality arises without being injected;
  :meth:`TinyMoELM.routing` records its traces.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .layer import DenseMoE

if TYPE_CHECKING:
    from iclr25._core.claims import ProgressFn

__all__ = [
    "MemmapCorpus",
    "TinyMoELM",
    "domain_corpus",
    "routing_entropy",
    "synthetic_trace",
    "train_tiny_moe_lm",
]


def synthetic_trace(
    n_samples: int,
    seq_len: int,
    num_experts: int,
    top_k: int = 2,
    *,
    beta: float,
    lam: float = 1.0,
    seed: int | np.random.Generator,
) -> np.ndarray:
    """Routing with tunable per-sample locality.

    Args:
        n_samples: I.
        seq_len: S.
        num_experts: E.
        top_k: k distinct experts per token.
        beta: Dirichlet concentration of a sample's preference (small: concentrated).
        lam: weight of the per-sample preference against the uniform global ``q``.
        seed: an int or a NumPy generator.

    Returns:
        ``expert_ids`` int64 ``[I, S, k]``.

    Example:
        >>> synthetic_trace(2, 3, 8, 2, beta=0.1, seed=0).shape
        (2, 3, 2)
    """
    if beta <= 0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"need beta > 0 and 0 <= lam <= 1, got beta={beta}, lam={lam}")
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k must lie in [1, {num_experts}], got {top_k}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    p = rng.dirichlet(np.full(num_experts, beta), size=n_samples)  # [I, E]
    mix = lam * p + (1.0 - lam) / num_experts  # [I, E]
    gumbel = rng.gumbel(size=(n_samples, seq_len, num_experts))
    keys = np.log(np.maximum(mix, 1e-300))[:, None, :] + gumbel  # [I, S, E]
    return np.argsort(-keys, axis=-1, kind="stable")[..., :top_k].astype(np.int64)


def routing_entropy(expert_ids: np.ndarray, num_experts: int) -> float:
    """Mean over samples of the entropy (nats) of the sample's empirical expert distribution."""
    ids = np.asarray(expert_ids)
    counts = np.stack([np.bincount(r.ravel(), minlength=num_experts) for r in ids]).astype(np.float64)
    prob = counts / counts.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(prob > 0, prob * np.log(prob), 0.0).sum(1)
    return float(ent.mean())


def domain_corpus(
    n_docs: int,
    seq_len: int,
    *,
    vocab: int = 256,
    domains: int = 8,
    words_per_domain: int = 48,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Documents from per-domain Markov chains over overlapping vocabulary subsets.

    The chains are drawn from ``seed`` only, so two calls with the same ``seed`` share domains;
    pass ``doc_seed`` streams via different ``n_docs`` draws of one call.

    Returns:
        ``tokens`` int64 ``[n_docs, seq_len]`` and ``domain`` int64 ``[n_docs]``.
    """
    rng = np.random.default_rng([seed, 7])
    subsets = [rng.choice(vocab, size=words_per_domain, replace=False) for _ in range(domains)]
    trans = [rng.dirichlet(np.full(words_per_domain, 0.1), size=words_per_domain) for _ in range(domains)]
    dom = rng.integers(0, domains, size=n_docs)
    tokens = np.empty((n_docs, seq_len), dtype=np.int64)
    for i in range(n_docs):
        state = rng.integers(words_per_domain)
        cdf = np.cumsum(trans[dom[i]], axis=1)
        u = rng.random(seq_len)
        for t in range(seq_len):
            tokens[i, t] = subsets[dom[i]][state]
            state = min(int(np.searchsorted(cdf[state], u[t])), words_per_domain - 1)
    return tokens, dom.astype(np.int64)


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, experts: int, top_k: int, gen: torch.Generator) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.moe = DenseMoE(d, d_ff, experts, top_k, generator=gen)


class TinyMoELM(nn.Module):
    """A tiny causal transformer whose FFNs are top-k MoE blocks (d = 64, 8 experts by default).

    Args:
        vocab: vocabulary size.
        d_model: width.
        n_layers: transformer blocks (each one attention + one MoE).
        n_heads: attention heads.
        d_ff: expert hidden width.
        num_experts: E.
        top_k: k.
        max_len: longest sequence.
        generator: parameter initialisation.

    Shape:
        tokens ``[B, S]`` -> logits ``[B, S, vocab]``.

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> lm = TinyMoELM(32, d_model=16, d_ff=16, num_experts=4, max_len=8, generator=gen)
        >>> logits, aux, ids = lm(torch.zeros(2, 8, dtype=torch.long))
        >>> tuple(logits.shape), len(ids), tuple(ids[0].shape)
        ((2, 8, 32), 2, (2, 8, 2))
    """

    def __init__(
        self,
        vocab: int,
        *,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int = 128,
        num_experts: int = 8,
        top_k: int = 2,
        max_len: int = 64,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        with torch.no_grad():
            self.tok.weight.copy_(torch.randn(vocab, d_model, generator=generator) * 0.5)
            self.pos.weight.copy_(torch.randn(max_len, d_model, generator=generator) * 0.1)
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, d_ff, num_experts, top_k, generator) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(vocab, d_model, generator=generator) * d_model**-0.5)
        self.num_experts = num_experts

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """Returns ``(logits, aux_loss, expert_ids per layer [B, S, k])``.

        ``aux_loss`` is the Switch-style balance loss ``E sum_e f_e P_e`` summed over layers.
        """
        seq = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(seq, device=tokens.device))
        mask = torch.triu(torch.full((seq, seq), float("-inf"), device=tokens.device), diagonal=1)
        aux = h.new_zeros(())
        ids_all = []
        for blk in self.blocks:
            x = blk.ln(h)
            h = h + blk.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
            gate_p = torch.softmax(blk.moe.norm(h) @ blk.moe.gate, -1)  # [B, S, E]
            h, ids, _ = blk.moe(h)
            frac = F.one_hot(ids, self.num_experts).float().mean((0, 1, 2))  # [E]
            aux = aux + self.num_experts * (frac * gate_p.mean((0, 1))).sum()
            ids_all.append(ids)
        return self.head(self.ln_f(h)), aux, ids_all

    @torch.no_grad()
    def routing(self, tokens: torch.Tensor) -> list[np.ndarray]:
        """Expert ids ``[I, S, k]`` of every MoE layer on ``tokens``."""
        return [ids.cpu().numpy() for ids in self(tokens)[2]]


def train_tiny_moe_lm(
    model: TinyMoELM,
    tokens: np.ndarray,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    aux_weight: float = 0.01,
    seed: int,
    progress: ProgressFn | None = None,
) -> list[float]:
    """Next-token training with ``torch.optim.Adam`` (no weight decay) and the balance loss; fixed steps.

    Args:
        model: the tiny MoE LM (trained in place, left in eval mode).
        tokens: ``[N, S + 1]`` token rows.
        steps: optimiser steps.
        batch_size: rows per step, drawn with replacement.
        lr: Adam learning rate.
        aux_weight: weight of the Switch balance loss.
        seed: seed of the batch draws.
        progress: optional ``progress(stage, done, total)``, called every 5 % of the steps.

    Returns:
        The language-model loss of every step.
    """
    data = torch.as_tensor(tokens)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    every = max(1, steps // 20)
    for step in range(steps):
        if progress is not None and step % every == 0:
            progress("tiny MoE LM training", step, steps)
        idx = torch.randint(0, data.shape[0], (batch_size,), generator=gen)
        batch = data[idx]
        logits, aux, _ = model(batch[:, :-1])
        lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        (lm + aux_weight * aux).backward()
        optimizer.step()
        losses.append(lm.detach().item())
    model.eval()
    return losses


class MemmapCorpus:
    """A tokenised corpus in a flat NumPy memmap, read as a deterministic global batch.

    Sample ``i`` of step ``t`` is the window of ``seq_len + 1`` tokens starting at an offset drawn
    from ``(seed, t)``, so any rank can read any global sample id (inputs and next-token labels),
    which is what a re-placed sample needs on its new device.

    Args:
        path: a raw token file (e.g. written by ``np.ndarray.tofile``).
        seq_len: S.
        dtype: token dtype of the file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the corpus is shorter than one window.

    Example:
        >>> import tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "tok.bin")
        >>> np.arange(100, dtype=np.uint16).tofile(f)
        >>> MemmapCorpus(f, seq_len=4).rows(step=0, sample_ids=np.array([0, 1]), global_batch=8, seed=0).shape
        (2, 5)
    """

    def __init__(self, path: str, seq_len: int, dtype: str = "uint16") -> None:
        import os

        if not os.path.exists(path):
            raise FileNotFoundError(f"corpus file {path!r} does not exist")
        self.tokens = np.memmap(path, dtype=np.dtype(dtype), mode="r")
        if len(self.tokens) < seq_len + 1:
            raise ValueError(f"corpus has {len(self.tokens)} tokens, fewer than one window of {seq_len + 1}")
        self.seq_len = seq_len

    def offsets(self, step: int, global_batch: int, seed: int) -> np.ndarray:
        """Start offsets ``[I]`` of the global batch of ``step``."""
        rng = np.random.default_rng([seed, step])
        return rng.integers(0, len(self.tokens) - self.seq_len, size=global_batch)

    def rows(self, step: int, sample_ids: np.ndarray, global_batch: int, seed: int) -> np.ndarray:
        """Token windows ``[len(sample_ids), S + 1]`` (int64) of the given global sample ids."""
        off = self.offsets(step, global_batch, seed)[np.asarray(sample_ids)]
        idx = off[:, None] + np.arange(self.seq_len + 1)[None, :]  # [n, S+1]
        return np.asarray(self.tokens[idx], dtype=np.int64)
