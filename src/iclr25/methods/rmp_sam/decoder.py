"""The shared dynamic-convolution decoder of RMP-SAM (K-Net-style iterative kernel updates).

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2. Kernel update after K-Net (Zhang et al., NeurIPS 2021, Eqs. 4-7).
Each stage: hard mask pooling (a sum over the binarised mask), the gated kernel update, query
self-attention and an FFN, then class / mask / IoU heads; masks are dynamic convolutions
``M = K . F`` (a per-pixel dot product of each kernel with the feature map).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ClassHead",
    "DecoderStage",
    "KernelUpdate",
    "cosine_logits",
    "dynamic_masks",
    "hard_mask_pool",
    "mlp",
]


def dynamic_masks(kernels: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """Mask logits of dynamic convolution, ``M[b, n] = sum_c K[b, n, c] F[b, c]``.

    Shape:
        kernels (B, N, C), features (B, C, H, W) -> (B, N, H, W).

    Example:
        >>> dynamic_masks(torch.ones(1, 2, 3), torch.ones(1, 3, 4, 5)).shape
        torch.Size([1, 2, 4, 5])
    """
    return torch.einsum("bnc,bchw->bnhw", kernels, features)


def hard_mask_pool(mask_logits: torch.Tensor, features: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """Hard mask pooling: ``f[b, n] = sum_hw 1[sigmoid(M[b, n]) > t] F[b, :, h, w]`` (a sum, no gradient
    through the threshold; an empty mask gives a zero vector).

    Shape:
        mask_logits (B, N, H, W), features (B, C, H, W) -> (B, N, C).
    """
    hard = (torch.sigmoid(mask_logits.detach()) > threshold).to(features.dtype)
    return torch.einsum("bnhw,bchw->bnc", hard, features)


def mlp(cin: int, hidden: int, cout: int, layers: int) -> nn.Sequential:
    """``layers`` linear layers with ReLU between them."""
    mods: list[nn.Module] = []
    dims = [cin] + [hidden] * (layers - 1) + [cout]
    for i in range(layers):
        mods.append(nn.Linear(dims[i], dims[i + 1]))
        if i < layers - 1:
            mods.append(nn.ReLU(inplace=True))
    return nn.Sequential(*mods)


class KernelUpdate(nn.Module):
    """The gated kernel update of K-Net.

    ``(p_in, p_out) = W_f f``; ``(i_in, i_out) = W_k K``; ``g = i_in * p_in``;
    ``gate_i = sigmoid(LN(W_i g))``, ``gate_u = sigmoid(LN(W_u g))``;
    ``K' = ReLU(LN(W_o (gate_u * LN(p_out) + gate_i * LN(i_out))))``.

    Shape:
        pooled (B, N, C), kernels (B, N, C) -> (B, N, C).
    """

    def __init__(self, c: int) -> None:
        super().__init__()
        self.c = c
        self.feat_proj = nn.Linear(c, 2 * c)
        self.kernel_proj = nn.Linear(c, 2 * c)
        self.input_gate = nn.Linear(c, c)
        self.update_gate = nn.Linear(c, c)
        self.norm_input_gate = nn.LayerNorm(c)
        self.norm_update_gate = nn.LayerNorm(c)
        self.norm_p_out = nn.LayerNorm(c)
        self.norm_i_out = nn.LayerNorm(c)
        self.fc = nn.Linear(c, c)
        self.fc_norm = nn.LayerNorm(c)

    def forward(self, pooled: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
        p_in, p_out = self.feat_proj(pooled).split(self.c, dim=-1)
        i_in, i_out = self.kernel_proj(kernels).split(self.c, dim=-1)
        g = i_in * p_in
        gate_i = torch.sigmoid(self.norm_input_gate(self.input_gate(g)))
        gate_u = torch.sigmoid(self.norm_update_gate(self.update_gate(g)))
        k = gate_u * self.norm_p_out(p_out) + gate_i * self.norm_i_out(i_out)
        return F.relu(self.fc_norm(self.fc(k)))


def cosine_logits(h: torch.Tensor, class_embed: torch.Tensor | None, logit_scale: float) -> torch.Tensor:
    """Scaled cosine of each query embedding against fixed class embeddings, the max over each
    class's prototypes, and a zero "no object" prototype (its logit is 0).

    Shape:
        h (B, N, D), class_embed (K, P, D) -> (B, N, K + 1).

    Example:
        >>> cosine_logits(torch.ones(1, 1, 2), torch.tensor([[[1.0, 0.0]]]), 10.0)
        tensor([[[7.0711, 0.0000]]])
    """
    if class_embed is None:
        raise ValueError("a cosine class head needs class embeddings (K, P, D)")
    h = F.normalize(h, dim=-1)
    cos = torch.einsum("bnd,kpd->bnkp", h, class_embed).amax(-1)  # (B, N, K), max over prototypes
    zero = torch.zeros_like(cos[..., :1])  # the fixed zero "no object" prototype: logit 0
    return torch.cat([cos * logit_scale, zero], dim=-1)


class ClassHead(nn.Module):
    """Linear-LN-ReLU, then a learned linear classifier or (``cosine``) a 3-layer MLP and
    :func:`cosine_logits` against fixed class embeddings.

    Args:
        c: query width C.
        num_classes: K (without no-object).
        kind: "linear" or "cosine".
        embed_dim: class-embedding width (cosine).
        logit_scale: cosine scale.
        bias: bias in the first Linear (the released ``cls_fcs.0`` has none).

    Shape:
        queries (B, N, C) -> logits (B, N, K + 1); the last column is "no object".
    """

    def __init__(
        self, c: int, num_classes: int, kind: str, embed_dim: int, logit_scale: float, *, bias: bool = True
    ) -> None:
        super().__init__()
        self.pre = nn.Sequential(nn.Linear(c, c, bias=bias), nn.LayerNorm(c), nn.ReLU(inplace=True))
        self.kind = kind
        self.logit_scale = logit_scale
        if kind == "linear":
            self.out: nn.Module = nn.Linear(c, num_classes + 1)
        else:
            self.out = mlp(c, c, embed_dim, 3)

    def forward(self, q: torch.Tensor, class_embed: torch.Tensor | None) -> torch.Tensor:
        h = self.out(self.pre(q))
        if self.kind == "linear":
            return h
        return cosine_logits(h, class_embed, self.logit_scale)


class DecoderStage(nn.Module):
    """One shared stage: pooling + kernel update, self-attention, FFN and the three heads.

    Args:
        c: kernel width C.
        heads: self-attention heads.
        ffn_dim: FFN hidden width.
        num_classes: K (without no-object).
        class_kind: "linear" or "cosine".
        embed_dim: class-embedding width (cosine head).
        logit_scale: cosine scale.
        temperature: class logits are divided by it (cosine head).
        dynamic: run hard mask pooling and the kernel update (False: static kernels).
        threshold: hard-mask threshold.
        head_bias: bias in the first Linear of the class and mask branches (released: none).
        iou_from: the IoU MLP reads the query ("query") or the mask branch's hidden features after
            its Linear-LN-ReLU ("mask", as released).
    """

    def __init__(
        self,
        c: int,
        heads: int,
        ffn_dim: int,
        num_classes: int,
        *,
        class_kind: str = "linear",
        embed_dim: int = 64,
        logit_scale: float = 100.0,
        temperature: float = 0.1,
        dynamic: bool = True,
        threshold: float = 0.5,
        head_bias: bool = True,
        iou_from: str = "query",
    ) -> None:
        super().__init__()
        if iou_from not in ("query", "mask"):
            raise ValueError(f"iou_from must be 'query' or 'mask', got {iou_from!r}")
        self.iou_from = iou_from
        self.dynamic = dynamic
        self.threshold = threshold
        self.temperature = temperature if class_kind == "cosine" else 1.0
        self.update = KernelUpdate(c) if dynamic else None
        self.attn = nn.MultiheadAttention(c, heads, batch_first=True)
        self.attn_norm = nn.LayerNorm(c)
        self.ffn = nn.Sequential(nn.Linear(c, ffn_dim), nn.ReLU(inplace=True), nn.Linear(ffn_dim, c))
        self.ffn_norm = nn.LayerNorm(c)
        self.cls = ClassHead(c, num_classes, class_kind, embed_dim, logit_scale, bias=head_bias)
        self.mask_head = nn.Sequential(
            nn.Linear(c, c, bias=head_bias), nn.LayerNorm(c), nn.ReLU(inplace=True), nn.Linear(c, c)
        )
        self.iou_head = mlp(c, c, 1, 3)

    def forward(
        self,
        kernels: torch.Tensor,
        masks: torch.Tensor,
        features: torch.Tensor,
        *,
        attn_mask: torch.Tensor | None = None,
        class_embed: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        q = kernels
        if self.update is not None:
            q = self.update(hard_mask_pool(masks, features, self.threshold), q)
        q = self.attn_norm(q + self.attn(q, q, q, attn_mask=attn_mask, need_weights=False)[0])
        q = self.ffn_norm(q + self.ffn(q))
        if self.iou_from == "mask":
            hidden = self.mask_head[:3](q)  # Linear-LN-ReLU of the mask branch, read by both heads
            kernel, iou = self.mask_head[3](hidden), self.iou_head(hidden)
        else:
            kernel, iou = self.mask_head(q), self.iou_head(q)
        return {
            "queries": q,
            "logits": self.cls(q, class_embed) / self.temperature,
            "masks": dynamic_masks(kernel, features),
            "iou": iou.squeeze(-1),
        }
