"""Structure encoders for InvMSAFold: per-residue embeddings from a structure.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Silva, Meynard-Piganeau, Lucibello,
Feinauer, ICLR 2025, arXiv:2406.11975. The paper feeds the frozen ESM-IF1 encoder's 512-d
per-residue embeddings to its decoder (Sec. 3). Here the encoder is pluggable:

- :class:`LatticeEncoder`: a small transformer over contact-map rows, coordinates and positions of a
  lattice structure, trained jointly with the decoder;
- :class:`PrecomputedEmbeddings`: frozen embeddings (e.g. ESM-IF1 at paper scale) from a local
  ``.pt``, ``.npz`` or ``.safetensors`` file keyed by domain id;
- :class:`ESMIF1Encoder`: the frozen ESM-IF1 encoder itself, from a local checkpoint (needs
  ``fair-esm``; nothing is downloaded).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
from pathlib import Path
from types import ModuleType
from typing import Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import _safetensors_torch
from .lattice import LatticeStructure

__all__ = ["ESMIF1Encoder", "LatticeEncoder", "PrecomputedEmbeddings", "StructureEncoder"]


@runtime_checkable
class StructureEncoder(Protocol):
    """Anything with ``embed(structure) -> [L, E]`` and an ``embed_dim``."""

    embed_dim: int

    def embed(self, structure: object) -> Tensor:
        """Per-residue embeddings ``[L, E]``."""
        ...


def _positions(length: int, width: int) -> Tensor:
    """Sinusoidal position features ``[L, width]``."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(100.0) * torch.arange(0, width, 2, dtype=torch.float32) / width)
    out = torch.zeros(length, width)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq)
    return out


def _biased_layer(layer: nn.TransformerEncoderLayer, x: Tensor, bias: Tensor) -> Tensor:
    """One post-LN ``TransformerEncoderLayer`` with an additive per-head attention bias, written out.

    ``x = norm1(x + SelfAttn(x; scores + bias))``, ``x = norm2(x + W2 act(W1 x))`` (Vaswani et al.,
    2017), with the layer's own weights, activation and dropout, on every code path alike.

    Shape:
        ``x [B, L, d]``, ``bias [B, H, L, L]`` -> ``[B, L, d]``.
    """
    attn = layer.self_attn
    B, L, d = x.shape
    H = attn.num_heads
    q, k, v = F.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, -1)
    q, k, v = (t.view(B, L, H, d // H).transpose(1, 2) for t in (q, k, v))  # [B, H, L, d/H]
    p = attn.dropout if layer.training else 0.0
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=p)
    a = attn.out_proj(a.transpose(1, 2).reshape(B, L, d))
    x = layer.norm1(x + layer.dropout1(a))
    ff = layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))
    return layer.norm2(x + layer.dropout2(ff))


