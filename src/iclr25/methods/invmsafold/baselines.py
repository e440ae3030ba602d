"""IF-AR: a structure-conditioned autoregressive inverse-folding transformer (ESM-IF1-like stand-in).

Baseline of *Fast Uncovering of Protein Sequence Diversity from Structure*, Silva, Meynard-Piganeau,
Lucibello, Feinauer, ICLR 2025, arXiv:2406.11975, whose main competitor is ESM-IF1 (Hsu et al.,
2022): an encoder over the structure and a decoder that emits one residue at a time with causal
self-attention and cross-attention to the structure. Here a small post-LN decoder (2 layers, d = 64)
with a key/value cache for sampling; the structure encoder is the same :class:`LatticeEncoder` type
InvMSAFold uses. Each sampled sequence costs L decoder passes, against InvMSAFold's one network
pass per structure plus O(L K q) Potts arithmetic per sequence.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .encoders import LatticeEncoder
from .potts import _categorical

__all__ = ["IFAR"]


class _Layer(nn.Module):
    """Post-LN decoder layer: causal self-attention, cross-attention, feed-forward."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv, self.o1 = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.q2, self.kv2, self.o2 = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def _heads(self, x: Tensor) -> Tensor:
        return x.view(*x.shape[:-1], self.h, self.dh).transpose(-2, -3)  # [N, H, T, dh]

    def _merge(self, x: Tensor) -> Tensor:
        return x.transpose(-2, -3).reshape(*x.shape[:-3], x.shape[-2], self.h * self.dh)  # [N, T, d]

    def memory_kv(self, mem: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention keys/values of the structure memory, computed once per structure."""
        k, v = self.kv2(mem).chunk(2, -1)
        return self._heads(k), self._heads(v)

    def forward(
        self,
        x: Tensor,
        mem_kv: tuple[Tensor, Tensor],
        mem_mask: Tensor | None,
        cache: tuple[Tensor, Tensor, int] | None = None,
    ) -> Tensor:
        q, k, v = (self._heads(t) for t in self.qkv(x).chunk(3, -1))
        if cache is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one new position: append to the cache and attend over the prefix
            ck, cv, t = cache
            ck[:, :, t : t + 1], cv[:, :, t : t + 1] = k, v
            a = F.scaled_dot_product_attention(q, ck[:, :, : t + 1], cv[:, :, : t + 1])
        x = self.n1(x + self.o1(self._merge(a)))
        mk, mv = mem_kv
        a = F.scaled_dot_product_attention(self._heads(self.q2(x)), mk, mv, attn_mask=mem_mask)
        x = self.n2(x + self.o2(self._merge(a)))
        return self.n3(x + self.ff2(torch.relu(self.ff1(x))))


class IFAR(nn.Module):
    """Autoregressive inverse-folding transformer conditioned on a lattice structure.

    Args:
        encoder: the structure encoder (trained jointly).
        q: number of residue states.
        d_model: decoder width.
        n_layers: decoder layers.
        n_heads: attention heads.
        dim_feedforward: feed-forward width.

    Shape:
        ``forward(feats [B, L, F], tokens [B, M, L], padding_mask [B, L]) -> logits [B, M, L, q]``
        (teacher forcing: position i sees tokens ``< i`` and the whole structure).

    Example:
        >>> import numpy as np
        >>> from iclr25.methods.invmsafold import LatticeStructure
        >>> enc = LatticeEncoder(max_len=4, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
        >>> m = IFAR(enc, q=20, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16)
        >>> s = LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [1, 1], [1, 0]]))
        >>> m.sample(s, 3, seed=0).shape
        torch.Size([3, 4])
    """

    def __init__(
        self,
        encoder: LatticeEncoder,
        *,
        q: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        dim_feedforward: int,
    ) -> None:
        super().__init__()
        if q < 2 or n_layers < 1 or d_model % n_heads:
            raise ValueError("need q >= 2, n_layers >= 1 and d_model divisible by n_heads")
        self.encoder, self.q, self.d, self.heads, self.ff = encoder, q, d_model, n_heads, dim_feedforward
        self.mem = nn.Linear(encoder.embed_dim, d_model)
        self.tok = nn.Embedding(q + 1, d_model)  # token q is the start symbol
        self.pos = nn.Embedding(encoder.max_len, d_model)
        self.layers = nn.ModuleList(_Layer(d_model, n_heads, dim_feedforward) for _ in range(n_layers))
        self.head = nn.Linear(d_model, q)

    def _memory(self, feats: Tensor, padding_mask: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        mem = self.mem(self.encoder(feats, padding_mask))  # [B, L, d]
        return [layer.memory_kv(mem) for layer in self.layers]

    def forward(self, feats: Tensor, tokens: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Teacher-forced next-residue logits (see class docstring)."""
        B, M, L = tokens.shape
        kvs = self._memory(feats, padding_mask)
        kvs = [(k.repeat_interleave(M, 0), v.repeat_interleave(M, 0)) for k, v in kvs]  # [B*M, H, L, dh]
        mask = None
        if padding_mask is not None:
            mask = (~padding_mask).repeat_interleave(M, 0)[:, None, None, :]  # True = attend
        start = torch.full((B * M, 1), self.q, dtype=torch.long, device=tokens.device)
        inp = torch.cat([start, tokens.reshape(B * M, L)[:, :-1]], 1)  # [B*M, L]
        x = self.tok(inp) + self.pos.weight[:L]
        for layer, kv in zip(self.layers, kvs, strict=True):
            x = layer(x, kv, mask)
        return self.head(x).view(B, M, L, self.q)

    @torch.no_grad()
    def sample(self, structure: object, n: int, *, temperature: float = 1.0, seed: int = 0) -> Tensor:
        """Sample ``n`` sequences residue by residue with a key/value cache.

        Args:
            structure: a lattice structure (or its coordinates).
            n: number of sequences.
            temperature: divides the logits.
            seed: seed of a CPU generator; its draws are moved to the model's device, so a seed
                gives the same random stream on every device.

        Returns:
            ``[n, L]`` tokens on the model's device.
        """
        if n < 1 or temperature <= 0:
            raise ValueError("need n >= 1 and temperature > 0")
        p = next(self.parameters())
        g = torch.Generator().manual_seed(seed)  # CPU stream; draws move to the model's device
        feats = self.encoder.features(structure).to(p.device, p.dtype)[None]
        L = feats.shape[1]
        kvs = [(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in self._memory(feats, None)]
        dh = self.d // self.heads
        caches = [
            (
                torch.empty(n, self.heads, L, dh, device=p.device),
                torch.empty(n, self.heads, L, dh, device=p.device),
            )
            for _ in self.layers
        ]
        out = torch.empty(n, L, dtype=torch.long, device=p.device)
        prev = torch.full((n,), self.q, dtype=torch.long, device=p.device)
        for t in range(L):
            x = (self.tok(prev) + self.pos.weight[t])[:, None]  # [n, 1, d]
            for layer, kv, (ck, cv) in zip(self.layers, kvs, caches, strict=True):
                x = layer(x, kv, None, cache=(ck, cv, t))
            prev = _categorical(self.head(x[:, 0]) / temperature, g)
            out[:, t] = prev
        return out

    def log_prob(self, structure: object, tokens: Tensor) -> Tensor:
        """Exact ``log p(s | structure)`` of ``[N, L]`` tokens (on any device), ``[N]`` on the model's."""
        p = next(self.parameters())
        tokens = tokens.to(p.device)
        feats = self.encoder.features(structure).to(p.device, p.dtype)[None]
        logits = self(feats, tokens[None])[0]
        return torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0].sum(-1)

    def macs_per_sequence(self, length: int) -> int:
        """Multiply-adds of the decoder to sample one sequence of ``length`` with the KV cache.

        Per position t (1-based) and layer: self-attention projections ``4 d²``, scores and mix ``2 t d``,
        cross-attention query/output ``2 d²`` and scores/mix ``2 L d`` (memory keys/values are computed
        once per structure and excluded, like the encoder), feed-forward ``2 d ff``; plus the output
        head ``d q`` per position.
        """
        d, ff, n = self.d, self.ff, len(self.layers)
        total = 0
        for t in range(1, length + 1):
            total += n * (4 * d * d + 2 * t * d + 2 * d * d + 2 * length * d + 2 * d * ff) + d * self.q
        return total
