"""Mask2Former-style decoder: the efficiency reference of RMP-SAM.

Paper compared: *Masked-attention Mask Transformer for Universal Image Segmentation*, Cheng et al.,
CVPR 2022 (arXiv:2112.01527), as used for the speed comparison of RMP-SAM (Xu et al., ICLR 2025,
arXiv:2401.10228, Table 1). A multi-scale pixel decoder (transformer encoder over the 1/8, 1/16
and 1/32 tokens, then an FPN step to 1/4) and a masked-attention transformer decoder whose layers
cycle over the three scales, each with a prediction head that gives the next attention mask.
Deviation: the pixel decoder's encoder uses plain multi-head self-attention instead of
multi-scale deformable attention (no compiled op is available on CPU); at our token counts this
is cheaper than deformable attention would be, which can only favour the baseline.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.rmp_sam.decoder import mlp

__all__ = ["Mask2FormerDecoder", "attention_flops_counted", "decoder_flops", "decoder_latency", "sine_pos_2d"]


def sine_pos_2d(h: int, w: int, c: int, like: torch.Tensor) -> torch.Tensor:
    """2-D sine positional encoding (DETR), (h * w, c)."""
    npf = c // 2
    ys = torch.arange(1, h + 1, dtype=like.dtype, device=like.device)[:, None].expand(h, w) / h * 2 * math.pi
    xs = torch.arange(1, w + 1, dtype=like.dtype, device=like.device)[None, :].expand(h, w) / w * 2 * math.pi
    dim_t = 10000 ** (2 * (torch.arange(npf, dtype=like.dtype, device=like.device) // 2) / npf)
    px, py = xs[..., None] / dim_t, ys[..., None] / dim_t
    px = torch.stack([px[..., 0::2].sin(), px[..., 1::2].cos()], dim=-1).flatten(-2)
    py = torch.stack([py[..., 0::2].sin(), py[..., 1::2].cos()], dim=-1).flatten(-2)
    return torch.cat([py, px], dim=-1).flatten(0, 1)


class _EncLayer(nn.Module):
    def __init__(self, c: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(c, heads, batch_first=True)
        self.n1, self.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.ffn = nn.Sequential(nn.Linear(c, ffn), nn.ReLU(inplace=True), nn.Linear(ffn, c))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q = x + pos
        x = self.n1(x + self.attn(q, q, x, need_weights=False)[0])
        return self.n2(x + self.ffn(x))


class _DecLayer(nn.Module):
    def __init__(self, c: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.cross = nn.MultiheadAttention(c, heads, batch_first=True)
        self.self_attn = nn.MultiheadAttention(c, heads, batch_first=True)
        self.n1, self.n2, self.n3 = nn.LayerNorm(c), nn.LayerNorm(c), nn.LayerNorm(c)
        self.ffn = nn.Sequential(nn.Linear(c, ffn), nn.ReLU(inplace=True), nn.Linear(ffn, c))

    def forward(
        self, q: torch.Tensor, qpos: torch.Tensor, mem: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        q = self.n1(q + self.cross(q + qpos, mem + pos, mem, attn_mask=mask, need_weights=False)[0])
        k = q + qpos
        q = self.n2(q + self.self_attn(k, k, q, need_weights=False)[0])
        return self.n3(q + self.ffn(q))


class Mask2FormerDecoder(nn.Module):
    """Multi-scale pixel decoder + masked-attention transformer decoder.

    Args:
        in_channels: widths of the four backbone levels (strides 4..32).
        c: hidden width (the same C as RMP-SAM's neck).
        num_queries: N (the same as RMP-SAM's).
        num_classes: K (plus one no-object logit).
        enc_layers: pixel-decoder encoder layers (Mask2Former: 6).
        dec_layers: decoder layers, cycling over 3 scales (Mask2Former: 9).
        heads: attention heads.
        ffn_dim: FFN width.

    Shape:
        four backbone maps -> ``{"logits" (B, N, K + 1), "masks" (B, N, H/4, W/4)}``.

    Example:
        >>> m = Mask2FormerDecoder((8, 8, 8, 8), c=16, num_queries=4, num_classes=3, heads=2, ffn_dim=32)
        >>> feats = [torch.zeros(1, 8, 64 // s, 64 // s) for s in (4, 8, 16, 32)]
        >>> m(feats)["masks"].shape
        torch.Size([1, 4, 16, 16])
    """

    def __init__(
        self,
        in_channels: tuple[int, ...],
        *,
        c: int,
        num_queries: int,
        num_classes: int,
        enc_layers: int = 6,
        dec_layers: int = 9,
        heads: int = 8,
        ffn_dim: int = 1024,
    ) -> None:
        super().__init__()
        self.heads = heads
        self.proj = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(ci, c, 1), nn.GroupNorm(min(32, c), c)) for ci in in_channels[1:]]
        )
        self.level_embed = nn.Parameter(torch.zeros(3, c))
        self.encoder = nn.ModuleList([_EncLayer(c, heads, ffn_dim) for _ in range(enc_layers)])
        self.lateral = nn.Sequential(nn.Conv2d(in_channels[0], c, 1, bias=False), nn.GroupNorm(min(32, c), c))
        self.fpn_out = nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.GroupNorm(min(32, c), c), nn.ReLU()
        )
        self.mask_features = nn.Conv2d(c, c, 1)
        self.query_feat = nn.Embedding(num_queries, c)
        self.query_pos = nn.Embedding(num_queries, c)
        self.dec_level_embed = nn.Embedding(3, c)
        self.layers = nn.ModuleList([_DecLayer(c, heads, ffn_dim) for _ in range(dec_layers)])
        self.norm = nn.LayerNorm(c)
        self.cls = nn.Linear(c, num_classes + 1)
        self.mask_embed = mlp(c, c, c, 3)

    def _predict(self, q: torch.Tensor, mf: torch.Tensor, size: tuple[int, int] | None):
        q = self.norm(q)
        masks = torch.einsum("bqc,bchw->bqhw", self.mask_embed(q), mf)
        attn = None
        if size is not None:
            m = F.interpolate(masks, size=size, mode="bilinear", align_corners=False)
            attn = (m.sigmoid().flatten(2) < 0.5).repeat_interleave(self.heads, dim=0)  # True blocks
            attn[attn.all(-1)] = False  # a query with an empty mask attends everywhere
        return self.cls(q), masks, attn

    def forward(self, feats: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        srcs = [p(f) for p, f in zip(self.proj, feats[1:], strict=True)]  # 1/8, 1/16, 1/32
        shapes = [s.shape[-2:] for s in srcs]
        tokens = torch.cat([s.flatten(2).transpose(1, 2) for s in srcs], dim=1)  # (B, L, C)
        pos = torch.cat(
            [
                sine_pos_2d(h, w, tokens.shape[-1], tokens) + self.level_embed[i]
                for i, (h, w) in enumerate(shapes)
            ]
        )[None]
        for layer in self.encoder:
            tokens = layer(tokens, pos)
        outs, start = [], 0
        for h, w in shapes:
            outs.append(tokens[:, start : start + h * w].transpose(1, 2).reshape(tokens.shape[0], -1, h, w))
            start += h * w
        y = self.lateral(feats[0]) + F.interpolate(
            outs[0], size=feats[0].shape[-2:], mode="bilinear", align_corners=False
        )
        mf = self.mask_features(self.fpn_out(y))  # (B, C, H/4, W/4)
        mems = [outs[2], outs[1], outs[0]]  # coarse to fine: 1/32, 1/16, 1/8
        b = tokens.shape[0]
        q = self.query_feat.weight[None].expand(b, -1, -1)
        qpos = self.query_pos.weight[None].expand(b, -1, -1)
        logits, masks, attn = self._predict(q, mf, tuple(mems[0].shape[-2:]))
        for i, layer in enumerate(self.layers):
            lvl = i % 3
            mem = mems[lvl]
            mpos = sine_pos_2d(*mem.shape[-2:], mem.shape[1], mem)[None] + self.dec_level_embed.weight[lvl]
            q = layer(q, qpos, mem.flatten(2).transpose(1, 2), mpos, attn)
            nxt = mems[(i + 1) % 3]
            logits, masks, attn = self._predict(q, mf, tuple(nxt.shape[-2:]))
        return {"logits": logits, "masks": masks}


@torch.no_grad()
def decoder_latency(
    rmp_model,
    m2f: Mask2FormerDecoder,
    image_size: int,
    *,
    runs: int = 20,
    warmup: int = 3,
) -> dict[str, float]:
    """Median wall time (seconds) of RMP-SAM's neck + decoder and of the Mask2Former-style decoder on
    the same backbone features of one image, timed alternately in one process.

    Returns:
        ``{"rmp_s", "m2f_s", "ratio"}`` (ratio = RMP-SAM / Mask2Former).
    """
    rmp_model.eval()
    m2f.eval()
    dev = next(rmp_model.parameters()).device
    x = torch.rand(1, 3, image_size, image_size, generator=torch.Generator().manual_seed(0)).to(dev)
    feats = rmp_model.backbone((x - rmp_model.pixel_mean) / rmp_model.pixel_std)

    def rmp() -> None:
        rmp_model.decode(rmp_model.neck(feats), task="panoptic")

    def base() -> None:
        m2f(feats)

    for _ in range(warmup):
        rmp()
        base()
    ta, tb = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        rmp()
        ta.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        base()
        tb.append(time.perf_counter() - t0)
    a, b = float(torch.tensor(ta).median()), float(torch.tensor(tb).median())
    return {"rmp_s": a, "m2f_s": b, "ratio": a / b}


def decoder_flops(rmp_model, m2f: Mask2FormerDecoder, image_size: int) -> dict[str, float]:
    """Forward FLOPs (``torch.utils.flop_counter``) of RMP-SAM's neck + decoder and of the
    Mask2Former-style decoder on the same backbone features of one image.

    Attention runs on PyTorch's math path while counting (``SDPBackend.MATH``), so its two
    products, ``Q K^T`` and ``A V`` (``4 L S C`` FLOPs for L queries over S keys of width C), are
    recorded as matmuls: the fused CPU flash-attention kernel is invisible to the counter, which
    would drop the baseline's costliest part. ``DeformConv2d`` is not counted by the flop counter
    either, so its multiply-adds (2 C_in C_out 9 H W each) are added.

    Returns:
        ``{"rmp_gflops", "m2f_gflops", "ratio"}``.
    """
    from torchvision.ops import DeformConv2d

    rmp_model.eval()
    m2f.eval()
    dev = next(rmp_model.parameters()).device
    x = torch.zeros(1, 3, image_size, image_size, device=dev)
    with torch.no_grad():
        feats = [f.detach() for f in rmp_model.backbone((x - rmp_model.pixel_mean) / rmp_model.pixel_std)]
    extra = [0.0]

    def hook(mod: DeformConv2d, inp: tuple, out: torch.Tensor) -> None:
        extra[0] += (
            2.0 * mod.in_channels * mod.out_channels * 9 * out.shape[-2] * out.shape[-1] * out.shape[0]
        )

    handles = [m.register_forward_hook(hook) for m in rmp_model.neck.modules() if isinstance(m, DeformConv2d)]
    a = _counted_flops(lambda: rmp_model.decode(rmp_model.neck(feats), task="panoptic")) + extra[0]
    for h in handles:
        h.remove()
    b = _counted_flops(lambda: m2f(feats))
    return {"rmp_gflops": a / 1e9, "m2f_gflops": b / 1e9, "ratio": a / b}


def _counted_flops(fn) -> int:
    """The FLOPs ``torch.utils.flop_counter`` records while ``fn()`` runs (the counting of
    :func:`decoder_flops`), with scaled dot-product attention forced onto its math path so that the
    attention products are counted as the matmuls they are."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


@torch.no_grad()
def attention_flops_counted(m2f: Mask2FormerDecoder, image_size: int) -> float:
    """How much of one baseline attention layer the FLOP counting of :func:`decoder_flops` sees.

    Runs the first decoder layer's cross-attention as the decoder calls it (no attention weights
    returned) on the 1/8 map's token count and divides the counted FLOPs by the analytic count: the
    four projections, ``2 c^2 (2 n_q + 2 n_kv)``, plus the two attention products,
    ``4 n_q n_kv c`` (2 FLOPs per multiply-add). 1.0 when every product is counted; below 1 when
    the counter misses a fused attention kernel (torch's CPU flash attention is not recorded, which
    is why the counting runs attention on the math path).

    Returns:
        counted / analytic FLOPs.
    """
    attn = m2f.layers[0].cross
    c, n_q, n_kv = attn.embed_dim, m2f.query_feat.num_embeddings, (image_size // 8) ** 2
    q, kv = torch.zeros(1, n_q, c), torch.zeros(1, n_kv, c)
    counted = _counted_flops(lambda: attn(q, kv, kv, need_weights=False))
    return counted / (2 * c * c * (2 * n_q + 2 * n_kv) + 4 * n_q * n_kv * c)
