"""Baselines of COMET on the shared trunk, and the broken variants used as negative controls.

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones. ICLR 2025, arXiv:2410.08003.

Implements the comparison models of Sec. 4: the standard dense MLP (same width), the smaller MLP
(width p_k N), dropout (drop probability 1 - p_k), Top-k (m_l = C_k(a_l)), a mixture of experts
(floor(1/p_k) experts of width p_k N behind a one-hidden-layer top-1 gate), Bernoulli masking
(one fixed random mask per training example, unmasked at test time) and layer-wise routing
(``COMETMLP(routing="layerwise")``). The MoE gate is Switch-style: the chosen expert's output is
multiplied by its gate probability and a load-balancing loss is added, so the gate is trained;
``paper_parity=True`` reproduces the official code's argmax gate that gets no gradient.

References:
    Shaier et al., "More Experts Than Galaxies", ICLR 2025, arXiv:2410.08003, Sec. 4.
    Fedus, Zoph, Shazeer, "Switch Transformers", JMLR 2022 (top-1 gate, load-balancing loss).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from iclr25.methods.comet.mlp import Activation, MaskedMLP, init_linear
from iclr25.methods.comet.routing import (
    Ties,
    _check_p,
    draw_routing_matrix,
    keep_count,
    kwta_mask,
)

__all__ = [
    "BernoulliMaskMLP",
    "DenseMLP",
    "MoEMLP",
    "ResampledRoutingMLP",
    "TopKMLP",
    "smaller_widths",
]


class DenseMLP(MaskedMLP):
    """The standard dense MLP (and, with ``dropout = 1 - p_k``, the dropout baseline).

    Example:
        >>> DenseMLP(4, (8,), 2, dropout=0.5)(torch.randn(3, 4)).shape
        torch.Size([3, 2])
    """


def smaller_widths(hidden: Sequence[int], p_keep: float) -> tuple[int, ...]:
    """Widths of the "smaller" baseline: k = max(1, int(N p_k)) per layer.

    Example:
        >>> smaller_widths((100, 100), 0.5)
        (50, 50)
    """
    return tuple(keep_count(int(h), p_keep) for h in hidden)


class TopKMLP(MaskedMLP):
    """Top-k baseline: each hidden layer keeps its k largest pre-activations, m_l = C_k(a_l).

    The masks depend on the trained weights, so they move as training proceeds.

    Example:
        >>> net = TopKMLP(4, (8,), 2, p_keep=0.25)
        >>> [m.sum(-1).tolist() for m in net(torch.randn(3, 4), return_masks=True)[1]]
        [[2, 2, 2]]
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        p_keep: float,
        activation: Activation = "softplus",
        seed: int = 0,
        ties: Ties = "threshold",
    ) -> None:
        _check_p(p_keep)
        super().__init__(in_features, hidden, out_features, activation=activation, seed=seed)
        self.ks = tuple(keep_count(h, p_keep) for h in self.hidden)
        self.ties: Ties = ties

    def layer_mask(self, layer: int, a: Tensor, x_prev: Tensor, index: Tensor | None) -> Tensor | None:
        with torch.no_grad():
            return kwta_mask(a.detach(), self.ks[layer], self.ties)


class BernoulliMaskMLP(MaskedMLP):
    """Bernoulli masking: a fixed random mask per training example id, unmasked at test time.

    Masks are drawn once per (example id, layer) with keep probability ``p_bernoulli`` from a
    generator seeded by ``mask_seed`` (keyed by id, not by pixel values). In eval mode, or when
    no ``index`` is given, nothing is masked (as in the official code).

    Args:
        in_features: N_0.
        hidden: hidden widths.
        out_features: output width.
        n_examples: number of training examples (ids 0..n-1).
        p_bernoulli: keep probability (p_k in the paper's text; 0.5 in the official code).
        activation: f.
        seed: backbone seed.
        mask_seed: seed of the mask table.

    Example:
        >>> net = BernoulliMaskMLP(4, (8,), 2, n_examples=10, p_bernoulli=0.5).train()
        >>> out, masks = net(torch.randn(2, 4), return_masks=True, index=torch.tensor([0, 1]))
        >>> masks[0].shape
        torch.Size([2, 8])
    """

    uses_example_index = True

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        n_examples: int,
        p_bernoulli: float = 0.5,
        activation: Activation = "softplus",
        seed: int = 0,
        mask_seed: int = 0,
    ) -> None:
        _check_p(p_bernoulli)
        super().__init__(in_features, hidden, out_features, activation=activation, seed=seed)
        gen = torch.Generator().manual_seed(int(mask_seed))
        for i, h in enumerate(self.hidden):
            self.register_buffer(f"table_{i}", torch.rand(n_examples, h, generator=gen) < p_bernoulli)

    def precompute_masks(self, x: Tensor, index: Tensor | None) -> list[Tensor] | None:
        if index is None or not self.training:
            return [torch.ones(x.shape[0], h, dtype=torch.bool, device=x.device) for h in self.hidden]
        return [getattr(self, f"table_{i}")[index] for i in range(len(self.hidden))]


