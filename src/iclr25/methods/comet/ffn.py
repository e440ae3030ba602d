"""COMET-masked feed-forward blocks inside stock transformers (in-place surgery, no forked models).

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones. ICLR 2025, arXiv:2410.08003.

Implements the transformer variant of COMET (Sec. 4, transformer experiments): the hidden units of
every FFN (act(c_fc(u)) in GPT-2, act(gate(u)) * up(u) in Llama, act(fc1(u)) in timm ViT/Mixer)
are multiplied by a per-token k-WTA mask m_l (Eq. 3 over the hidden axis of each token only, so
causality holds). The masks come from a fixed random routing chain (Eqs. 4-6) started at the
token's embedding-stage vector (``source="embedding"``, strict COMET) or from V_l u_l with u_l the
block's FFN input (``source="layer_input"``, the layer-wise analogue). Only the activation module
of each FFN is swapped for a masking wrapper; :meth:`COMETFFNHandle.remove` undoes it.

References:
    Shaier et al., "More Experts Than Galaxies", ICLR 2025, arXiv:2410.08003, Secs. 3-4.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from iclr25._core.registry import require
from iclr25.methods.comet.routing import (
    Ties,
    _check_p,
    draw_routing_matrix,
    keep_count,
    kwta_mask,
    routing_generator,
)

__all__ = ["COMETActivation", "COMETFFNHandle", "comet_ffn_"]


class COMETActivation(nn.Module):
    """The masking wrapper that replaces an FFN's activation: returns m ⊙ act(h).

    It holds the original activation (``act``) and this site's routing matrix V_l as the
    buffer ``weight`` (saved in the model's ``state_dict``, never a parameter). The mask itself
    is supplied by the owning :class:`COMETFFNHandle`.

    Args:
        act: the activation module it wraps.
        weight: V_l, shape (d_ff, d_in).
        k: winners per token.
        ties: tie rule.

    Shape:
        h: (..., d_ff) -> (..., d_ff).
    """

    def __init__(self, act: nn.Module, weight: Tensor, k: int, ties: Ties) -> None:
        super().__init__()
        self.act = act
        self.register_buffer("weight", weight)
        self.k = int(k)
        self.ties: Ties = ties
        self._mask_fn: Callable[[COMETActivation, Tensor], Tensor] | None = None

    def forward(self, h: Tensor) -> Tensor:
        y = self.act(h)
        if self._mask_fn is None:
            raise RuntimeError("COMETActivation used without its handle (was remove() called?)")
        m = self._mask_fn(self, h)
        return y * m.to(y.dtype)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        if f"{prefix}weight" not in state_dict:
            raise ValueError(
                f"state_dict has no routing buffer {prefix + 'weight'!r}; masks cannot be restored"
            )
        super()._load_from_state_dict(state_dict, prefix, *args)


def _as_buffers(module: nn.Module) -> nn.Module:
    """Turn every parameter of ``module`` into a buffer (a frozen copy that no optimiser sees)."""
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is None:
                continue
            del m._parameters[name]
            m.register_buffer(name, p.detach().clone())
    return module.eval()


@dataclass
class _Site:
    mlp: nn.Module
    attr: str
    kind: Literal["main", "token"]
    d_in: int
    d_ff: int


@dataclass
class _Arch:
    name: str
    sites: list[_Site]
    d_model: int
    taps: list[nn.Module]  # modules whose forward hooks see the embedding stage
    live: Callable[[list[tuple[Tensor, Tensor]]], Tensor]
    frozen_module: nn.Module | None
    frozen: Callable[[nn.Module, list[tuple[Tensor, Tensor]]], Tensor]
    frozen_taps: list[nn.Module]


def _linear_in(mod: nn.Module) -> int:
    if hasattr(mod, "in_features"):
        return int(mod.in_features)
    if hasattr(mod, "nx"):  # transformers Conv1D
        return int(mod.nx)
    return int(mod.weight.shape[0])


def _linear_out(mod: nn.Module) -> int:
    if hasattr(mod, "out_features"):
        return int(mod.out_features)
    if hasattr(mod, "nf"):
        return int(mod.nf)
    return int(mod.weight.shape[1])


def _detect(model: nn.Module, include_token_mixing: bool, need_frozen: bool) -> _Arch:
    """Find the FFN sites and the embedding stage of a supported model, else TypeError."""
    mod = type(model).__module__
    if mod.startswith("transformers"):
        base = getattr(model, "transformer", model)
        if hasattr(base, "h") and hasattr(base, "wte") and hasattr(base, "wpe"):  # GPT-2
            sites = [
                _Site(b.mlp, "act", "main", _linear_in(b.mlp.c_fc), _linear_out(b.mlp.c_fc)) for b in base.h
            ]
            wte, wpe = base.wte, base.wpe
            frozen = (
                _as_buffers(nn.ModuleList([copy.deepcopy(wte), copy.deepcopy(wpe)])) if need_frozen else None
            )
            return _Arch(
                "gpt2", sites, int(wte.embedding_dim), [wte, wpe],
                live=lambda rec: rec[0][1] + rec[1][1],
                frozen_module=frozen,
                frozen=lambda fm, rec: fm[0](rec[0][0]) + fm[1](rec[1][0]),
                frozen_taps=[wte, wpe],
            )  # fmt: skip
        base = getattr(model, "model", model)
        if hasattr(base, "layers") and hasattr(base, "embed_tokens"):  # Llama
            sites = [
                _Site(b.mlp, "act_fn", "main", _linear_in(b.mlp.gate_proj), _linear_out(b.mlp.gate_proj))
                for b in base.layers
            ]
            emb = base.embed_tokens
            frozen = _as_buffers(copy.deepcopy(emb)) if need_frozen else None
            return _Arch(
                "llama", sites, int(emb.embedding_dim), [emb],
                live=lambda rec: rec[0][1],
                frozen_module=frozen,
                frozen=lambda fm, rec: fm(rec[0][0]),
                frozen_taps=[emb],
            )  # fmt: skip
    if mod.startswith("timm"):
        timm = require("timm", "comet")
        if isinstance(model, timm.models.vision_transformer.VisionTransformer):
            sites = [
                _Site(b.mlp, "act", "main", _linear_in(b.mlp.fc1), _linear_out(b.mlp.fc1))
                for b in model.blocks
            ]
            frozen = None
            if need_frozen:
                blocks, head = model.blocks, model.head
                model.blocks, model.head = nn.Sequential(), nn.Identity()
                try:
                    frozen = copy.deepcopy(model)
                finally:
                    model.blocks, model.head = blocks, head
                frozen.norm = nn.Identity()
                _as_buffers(frozen)
            return _Arch(
                "vit", sites, int(model.embed_dim), [model.pos_drop],
                live=lambda rec: rec[0][1],
                frozen_module=frozen,
                frozen=lambda fm, rec: fm.forward_features(rec[0][0]),
                frozen_taps=[model.patch_embed],
            )  # fmt: skip
        if isinstance(model, timm.models.mlp_mixer.MlpMixer):
            sites = []
            for b in model.blocks:
                if include_token_mixing:
                    t = b.mlp_tokens
                    sites.append(_Site(t, "act", "token", _linear_in(t.fc1), _linear_out(t.fc1)))
                c = b.mlp_channels
                sites.append(_Site(c, "act", "main", _linear_in(c.fc1), _linear_out(c.fc1)))
            frozen = _as_buffers(copy.deepcopy(model.stem)) if need_frozen else None
            return _Arch(
                "mixer", sites, int(model.embed_dim), [model.stem],
                live=lambda rec: rec[0][1],
                frozen_module=frozen,
                frozen=lambda fm, rec: fm(rec[0][0]),
                frozen_taps=[model.stem],
            )  # fmt: skip
    raise TypeError(
        f"comet_ffn_ supports HF GPT-2/Llama and timm VisionTransformer/MlpMixer, got {type(model).__name__}"
    )


class COMETFFNHandle:
    """What :func:`comet_ffn_` returns: the wrapped sites, the last masks, and ``remove()``.

    Attributes:
        model: the model that was modified in place.
        arch: "gpt2", "llama", "vit" or "mixer".
        wrappers: the :class:`COMETActivation` modules, one per FFN site, in forward order.
        last_masks: the boolean per-token masks of the last forward pass, one per site.
    """

    def __init__(
        self,
        model: nn.Module,
        arch: _Arch,
        p_keep: float,
        source: Literal["embedding", "layer_input"],
        seed: int,
        embedding_mode: Literal["frozen", "live"],
        chain: bool,
        ties: Ties,
    ) -> None:
        self.model = model
        self.arch = arch.name
        self.p_keep = p_keep
        self.source = source
        self.embedding_mode = embedding_mode
        self.chain = chain
        self.last_masks: list[Tensor] = []
        self._arch = arch
        self._hooks: list[Any] = []
        self._pending: list[Tensor] | None = None
        self._inputs: dict[int, Tensor] = {}
        self._records: list[tuple[Tensor, Tensor] | None] = []
        gen = routing_generator(seed)
        self.wrappers: list[COMETActivation] = []
        prev_main: int | None = None
        for i, site in enumerate(arch.sites):
            if site.kind == "token" and source == "embedding":
                d_in = site.d_in  # token-mixing sites read z_0 transposed: (d_ff, T)
            elif source == "embedding" and chain and prev_main is not None:
                d_in = prev_main
            elif source == "embedding":
                d_in = arch.d_model
            else:
                d_in = site.d_in
            if site.kind == "main":
                prev_main = site.d_ff
            w = draw_routing_matrix(site.d_ff, d_in, gen)
            ref = next(site.mlp.parameters())
            wrapper = COMETActivation(
                getattr(site.mlp, site.attr), w.to(ref.device), keep_count(site.d_ff, p_keep), ties
            )
            wrapper._mask_fn = self._mask_for
            wrapper._site_index = i  # type: ignore[attr-defined]
            setattr(site.mlp, site.attr, wrapper)
            self.wrappers.append(wrapper)
            if source == "layer_input":
                self._hooks.append(site.mlp.register_forward_pre_hook(self._make_input_hook(i)))
        if source == "embedding":
            if embedding_mode == "frozen":
                # Keep the frozen copy inside the model's state_dict, next to the first V.
                self.wrappers[0].frozen_embedding = arch.frozen_module
                taps = arch.frozen_taps
            else:
                taps = arch.taps
            self._records = [None] * len(taps)
            for j, tap in enumerate(taps):
                self._hooks.append(tap.register_forward_hook(self._make_tap_hook(j, len(taps))))

    # -- hooks ---------------------------------------------------------------------------------
    def _make_input_hook(self, i: int) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            self._inputs[i] = args[0].detach()

        return hook

    def _make_tap_hook(self, j: int, n: int) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...], out: Tensor) -> None:
            self._records[j] = (args[0].detach() if args else None, out.detach())  # type: ignore[assignment]
            if j == n - 1:
                if any(r is None for r in self._records):
                    self._records = [None] * n
                    raise ValueError(
                        "COMET embedding routing needs the embedding stage to run on this call "
                        "(pass input_ids / images, not precomputed embeddings)"
                    )
                recs = [r for r in self._records if r is not None]
                self._records = [None] * n
                with torch.no_grad():
                    if self.embedding_mode == "frozen":
                        z0 = self._arch.frozen(self.wrappers[0].frozen_embedding, recs)
                    else:
                        z0 = self._arch.live(recs)
                self._pending = self._route_embedding(z0.detach())
                self.last_masks = []

        return hook

    # -- routing -------------------------------------------------------------------------------
    def _route_embedding(self, z0: Tensor) -> list[Tensor]:
        """Per-site masks from z_0 = e_t: the chain z_l = m_l ⊙ V_l z_{l-1} over the main sites."""
        masks: list[Tensor] = []
        with torch.no_grad():
            z = z0
            for site, w in zip(self._arch.sites, self.wrappers, strict=True):
                v = w.weight
                if site.kind == "token":
                    c = z0.transpose(-1, -2).to(v.dtype) @ v.T  # (B, C, d_ff)
                    masks.append(kwta_mask(c, w.k, w.ties))
                    continue
                src = z if self.chain else z0
                c = src.to(v.dtype) @ v.T  # (..., d_ff)
                m = kwta_mask(c, w.k, w.ties)
                masks.append(m)
                if self.chain:
                    z = c * m
        return masks

    def _mask_for(self, wrapper: COMETActivation, h: Tensor) -> Tensor:
        i = wrapper._site_index  # type: ignore[attr-defined]
        if self.source == "layer_input":
            u = self._inputs.pop(i, None)
            if u is None:
                raise RuntimeError("no FFN input captured for this site")
            with torch.no_grad():
                m = kwta_mask(u.to(wrapper.weight.dtype) @ wrapper.weight.T, wrapper.k, wrapper.ties)
        else:
            if self._pending is None:
                raise RuntimeError("no embedding-stage routing state; call the whole model")
            m = self._pending[i]
        if m.shape != h.shape:
            raise ValueError(
                f"routing mask shape {tuple(m.shape)} does not match FFN hidden shape {tuple(h.shape)}"
            )
        if i == 0:
            self.last_masks = []
        self.last_masks.append(m)
        return m

    # -- public --------------------------------------------------------------------------------
    def buffers(self) -> dict[str, Tensor]:
        """The routing matrices by site index: {"site_0": V_1, ...}."""
        return {f"site_{i}": w.weight for i, w in enumerate(self.wrappers)}

    def remove(self) -> nn.Module:
        """Undo the surgery: put the original activations back and drop every hook. Returns the model."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for site, w in zip(self._arch.sites, self.wrappers, strict=True):
            setattr(site.mlp, site.attr, w.act)
            w._mask_fn = None
            if hasattr(w, "frozen_embedding"):
                del w.frozen_embedding
        self._pending = None
        self.last_masks = []
        return self.model


def comet_ffn_(
    model: nn.Module,
    p_keep: float,
    source: Literal["embedding", "layer_input"] = "embedding",
    seed: int = 0,
    embedding_mode: Literal["frozen", "live"] = "frozen",
    chain: bool = True,
    include_token_mixing: bool = False,
    ties: Ties = "threshold",
) -> COMETFFNHandle:
    """Put COMET masks into every FFN of a stock transformer, in place.

    Supported: HF GPT-2 (``h[i].mlp.act``), HF Llama (``layers[i].mlp.act_fn``), timm
    ``VisionTransformer`` (``blocks[i].mlp.act``) and ``MlpMixer`` (``mlp_channels``; with
    ``include_token_mixing`` also ``mlp_tokens``, whose masks read z_0 transposed or their own
    input and are not chained). ``source="embedding"``: z_0 is the embedding-stage vector of each
    token (wte + wpe for GPT-2; embed_tokens for Llama; patch + position embedding and CLS for
    ViT; the stem for Mixer); with ``embedding_mode="frozen"`` it comes from a frozen copy taken
    now (kept as buffers in the model's ``state_dict``), so experts never change; with ``"live"``
    it is the current embedding, detached. ``chain=False`` gives each site its own V_l ∈ R^{d_ff×d}
    reading z_0 directly. ``source="layer_input"``: m_l = C_k(V_l u_l) from the FFN input.

    Args:
        model: the model (modified in place).
        p_keep: p_k in (0, 1]; k = max(1, int(d_ff p_k)) per token.
        source: "embedding" or "layer_input".
        seed: seed of the routing matrices.
        embedding_mode: "frozen" or "live".
        chain: chain the routing state across layers (embedding source only).
        include_token_mixing: also mask Mixer's token-mixing MLPs.
        ties: k-WTA tie rule.

    Returns:
        A :class:`COMETFFNHandle`.

    Raises:
        TypeError: an unsupported model.
        ValueError: a bad option, or a model that already carries COMET masks (a second call would
            nest the wrappers; call ``remove()`` on the first handle before wrapping again).

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("gpt2", vocab_size=20, n_layer=2, d_model=16, seed=0)
        >>> handle = comet_ffn_(lm, p_keep=0.25)
        >>> _ = lm(torch.tensor([[4, 5, 6]]))
        >>> [m.sum(-1).tolist() for m in handle.last_masks]
        [[[16, 16, 16]], [[16, 16, 16]]]
        >>> _ = handle.remove()
    """
    _check_p(p_keep)
    if source not in ("embedding", "layer_input"):
        raise ValueError(f"source must be 'embedding' or 'layer_input', got {source!r}")
    if embedding_mode not in ("frozen", "live"):
        raise ValueError(f"embedding_mode must be 'frozen' or 'live', got {embedding_mode!r}")
    wrapped = [name for name, mod in model.named_modules() if isinstance(mod, COMETActivation)]
    if wrapped:
        raise ValueError(
            f"comet_ffn_: the model already carries COMET masks (at {wrapped[0]!r} and "
            f"{len(wrapped) - 1} more site(s)); call remove() on the existing handle before wrapping again"
        )
    arch = _detect(
        model, include_token_mixing, need_frozen=source == "embedding" and embedding_mode == "frozen"
    )
    return COMETFFNHandle(model, arch, p_keep, source, seed, embedding_mode, chain, ties)
