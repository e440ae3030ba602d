"""The InvMSAFold network: per-residue structure embeddings → low-rank Potts parameters.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva, Barthelemy
Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975.

Sec. 3 / App.: ``Linear(E→d)``; n post-LN transformer encoder layers, each followed by a ReLU;
``P = Linear(d→K·d, no bias)`` reshaped to ``[B, K, L, d]``, ReLU, a shared ``Linear(d→q)`` giving
``V [B, K, L, q]`` (zero at padding); fields ``h_i = K^{-1/2} sum_k (W_f V_{k,i} + b_f)``.
The couplings ``J_ij = K^{-1/2} V_i^T V_j`` are never built (see ``potts.py``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor, nn

from .config import DecoderConfig
from .data import LATTICE_ALPHABET, PROTEIN_ALPHABET, _safetensors_torch, decode
from .encoders import LatticeEncoder, PrecomputedEmbeddings, StructureEncoder
from .potts import ARPotts, PottsParams

__all__ = ["InvMSAFold"]


class InvMSAFold(nn.Module):
    """Structure-conditioned low-rank Potts model (InvMSAFold-PW / -AR share this network).

    Args:
        config: the decoder's sizes.
        encoder: a structure encoder; a :class:`LatticeEncoder` is trained jointly (it becomes a
            submodule), other encoders (e.g. :class:`PrecomputedEmbeddings`) are used frozen.
        alphabet: letters of the q states (default: the protein alphabet if q = 21, else the lattice one).
        independent: if True the model has no couplings (``V`` only feeds the fields): the
            independent-site control.

    Shape:
        ``forward(emb [B, L, E], padding_mask [B, L]) -> (V [B, K, L, q], h [B, L, q])``.

    Example:
        >>> cfg = DecoderConfig(embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=3)
        >>> m = InvMSAFold(cfg)
        >>> V, h = m(torch.randn(2, 5, 8), torch.zeros(2, 5, dtype=torch.bool))
        >>> V.shape, h.shape
        (torch.Size([2, 3, 5, 21]), torch.Size([2, 5, 21]))
    """

    def __init__(
        self,
        config: DecoderConfig,
        encoder: StructureEncoder | None = None,
        *,
        alphabet: str | None = None,
        independent: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.alphabet = alphabet or (PROTEIN_ALPHABET if config.q == 21 else LATTICE_ALPHABET)
        if len(self.alphabet) != config.q:
            raise ValueError(f"alphabet has {len(self.alphabet)} letters but q = {config.q}")
        if encoder is not None and encoder.embed_dim != config.embed_dim:
            raise ValueError(
                f"encoder width {encoder.embed_dim} != DecoderConfig.embed_dim {config.embed_dim}"
            )
        self.independent = independent
        self.encoder = encoder  # nn.Module encoders register as submodules
        d, K = config.d_model, config.rank
        self.inp = nn.Linear(config.embed_dim, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d, config.n_heads, config.dim_feedforward, dropout=config.dropout, batch_first=True
            )
            for _ in range(config.n_layers)
        )
        self.proj = nn.Linear(d, K * d, bias=False)  # P
        self.out = nn.Linear(d, config.q)  # shared d -> q map giving V
        self.field = nn.Linear(config.q, config.q)  # W_f, b_f

    def forward(self, emb: Tensor, padding_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Low-rank factors and fields from embeddings (see the class docstring for shapes)."""
        if emb.ndim != 3 or emb.shape[-1] != self.config.embed_dim:
            raise ValueError(f"emb must be [B, L, {self.config.embed_dim}], got {tuple(emb.shape)}")
        if not torch.isfinite(emb).all():
            raise ValueError("embeddings contain non-finite values")
        B, L, _ = emb.shape
        if padding_mask is None:
            padding_mask = torch.zeros(B, L, dtype=torch.bool, device=emb.device)
        if padding_mask.shape != (B, L):
            raise ValueError(f"padding_mask must be [{B}, {L}], got {tuple(padding_mask.shape)}")
        emb = emb.masked_fill(padding_mask[..., None], 0.0)  # padding embeds to zero
        x = self.inp(emb)
        for layer in self.layers:
            x = torch.relu(layer(x, src_key_padding_mask=padding_mask))  # extra ReLU after each layer
        K, d = self.config.rank, self.config.d_model
        p = torch.relu(self.proj(x).view(B, L, K, d).permute(0, 2, 1, 3))  # [B, K, L, d]
        V = self.out(p).masked_fill(padding_mask[:, None, :, None], 0.0)  # [B, K, L, q]
        h = K**-0.5 * self.field(V).sum(1)  # [B, L, q]
        h = h.masked_fill(padding_mask[..., None], 0.0)
        if self.independent:
            V = torch.zeros_like(V)
        return V, h

    def _embed(self, structure: object) -> Tensor:
        if self.encoder is None:
            raise ValueError("this model has no encoder; call forward() with embeddings")
        emb = self.encoder.embed(structure)
        return emb.to(next(self.parameters()).device)

    def potts(self, structure: object) -> PottsParams:
        """The PW Potts model of one structure (one network pass, no gradient)."""
        was = self.training
        self.eval()
        with torch.no_grad():
            V, h = self(self._embed(structure)[None])
        self.train(was)
        return PottsParams(h[0], V[0], self.alphabet)

    def ar(self, structure: object) -> ARPotts:
        """The InvMSAFold-AR model of one structure."""
        return self.potts(structure).as_ar()

    def from_structure(
        self, structure: object, *, variant: Literal["ar", "pw"] = "ar"
    ) -> ARPotts | PottsParams:
        """The sampler of one structure: one network pass, then every sample is Potts arithmetic.

        Args:
            structure: anything the encoder embeds: a lattice structure or its coordinates
                (:class:`LatticeEncoder`), a domain id (:class:`PrecomputedEmbeddings`), or
                ``(pdb_or_cif_path, chain)`` (:class:`~iclr25.methods.invmsafold.ESMIF1Encoder`).
            variant: "ar" gives the exact autoregressive :class:`ARPotts`; "pw" the pairwise
                :class:`PottsParams`, sampled by Gibbs chains.

        Returns:
            A sampler with ``sample(n, temperature=..., seed=...) -> [n, L]`` tokens and an ``alphabet``.

        Example:
            >>> cfg = DecoderConfig(embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=2)
            >>> enc = LatticeEncoder(max_len=4, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
            >>> sampler = InvMSAFold(cfg, enc).from_structure([[0, 0], [0, 1], [1, 1], [1, 0]])
            >>> sampler.sample(3, seed=0).shape
            torch.Size([3, 4])
        """
        if variant not in ("ar", "pw"):
            raise ValueError(f"variant must be 'ar' or 'pw', got {variant!r}")
        params = self.potts(structure)
        return params.as_ar() if variant == "ar" else params

    def sample(
        self,
        structure: object,
        n: int,
        *,
        variant: Literal["ar", "pw"] = "ar",
        temperature: float = 1.0,
        seed: int = 0,
        gibbs_sweeps: int = 30,
        gibbs_burn_in: int = 20,
    ) -> list[str]:
        """Sample ``n`` sequences for a structure (network once, then only Potts arithmetic).

        Args:
            structure: anything the encoder embeds (see :meth:`from_structure`).
            n: number of sequences.
            variant: "ar" (exact ancestral) or "pw" (Gibbs).
            temperature: sampling temperature.
            seed: RNG seed.
            gibbs_sweeps: sweeps per Gibbs chain ("pw").
            gibbs_burn_in: Gibbs burn-in sweeps ("pw").

        Returns:
            Sequences as strings.
        """
        sampler = self.from_structure(structure, variant=variant)
        if isinstance(sampler, ARPotts):
            tok = sampler.sample(n, temperature=temperature, seed=seed)
        else:
            tok = sampler.sample(
                n, sweeps=gibbs_sweeps, burn_in=gibbs_burn_in, temperature=temperature, seed=seed
            )
        return decode(tok, self.alphabet)

    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``config.json`` and ``model.safetensors`` (all weights, a lattice encoder's included).

        Frozen encoders (precomputed embeddings, ESM-IF1) are not saved; pass them again to
        :meth:`from_pretrained`. Needs the ``safetensors`` package.
        """
        st = _safetensors_torch()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta: dict[str, object] = {
            "decoder": dataclasses.asdict(self.config),
            "alphabet": self.alphabet,
            "independent": self.independent,
        }
        if isinstance(self.encoder, LatticeEncoder):
            e = self.encoder
            meta["lattice_encoder"] = {
                "max_len": e.max_len,
                "coord_dim": e.coord_dim,
                "d_model": e.embed_dim,
                "n_layers": len(e.layers.layers),
                "n_heads": e.n_heads,
            }
        (directory / "config.json").write_text(json.dumps(meta, indent=1))
        state = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        st.save_file(state, str(directory / "model.safetensors"))

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        *,
        encoder: StructureEncoder | None = None,
        embeddings: str | Path | None = None,
        map_location: str = "cpu",
    ) -> InvMSAFold:
        """Load a model written by :meth:`save_pretrained` (in eval mode).

        Args:
            directory: the model directory (``config.json`` and ``model.safetensors``; a
                ``model.pt`` state dict from earlier versions is read too).
            encoder: a frozen encoder for a model saved without a lattice encoder, e.g. an
                :class:`~iclr25.methods.invmsafold.ESMIF1Encoder`.
            embeddings: shortcut for ``encoder=PrecomputedEmbeddings(embeddings)``.
            map_location: torch device for the weights.

        Example:
            >>> import tempfile
            >>> cfg = DecoderConfig(embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=2)
            >>> d = tempfile.mkdtemp()
            >>> InvMSAFold(cfg).save_pretrained(d)
            >>> InvMSAFold.from_pretrained(d).config.rank
            2
        """
        directory = Path(directory)
        if not (directory / "config.json").is_file():
            raise FileNotFoundError(f"{directory} has no config.json")
        meta = json.loads((directory / "config.json").read_text())
        if encoder is not None and embeddings is not None:
            raise ValueError("pass either encoder or embeddings, not both")
        if "lattice_encoder" in meta:
            if encoder is not None or embeddings is not None:
                raise ValueError(f"{directory} holds a trained lattice encoder; it takes no other encoder")
            encoder = LatticeEncoder(**meta["lattice_encoder"])
        elif embeddings is not None:
            encoder = PrecomputedEmbeddings(embeddings)
        model = cls(
            DecoderConfig(**meta["decoder"]),
            encoder,
            alphabet=meta["alphabet"],
            independent=meta["independent"],
        )
        if (directory / "model.safetensors").is_file():
            state = _safetensors_torch().load_file(str(directory / "model.safetensors"), device=map_location)
        elif (directory / "model.pt").is_file():
            state = torch.load(directory / "model.pt", map_location=map_location, weights_only=True)
        else:
            raise FileNotFoundError(f"{directory} has no model.safetensors")
        model.load_state_dict(state)
        return model.eval()