class LatticeEncoder(nn.Module):
    """Transformer over per-residue lattice features: contact-map row, coordinates, position.

    Self-attention scores get a learned per-head bias on contacting pairs (read from the
    contact-map part of the features), so residues in contact exchange information directly.

    Args:
        max_len: longest chain (contact-map rows are padded to this width).
        coord_dim: lattice dimension (2 or 3).
        d_model: output width E.
        n_layers: transformer encoder layers.
        n_heads: attention heads.

    Shape:
        ``forward(feats [B, L, F], padding_mask [B, L]) -> [B, L, d_model]``.

    Example:
        >>> enc = LatticeEncoder(max_len=4, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
        >>> s = LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [1, 1], [1, 0]]))
        >>> enc.embed(s).shape
        torch.Size([4, 8])
    """

    def __init__(self, *, max_len: int, coord_dim: int, d_model: int, n_layers: int, n_heads: int) -> None:
        super().__init__()
        if max_len < 2 or coord_dim < 1 or d_model < 1 or n_layers < 1 or d_model % n_heads:
            raise ValueError("need max_len >= 2, coord_dim >= 1, n_layers >= 1, d_model divisible by n_heads")
        self.max_len, self.coord_dim, self.embed_dim = max_len, coord_dim, d_model
        self.n_pos = 8
        self.inp = nn.Linear(max_len + coord_dim + self.n_pos, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.n_heads = n_heads
        self.contact_bias = nn.Parameter(torch.full((n_heads,), 2.0))

    def features(self, structure: LatticeStructure | np.ndarray) -> Tensor:
        """Per-residue input features ``[L, max_len + coord_dim + 8]`` (no parameters).

        Args:
            structure: a :class:`LatticeStructure`, or its lattice coordinates ``[L, coord_dim]``
                (integers; contacts are derived as in :meth:`LatticeStructure.from_coords`).
        """
        if isinstance(structure, (np.ndarray, list, tuple)):
            coords = np.asarray(structure)
            if coords.ndim != 2 or not np.issubdtype(coords.dtype, np.integer):
                raise ValueError(f"lattice coordinates must be an integer [L, D] array, got {coords.dtype}")
            structure = LatticeStructure.from_coords(coords)
        if not isinstance(structure, LatticeStructure):
            raise TypeError(
                f"LatticeEncoder needs a LatticeStructure or coordinates, got {type(structure).__name__}"
            )
        L = structure.length
        if self.max_len < L or structure.coords.shape[1] != self.coord_dim:
            raise ValueError(
                f"structure of length {L} / dim {structure.coords.shape[1]} does not fit the encoder"
            )
        cmap = torch.zeros(L, self.max_len)
        cmap[:, :L] = torch.from_numpy(structure.contact_map())
        xyz = torch.from_numpy(structure.coords.astype(np.float32))
        xyz = (xyz - xyz.mean(0)) / max(1.0, float(xyz.std()))
        return torch.cat([cmap, xyz, _positions(L, self.n_pos)], -1)

    def forward(self, feats: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Embeddings ``[B, L, E]`` (zero at padded positions).

        The contact bias enters the attention scores explicitly (:func:`_biased_layer`), so
        ``train()`` and ``eval()`` compute the same function: PyTorch's eval-mode fast path of
        ``nn.TransformerEncoder`` does not apply a per-head float mask the way the training path does.
        """
        L = feats.shape[1]
        cmap = feats[..., :L]  # [B, L, L] contact map (columns beyond L are padding)
        bias = self.contact_bias[None, :, None, None] * cmap[:, None]  # [B, H, L, L]
        if padding_mask is not None:
            bias = bias.masked_fill(padding_mask[:, None, None, :], float("-inf"))
        x = self.inp(feats)
        for layer in self.layers.layers:
            x = _biased_layer(layer, x, bias)
        return x if padding_mask is None else x.masked_fill(padding_mask[..., None], 0.0)

    def embed(self, structure: LatticeStructure | np.ndarray) -> Tensor:
        """``[L, E]`` embeddings of one structure (or of its lattice coordinates)."""
        p = next(self.parameters())
        return self(self.features(structure).to(p.device, p.dtype)[None])[0]


class PrecomputedEmbeddings:
    """Frozen per-residue embeddings loaded from a local file, keyed by domain id.

    ``.pt`` files hold a ``{id: tensor [L, E]}`` dict (``torch.save``); ``.npz`` and ``.safetensors``
    files one array per id. This is how paper-scale ESM-IF1 embeddings (512-d, one row per residue,
    without the encoder's two end tokens) enter the model; :class:`ESMIF1Encoder` can compute them.

    Args:
        path: the file.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "emb.npz")
        >>> np.savez(p, d1=np.zeros((3, 4), np.float32))
        >>> PrecomputedEmbeddings(p).embed("d1").shape
        torch.Size([3, 4])
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"embedding file {path} does not exist")
        if path.suffix == ".npz":
            with np.load(path) as z:
                table = {k: torch.from_numpy(np.asarray(z[k], dtype=np.float32)) for k in z.files}
        elif path.suffix in (".pt", ".pth"):
            raw = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(raw, dict):
                raise ValueError(f"{path}: expected a dict of id -> [L, E] tensors")
            table = {str(k): torch.as_tensor(v, dtype=torch.float32) for k, v in raw.items()}
        elif path.suffix == ".safetensors":
            raw = _safetensors_torch().load_file(str(path))
            table = {k: v.to(torch.float32) for k, v in raw.items()}
        else:
            raise ValueError(
                f"{path}: unsupported embedding file type {path.suffix!r} (use .pt, .npz or .safetensors)"
            )
        if not table:
            raise ValueError(f"{path}: no embeddings")
        dims = {v.shape[-1] for v in table.values()}
        if len(dims) != 1 or any(v.ndim != 2 for v in table.values()):
            raise ValueError(f"{path}: embeddings must all be [L, E] with one E, got widths {sorted(dims)}")
        for k, v in table.items():
            if not torch.isfinite(v).all():
                raise ValueError(f"{path}: embedding {k!r} has non-finite values")
        self.table = table
        self.embed_dim = dims.pop()

    def ids(self) -> list[str]:
        """The domain ids in the file."""
        return sorted(self.table)

    def embed(self, structure: object) -> Tensor:
        """Embeddings of a domain id (or an object whose ``name`` is the id), ``[L, E]``."""
        key = structure if isinstance(structure, str) else getattr(structure, "name", None)
        if key not in self.table:
            raise KeyError(f"no embedding for domain {key!r}")
        return self.table[key]


def _import_esm() -> tuple[ModuleType, ModuleType]:
    """fair-esm's ``esm.pretrained`` and ``esm.inverse_folding.util``, imported on first use."""
    try:
        pretrained = importlib.import_module("esm.pretrained")
        util = importlib.import_module("esm.inverse_folding.util")
    except ImportError as err:
        raise ImportError(
            "ESMIF1Encoder needs fair-esm and its inverse-folding dependencies "
            f"(pip install fair-esm torch-geometric torch-scatter biotite): {err}. Without them, "
            "precompute the embeddings elsewhere and load them with PrecomputedEmbeddings."
        ) from None
    return pretrained, util


class ESMIF1Encoder:
    """The frozen ESM-IF1 structure encoder, loaded from a local checkpoint (the paper's encoder).

    Wraps fair-esm: ``esm.pretrained.load_model_and_alphabet_local`` reads the checkpoint (keep
    ``esm_if`` in its file name, e.g. ``esm_if1_gvp4_t16_142M_UR50.pt``: fair-esm reads the stem to
    decide whether to look for a contact-regression file beside it, and ESM-IF1 has none; the
    checkpoint's ``argparse.Namespace`` of hyperparameters is allow-listed for PyTorch's
    weights-only loading), ``esm.inverse_folding.util.load_coords`` reads the N, CA, C backbone of one chain
    from a PDB/mmCIF file, and ``esm.inverse_folding.util.get_encoder_output`` returns the encoder's
    per-residue output without its two end tokens, ``[L, 512]``. The model stays frozen and is not a
    submodule of :class:`~iclr25.methods.invmsafold.InvMSAFold` (its weights are neither trained nor
    saved with it). Nothing is downloaded. To embed many structures once, save ``{id: embed(...)}``
    with ``torch.save`` and train from :class:`PrecomputedEmbeddings`.

    Args:
        checkpoint: local path of the ESM-IF1 checkpoint.

    Attributes:
        model: the fair-esm model (move it with ``encoder.model.to(device)``).
        embed_dim: the encoder width E (512 for ESM-IF1).
    """

    def __init__(self, checkpoint: str | Path) -> None:
        path = Path(checkpoint)
        if not path.is_file():
            raise FileNotFoundError(f"ESM-IF1 checkpoint {path} does not exist")
        pretrained, self._util = _import_esm()
        # fair-esm calls torch.load with the default weights_only=True (PyTorch >= 2.6); its
        # checkpoints store their hyperparameters as an argparse.Namespace.
        allow = getattr(torch.serialization, "safe_globals", None)
        with allow([argparse.Namespace]) if allow else contextlib.nullcontext():
            model, self.alphabet = pretrained.load_model_and_alphabet_local(str(path))
        self.model = model.eval()
        self.embed_dim = int(model.args.encoder_embed_dim)

    @torch.no_grad()
    def embed(self, structure: tuple[str | Path, str] | np.ndarray) -> Tensor:
        """Per-residue ESM-IF1 embeddings ``[L, E]`` (float32, on the model's device).

        Args:
            structure: ``(pdb_or_cif_path, chain_id)``, or backbone coordinates ``[L, 3, 3]``
                (atoms N, CA, C; NaN where missing).
        """
        if isinstance(structure, tuple):
            path, chain = structure
            if not Path(path).is_file():
                raise FileNotFoundError(f"structure file {path} does not exist")
            coords, _ = self._util.load_coords(str(path), chain)
        else:
            coords = np.asarray(structure, dtype=np.float32)
            if coords.ndim != 3 or coords.shape[1:] != (3, 3):
                raise ValueError(f"backbone coordinates must be [L, 3, 3], got {coords.shape}")
        emb = self._util.get_encoder_output(self.model, self.alphabet, coords)  # [L, E]
        if emb.ndim != 2 or emb.shape[0] != len(coords) or emb.shape[1] != self.embed_dim:
            raise ValueError(f"ESM-IF1 returned {tuple(emb.shape)} for {len(coords)} residues")
        return emb.float()
