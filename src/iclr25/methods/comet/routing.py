"""COMET routing: k-winner-take-all masks from a fixed random projection of the raw input.

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones. ICLR 2025, arXiv:2410.08003.

Implements the routing network of Sec. 3: the k-winner-take-all operator C_k (Eq. 3, with a
documented tie rule), and the fixed random chain c_l = V_l z_{l-1}, m_l = C_{k_l}(c_l),
z_l = m_l * c_l with z_0 = x_0 (Eqs. 4-6). V_l is drawn once from U(-N_{l-1}^{-1/2}, N_{l-1}^{-1/2})
with its own seeded generator and kept as a registered buffer (saved, never trained).

References:
    Shaier et al., "More Experts Than Galaxies", ICLR 2025, arXiv:2410.08003, Sec. 3, Eqs. 3-6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["COMETRouter", "keep_count", "kwta_mask", "mask_cosine", "routing_generator"]

Ties = Literal["threshold", "exact"]


def keep_count(width: int, p_keep: float) -> int:
    """k = max(1, int(N * p_k)): how many units a layer of width N keeps.

    Args:
        width: N, the layer width (>= 1).
        p_keep: p_k in (0, 1].

    Returns:
        The number of winners k.

    Raises:
        ValueError: ``p_keep`` outside (0, 1] or ``width`` < 1.

    Example:
        >>> keep_count(10, 0.25), keep_count(3, 0.1), keep_count(7, 1.0)
        (2, 1, 7)
    """
    _check_p(p_keep)
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    return max(1, int(width * p_keep))


def _check_p(p_keep: float) -> None:
    if not (isinstance(p_keep, (int, float)) and 0.0 < float(p_keep) <= 1.0):
        raise ValueError(f"p_keep must lie in (0, 1], got {p_keep!r}")


def kwta_mask(scores: Tensor, k: int, ties: Ties = "threshold") -> Tensor:
    """The k-winner-take-all mask C_k over the last axis (Eq. 3).

    ``ties="threshold"`` keeps every unit whose score is >= the k-th largest score, so ties at
    the boundary are all kept and a row can hold more than k ones (the official code's rule).
    ``ties="exact"`` keeps exactly k units per row (ties broken by ``torch.topk``'s order).
    Only the per-row k-th value (threshold) or the k winner indices (exact) are allocated next
    to the mask itself.

    Args:
        scores: routing scores c, any shape ``(..., N)``.
        k: number of winners, 1 <= k <= N.
        ties: "threshold" or "exact".

    Returns:
        A boolean mask of the same shape as ``scores``.

    Shape:
        scores: (..., N) -> mask: (..., N).

    Raises:
        ValueError: ``k`` outside [1, N] or an unknown tie rule.

    Example:
        >>> kwta_mask(torch.tensor([[3.0, 1.0, 2.0, 2.0]]), 2).int().tolist()
        [[1, 0, 1, 1]]
        >>> kwta_mask(torch.tensor([[3.0, 1.0, 2.0, 2.0]]), 2, ties="exact").sum().item()
        2
    """
    n = scores.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"k must lie in [1, {n}], got {k}")
    if ties not in ("threshold", "exact"):
        raise ValueError(f"ties must be 'threshold' or 'exact', got {ties!r}")
    if k == n:
        return torch.ones_like(scores, dtype=torch.bool)
    if ties == "threshold":
        # k-th largest = (N - k + 1)-th smallest; one value per row.
        kth = torch.kthvalue(scores, n - k + 1, dim=-1, keepdim=True).values  # (..., 1)
        return scores >= kth
    idx = torch.topk(scores, k, dim=-1, sorted=False).indices  # (..., k)
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, idx, True)


def mask_cosine(a: Sequence[Tensor] | Tensor, b: Sequence[Tensor] | Tensor) -> Tensor:
    """Cosine similarity of concatenated binary masks, row by row (the paper's overlap score).

    With exactly k ones in both masks it equals the overlap fraction |m ∩ m'| / k.

    Args:
        a: one mask tensor ``(n, N)`` or a list of per-layer masks ``(n, N_l)``.
        b: the same layout as ``a``.

    Returns:
        Cosine per row, shape ``(n,)``.

    Example:
        >>> m1 = torch.tensor([[1, 1, 0, 0]]); m2 = torch.tensor([[1, 0, 1, 0]])
        >>> mask_cosine(m1, m2).tolist()
        [0.5]
    """
    ca = torch.cat(list(a), dim=-1) if not isinstance(a, Tensor) else a
    cb = torch.cat(list(b), dim=-1) if not isinstance(b, Tensor) else b
    ca, cb = ca.double(), cb.double()
    num = (ca * cb).sum(-1)
    den = torch.sqrt((ca * ca).sum(-1) * (cb * cb).sum(-1))
    return num / den.clamp_min(1e-12)


def routing_generator(seed: int, stream: int = 1) -> torch.Generator:
    """A CPU ``torch.Generator`` for routing matrices, independent of the backbone's stream.

    Args:
        seed: the model seed.
        stream: stream id (the backbone uses stream 0).

    Returns:
        A seeded generator.

    Example:
        >>> a = torch.rand(2, generator=routing_generator(0))
        >>> b = torch.rand(2, generator=routing_generator(0))
        >>> bool((a == b).all())
        True
    """
    state = np.random.SeedSequence([int(seed), int(stream)]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state) & ((1 << 63) - 1))


def draw_routing_matrix(out_features: int, in_features: int, generator: torch.Generator) -> Tensor:
    """V ~ U(-N_in^{-1/2}, N_in^{-1/2}) of shape (out, in), the default ``nn.Linear`` range."""
    bound = 1.0 / math.sqrt(in_features)
    return (torch.rand(out_features, in_features, generator=generator) * 2.0 - 1.0) * bound


class COMETRouter(nn.Module):
    """The fixed routing network of COMET (Eqs. 4-6): per-layer masks from the raw input alone.

    The matrices ``V_l`` (buffers ``weight_0 .. weight_{L-1}``) are drawn once from a generator
    seeded by ``seed`` and are never trained: they live in ``state_dict`` and not in
    ``parameters()``. Masks are computed under ``no_grad``.

    Args:
        in_features: N_0, width of x_0.
        widths: N_1..N_L of the masked hidden layers.
        p_keep: p_k in (0, 1]; k_l = max(1, int(N_l p_k)).
        seed: seed of the routing generator.
        ties: tie rule of :func:`kwta_mask`.
        routing_norm: None, or "layer_noaffine" (parameter-free layer norm of c_l before the
            top-k, on the routing path only).

    Shape:
        x0: (..., N_0) -> list of L boolean masks (..., N_l).

    Example:
        >>> router = COMETRouter(4, (8, 8), p_keep=0.5, seed=0)
        >>> [m.sum(-1).tolist() for m in router(torch.randn(3, 4))]
        [[4, 4, 4], [4, 4, 4]]
        >>> sum(p.numel() for p in router.parameters())
        0
    """

    def __init__(
        self,
        in_features: int,
        widths: Sequence[int],
        p_keep: float,
        seed: int = 0,
        ties: Ties = "threshold",
        routing_norm: Literal["layer_noaffine"] | None = None,
    ) -> None:
        super().__init__()
        _check_p(p_keep)
        if in_features < 1 or not widths or any(w < 1 for w in widths):
            raise ValueError(f"in_features and widths must be positive, got {in_features}, {tuple(widths)}")
        if ties not in ("threshold", "exact"):
            raise ValueError(f"ties must be 'threshold' or 'exact', got {ties!r}")
        if routing_norm not in (None, "layer_noaffine"):
            raise ValueError(f"routing_norm must be None or 'layer_noaffine', got {routing_norm!r}")
        self.in_features = int(in_features)
        self.widths = tuple(int(w) for w in widths)
        self.p_keep = float(p_keep)
        self.seed = int(seed)
        self.ties: Ties = ties
        self.routing_norm = routing_norm
        self.ks = tuple(keep_count(w, p_keep) for w in self.widths)
        gen = routing_generator(seed)
        fan_in = (self.in_features, *self.widths[:-1])
        for i, (n_out, n_in) in enumerate(zip(self.widths, fan_in, strict=True)):
            self.register_buffer(f"weight_{i}", draw_routing_matrix(n_out, n_in, gen))

    @property
    def weights(self) -> list[Tensor]:
        """The routing matrices V_1..V_L (buffers), shapes (N_l, N_{l-1})."""
        return [getattr(self, f"weight_{i}") for i in range(len(self.widths))]

    def scores(self, layer: int, z: Tensor) -> Tensor:
        """c_l = V_l z (Eq. 4), with the optional parameter-free normalisation."""
        w = getattr(self, f"weight_{layer}")
        c = z.to(w.dtype) @ w.T  # (..., N_l)
        if self.routing_norm == "layer_noaffine":
            c = nn.functional.layer_norm(c, c.shape[-1:])
        return c

    def mask(self, layer: int, z: Tensor) -> Tensor:
        """m_l = C_k(V_l z) for one layer from an arbitrary routing input z (no chain)."""
        with torch.no_grad():
            return kwta_mask(self.scores(layer, z), self.ks[layer], self.ties)

    def forward(self, x0: Tensor) -> list[Tensor]:
        """Masks of every layer from the raw input: z_0 = x_0, z_l = m_l * c_l (Eqs. 4-6).

        Args:
            x0: raw inputs (..., N_0).

        Returns:
            One boolean mask (..., N_l) per masked layer.

        Raises:
            ValueError: ``x0``'s last axis is not ``in_features``.
        """
        if x0.shape[-1] != self.in_features:
            raise ValueError(f"input width {x0.shape[-1]} does not match the router's in_features "
                             f"{self.in_features}")  # fmt: skip
        masks: list[Tensor] = []
        with torch.no_grad():
            z = x0.detach()
            for i, k in enumerate(self.ks):
                c = self.scores(i, z)  # (..., N_l)
                m = kwta_mask(c, k, self.ties)
                masks.append(m)
                z = c * m  # carry the routing state forward (g = identity)
        return masks

    def extra_repr(self) -> str:
        return f"in={self.in_features}, widths={self.widths}, p_keep={self.p_keep}, ks={self.ks}"

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        for i, w in enumerate(self.weights):
            key = f"{prefix}weight_{i}"
            if key not in state_dict:
                raise ValueError(f"state_dict has no routing buffer {key!r}; masks cannot be restored")
            if tuple(state_dict[key].shape) != tuple(w.shape):
                raise ValueError(f"routing buffer {key!r} has shape {tuple(state_dict[key].shape)}, "
                                 f"expected {tuple(w.shape)}")  # fmt: skip
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