class ResampledRoutingMLP(MaskedMLP):
    """Negative control: COMET with a fresh random V drawn at every forward pass.

    Masks still have exactly COMET's form, but an input gets a different expert on every call,
    so mask overlap no longer follows input similarity. Each V is drawn on the CPU from the
    model's own generator and then moved to the input's device, so the stream of draws is the
    same on every device.

    Example:
        >>> net = ResampledRoutingMLP(4, (8,), 2, p_keep=0.5)
        >>> x = torch.randn(1, 4)
        >>> bool((net(x, return_masks=True)[1][0] == net(x, return_masks=True)[1][0]).all())  # doctest: +SKIP
        False
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        p_keep: float,
        activation: Activation = "softplus",
        seed: int = 0,
    ) -> None:
        _check_p(p_keep)
        super().__init__(in_features, hidden, out_features, activation=activation, seed=seed)
        self.ks = tuple(keep_count(h, p_keep) for h in self.hidden)
        self._gen = torch.Generator().manual_seed(int(seed) + 7919)

    def precompute_masks(self, x: Tensor, index: Tensor | None) -> list[Tensor] | None:
        masks, z = [], x.detach()
        fan_in = (self.in_features, *self.hidden[:-1])
        for h, n_in, k in zip(self.hidden, fan_in, self.ks, strict=True):
            v = draw_routing_matrix(h, n_in, self._gen).to(z.device)  # fresh V every call
            c = z @ v.T
            m = kwta_mask(c, k)
            masks.append(m)
            z = c * m
        return masks


class MoEMLP(nn.Module):
    """Top-1 mixture of experts with a trained gate (Switch-style), or the official argmax gate.

    E = floor(1 / p_k) experts, each an MLP of widths p_k N with the same depth as the backbone,
    and a gate with one hidden layer. ``forward`` routes each example to its argmax expert and
    multiplies that expert's output by the gate probability; ``aux_loss`` holds
    ``alpha * E * sum_e f_e P_e`` (f_e: fraction of examples sent to e; P_e: mean probability).
    With ``paper_parity=True`` the output is not scaled and there is no auxiliary loss, so the
    gate never receives a gradient (the official code's behaviour).

    Args:
        in_features: N_0.
        hidden: backbone widths N (experts use p_k N).
        out_features: output width.
        p_keep: p_k.
        activation: f.
        seed: initialisation seed.
        gate_hidden: width of the gate's hidden layer (default: the expert width).
        balance_weight: alpha, the weight of the load-balancing loss.
        paper_parity: reproduce the official untrained gate.

    Example:
        >>> moe = MoEMLP(4, (8,), 2, p_keep=0.5)
        >>> moe(torch.randn(3, 4)).shape, len(moe.experts)
        (torch.Size([3, 2]), 2)
    """

    uses_example_index = False

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        p_keep: float,
        activation: Activation = "softplus",
        seed: int = 0,
        gate_hidden: int | None = None,
        balance_weight: float = 0.01,
        paper_parity: bool = False,
    ) -> None:
        super().__init__()
        _check_p(p_keep)
        self.in_features = int(in_features)
        self.n_experts = max(1, int(1.0 / p_keep))
        widths = smaller_widths(hidden, p_keep)
        self.experts = nn.ModuleList(
            MaskedMLP(in_features, widths, out_features, activation=activation, seed=seed + 101 * e)
            for e in range(self.n_experts)
        )
        gen = torch.Generator().manual_seed(int(seed) + 7)
        gh = gate_hidden or widths[0]
        self.gate = nn.Sequential(
            init_linear(in_features, gh, gen), nn.ReLU(), init_linear(gh, self.n_experts, gen)
        )
        self.balance_weight = float(balance_weight)
        self.paper_parity = bool(paper_parity)
        self.aux_loss: Tensor | None = None
        self.last_assignment: Tensor | None = None

    def forward(self, x: Tensor, return_masks: bool = False, index: Tensor | None = None) -> Tensor:
        """Outputs (n, out_features); sets ``aux_loss`` and ``last_assignment``."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input width {x.shape[-1]} does not match in_features {self.in_features}")
        probs = torch.softmax(self.gate(x), dim=-1)  # (n, E)
        choice = probs.argmax(-1)  # (n,)
        outs = torch.stack([e(x) for e in self.experts], dim=1)  # (n, E, out)
        picked = outs.gather(1, choice[:, None, None].expand(-1, 1, outs.shape[-1]))[:, 0]  # (n, out)
        self.last_assignment = choice.detach()
        if self.paper_parity:
            self.aux_loss = None
            return picked
        frac = torch.bincount(choice, minlength=self.n_experts).to(probs.dtype) / x.shape[0]
        self.aux_loss = self.balance_weight * self.n_experts * (frac * probs.mean(0)).sum()
        return picked * probs.gather(1, choice[:, None])
