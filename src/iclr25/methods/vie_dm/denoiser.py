"""The x_0-predicting transformer denoiser of VIE-DM.

x0_hat = f(x_t, t, cond): the noisy embeddings x_t (B, L, d_emb) are projected to the model width,
positions and a sinusoidal timestep embedding are added, the VTC module cross-attends them to the
visual memory, and bidirectional self-attention layers follow; a linear map returns to d_emb. The
no-VTC ablation (``use_vtc=False``) instead prepends one pooled visual token to the sequence and
replaces the cross-attention layers by self-attention layers of the same count (a DiffuSeq-like
prefix condition).

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025.
    Gong et al., "DiffuSeq", ICLR 2023 (x_0 parameterisation, transformer denoiser).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from iclr25.methods.vie_dm.vtc import VisionTextCondition

__all__ = ["Denoiser", "timestep_embedding"]


def timestep_embedding(t: Tensor, dim: int, max_period: float = 10000.0) -> Tensor:
    """Sinusoidal embedding (B, dim) of integer timesteps t (B,)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], -1)
    return torch.cat([emb, torch.zeros_like(emb[:, :1])], -1) if dim % 2 else emb


def _self_layers(dim: int, heads: int, n: int) -> nn.ModuleList:
    return nn.ModuleList(
        nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
        for _ in range(n)
    )


class Denoiser(nn.Module):
    """x_0 predictor over (B, L, d_emb) with a visual condition.

    Args:
        d_emb: embedding width diffused.
        dim: model width.
        heads: attention heads.
        seq_len: L.
        vtc_layers: cross-attention layers of the VTC (or prefix self-attention layers without it).
        layers: bidirectional self-attention layers after them.
        use_vtc: False for the no-VTC ablation.

    Shape:
        x_t (B, L, d_emb), t (B,), target (B, r, dim), context (B, k, dim), pooled (B, dim)
        -> (B, L, d_emb).
    """

    def __init__(
        self, *, d_emb: int, dim: int, heads: int, seq_len: int, vtc_layers: int, layers: int, use_vtc: bool
    ) -> None:
        super().__init__()
        self.use_vtc, self.dim = use_vtc, dim
        self.in_proj = nn.Sequential(nn.Linear(d_emb, dim), nn.Tanh(), nn.Linear(dim, dim))
        self.pos = nn.Parameter(torch.randn(seq_len, dim) * 0.02)
        self.time = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        if use_vtc:
            self.vtc: nn.Module = VisionTextCondition(dim, heads, vtc_layers)
        else:
            self.vtc = _self_layers(dim, heads, vtc_layers)
        self.body = _self_layers(dim, heads, layers)
        self.norm = nn.LayerNorm(dim)
        self.out_proj = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, d_emb))

    def forward(
        self,
        x_t: Tensor,
        t: Tensor,
        target: Tensor,
        context: Tensor,
        pooled: Tensor,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """Predict x_0 from x_t at original timestep t under the visual condition."""
        L = x_t.shape[1]
        h = self.in_proj(x_t) + self.pos[:L] + self.time(timestep_embedding(t, self.dim))[:, None, :]
        if self.use_vtc:
            memory = torch.cat([target, context], 1)  # (B, r + k, dim)
            h = self.vtc(h, memory, memory_mask)
        else:
            h = torch.cat([pooled[:, None, :], h], 1)  # (B, 1 + L, dim): the pooled visual prefix
            for layer in self.vtc:
                h = layer(h)
        for layer in self.body:
            h = layer(h)
        if not self.use_vtc:
            h = h[:, 1:]  # (B, L, dim): drop the prefix
        return self.out_proj(self.norm(h))
