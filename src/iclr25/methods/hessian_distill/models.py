"""Students and NN teachers: a small PaiNN with conservative or direct forces.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009). The paper's students are GemNet-dT and PaiNN, Sec. 4;
the official configs train both with direct forces (``direct_forces: True`` for PaiNN and, at the
repository's latest version, GemNet-dT), so the paper's ratios come at least partly from
direct-force students. Here :class:`TinyPaiNN` is the dependency-free student (and,
with a larger width and depth, the NN teacher architecture).

PaiNN message and update blocks follow Schütt, Unke, Gastegger, "Equivariant message passing
for the prediction of tensorial properties and molecular spectra" (ICML 2021). Conservative
forces are ``F = -∂E/∂x`` by autograd (``create_graph=True`` while training so that Hessian rows,
Eq. 2 of the paper, can be differentiated again); direct forces come from a vector head.
Everything is C²-smooth (SiLU, Gaussian radial basis, polynomial envelope of exponent 5) so the
second derivatives that the Hessian loss needs are well defined.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import nn

from .batch import AtomsBatch

__all__ = ["EnergyModel", "TinyPaiNN", "count_parameters", "load_model", "polynomial_envelope"]

_ACTIVATIONS = {"silu": nn.SiLU, "relu": nn.ReLU, "softplus": nn.Softplus, "tanh": nn.Tanh}


@runtime_checkable
class EnergyModel(Protocol):
    """What the trainer, the Hessian code and the calculator need from a force field.

    ``forward(batch)`` returns ``{"energy": [B], "forces": [N, 3]}`` (and ``"stress"``
    ``[B, 3, 3]`` when asked for with ``compute_stress=True``). ``conservative`` says whether the
    forces are ``-∂E/∂x``.
    """

    conservative: bool

    def __call__(self, batch: AtomsBatch, **kwargs: bool) -> dict[str, torch.Tensor]: ...


def polynomial_envelope(d: torch.Tensor, cutoff: float, p: int = 5) -> torch.Tensor:
    """Smooth cutoff u(d) = 1 - (p+1)(p+2)/2 x^p + p(p+2) x^(p+1) - p(p+1)/2 x^(p+2), x = d/cutoff.

    u, u' and u'' vanish at the cutoff, so pairs crossing it change the energy C²-smoothly
    (DimeNet envelope, exponent p = 5 as in the paper's GemNet-dT students).

    Args:
        d: distances in Å.
        cutoff: the cutoff radius.
        p: the envelope exponent.

    Returns:
        u(d), zero for d >= cutoff.

    Example:
        >>> polynomial_envelope(torch.tensor([0.0, 5.0, 6.0]), 5.0).tolist()
        [1.0, 0.0, 0.0]
    """
    x = d / cutoff
    u = 1 - (p + 1) * (p + 2) / 2 * x**p + p * (p + 2) * x ** (p + 1) - p * (p + 1) / 2 * x ** (p + 2)
    return torch.where(x < 1, u, torch.zeros_like(u))


class _Message(nn.Module):
    def __init__(self, hidden: int, n_rbf: int, act: type[nn.Module]) -> None:
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(hidden, hidden), act(), nn.Linear(hidden, 3 * hidden))
        self.w = nn.Linear(n_rbf, 3 * hidden)

    def forward(
        self,
        s: torch.Tensor,
        v: torch.Tensor,
        rbf: torch.Tensor,
        env: torch.Tensor,
        unit: torch.Tensor,
        edge_index: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        i, j = edge_index
        x = self.phi(s)[j] * self.w(rbf) * env[:, None]  # [E, 3F]
        a_ss, a_vv, a_vs = x.chunk(3, dim=-1)  # each [E, F]
        dv = a_vv[:, None, :] * v[j] + a_vs[:, None, :] * unit[:, :, None]  # [E, 3, F]
        ds = torch.zeros_like(s).index_add(0, i, a_ss)
        dv = torch.zeros_like(v).index_add(0, i, dv)
        return s + ds, v + dv


class _Update(nn.Module):
    def __init__(self, hidden: int, act: type[nn.Module]) -> None:
        super().__init__()
        self.u = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, hidden), act(), nn.Linear(hidden, 3 * hidden))

    def forward(self, s: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        uv, vv = self.u(v), self.v(v)  # [N, 3, F]
        norm = torch.sqrt((vv**2).sum(dim=1) + 1e-8)  # [N, F]; eps keeps the norm smooth at 0
        a = self.mlp(torch.cat([s, norm], dim=-1))
        a_vv, a_sv, a_ss = a.chunk(3, dim=-1)  # each [N, F]
        return s + a_ss + a_sv * (uv * vv).sum(dim=1), v + a_vv[:, None, :] * uv


class TinyPaiNN(nn.Module):
    """A small PaiNN force field with conservative (``-∂E/∂x``) or direct forces.

    The energy is ``E_b = scale * Σ_i e_i + Σ_i atomref[Z_i]``; ``scale`` and ``atomref`` are
    buffers set from training data by :meth:`set_normalisation` (``scale`` is the force std σ_F).

    Args:
        hidden: feature width F.
        layers: message-passing blocks.
        n_rbf: Gaussian radial basis functions.
        cutoff: neighbour cutoff in Å.
        activation: "silu" (C∞; default), "softplus", "tanh" or "relu" (not C², diagnostics only).
        conservative: forces by autograd of the energy (True) or from a vector head (False).
        elements: the atomic numbers the model accepts.
        envelope_exponent: p of the polynomial envelope.
        seed: seed of the parameter initialisation.

    Shape:
        ``forward(batch)["energy"]``: ``[B]``; ``["forces"]``: ``[N, 3]``; ``["stress"]``:
        ``[B, 3, 3]`` (periodic cells, ``compute_stress=True``).

    Example:
        >>> from ase.cluster import Icosahedron
        >>> m = TinyPaiNN(hidden=8, layers=1, n_rbf=4, seed=0)
        >>> out = m(AtomsBatch.from_atoms([Icosahedron("Cu", 2)]))
        >>> out["energy"].shape, out["forces"].shape
        (torch.Size([1]), torch.Size([13, 3]))
    """

    def __init__(
        self,
        *,
        hidden: int = 32,
        layers: int = 3,
        n_rbf: int = 16,
        cutoff: float = 5.0,
        activation: str = "silu",
        conservative: bool = True,
        elements: Sequence[int] = (29, 79),
        envelope_exponent: int = 5,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        for name, val in (("hidden", hidden), ("layers", layers), ("n_rbf", n_rbf)):
            if val < 1:
                raise ValueError(f"{name} must be >= 1, got {val}")
        if cutoff <= 0:
            raise ValueError(f"cutoff must be > 0, got {cutoff}")
        if not elements or len(set(elements)) != len(elements) or min(elements) < 1 or max(elements) > 118:
            raise ValueError(f"elements must be distinct atomic numbers in 1..118, got {elements}")
        self.hparams = {
            "hidden": hidden,
            "layers": layers,
            "n_rbf": n_rbf,
            "cutoff": float(cutoff),
            "activation": activation,
            "conservative": conservative,
            "elements": [int(z) for z in elements],
            "envelope_exponent": envelope_exponent,
        }
        self.conservative = conservative
        self.cutoff = float(cutoff)
        self.envelope_exponent = envelope_exponent
        gen = torch.Generator().manual_seed(seed)
        act = _ACTIVATIONS[activation]
        zmap = torch.full((119,), -1, dtype=torch.long)
        zmap[torch.tensor(list(elements))] = torch.arange(len(elements))
        self.register_buffer("zmap", zmap)
        self.register_buffer("centers", torch.linspace(0.0, cutoff, n_rbf))
        self.gamma = (n_rbf / cutoff) ** 2 / 2
        self.embed = nn.Embedding(len(elements), hidden)
        self.messages = nn.ModuleList(_Message(hidden, n_rbf, act) for _ in range(layers))
        self.updates = nn.ModuleList(_Update(hidden, act) for _ in range(layers))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), act(), nn.Linear(hidden, 1))
        self.force_head = None if conservative else nn.Linear(hidden, 1, bias=False)
        self.register_buffer("scale", torch.tensor(1.0))
        self.register_buffer("atomref", torch.zeros(119))
        self._init(gen)

    def _init(self, gen: torch.Generator) -> None:
        """Seeded initialisation (no global RNG): Xavier-uniform weights, zero biases."""
        for p in self.parameters():
            if p.dim() >= 2:
                bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
                with torch.no_grad():
                    p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
            else:
                nn.init.zeros_(p)

    def set_normalisation(self, scale: float, atomref: dict[int, float]) -> None:
        """Set the output scale (σ_F) and per-element reference energies (eV)."""
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be finite and > 0, got {scale}")
        with torch.no_grad():
            self.scale.fill_(float(scale))
            self.atomref.zero_()
            for z, e in atomref.items():
                self.atomref[int(z)] = float(e)

    def _check_elements(self, numbers: torch.Tensor) -> torch.Tensor:
        idx = self.zmap[numbers]
        if (idx < 0).any():
            bad = sorted(set(numbers[idx < 0].tolist()))
            raise ValueError(f"unsupported elements {bad}; this model accepts {self.hparams['elements']}")
        return idx

    def _energy_and_features(
        self, batch: AtomsBatch, pos: torch.Tensor, strain: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if batch.cutoff < self.cutoff - 1e-9:
            raise ValueError(f"batch built with cutoff {batch.cutoff} < model cutoff {self.cutoff}")
        zi = self._check_elements(batch.numbers)
        cell = batch.cell
        if strain is not None:
            pos = pos + torch.einsum("ni,nij->nj", pos, strain[batch.batch])
            cell = cell + torch.bmm(cell, strain)
        i, j = batch.edge_index
        ecell = cell[batch.batch[i]]  # [E, 3, 3]
        vec = pos[j] - pos[i] + torch.einsum("ei,eij->ej", batch.shift.to(pos.dtype), ecell)  # [E, 3]
        d = vec.norm(dim=-1)  # [E]
        unit = vec / d[:, None]
        rbf = torch.exp(-self.gamma * (d[:, None] - self.centers) ** 2)  # [E, n_rbf]
        env = polynomial_envelope(d, self.cutoff, self.envelope_exponent)
        s = self.embed(zi)  # [N, F]
        v = s.new_zeros(s.shape[0], 3, s.shape[1])  # [N, 3, F]
        for msg, upd in zip(self.messages, self.updates, strict=True):
            s, v = msg(s, v, rbf, env, unit, batch.edge_index)
            s, v = upd(s, v)
        e_atom = self.readout(s).squeeze(-1) * self.scale + self.atomref[batch.numbers]  # [N]
        energy = torch.zeros(batch.num_structures, dtype=pos.dtype, device=pos.device)
        energy = energy.index_add(0, batch.batch, e_atom)
        return energy, v

    def energy(self, batch: AtomsBatch, pos: torch.Tensor | None = None) -> torch.Tensor:
        """Energies ``[B]`` only (a pure function of ``pos``, usable with ``torch.func``)."""
        return self._energy_and_features(batch, batch.pos if pos is None else pos, None)[0]

    def forward(
        self,
        batch: AtomsBatch,
        *,
        create_graph: bool | None = None,
        compute_stress: bool = False,
    ) -> dict[str, torch.Tensor]:
        """Energies, forces (and stress) of a batch.

        Args:
            batch: the structures.
            create_graph: keep the graph of the force computation (needed to train on forces
                or Hessian rows). Default: ``self.training`` or when ``batch.pos`` requires grad.
            compute_stress: also return the stress (1/V) ∂E/∂ε for periodic structures.

        Returns:
            ``{"energy": [B], "forces": [N, 3]}`` plus ``"stress": [B, 3, 3]`` if asked.
        """
        pos = batch.pos
        if create_graph is None:
            create_graph = self.training or pos.requires_grad
        need_grad = self.conservative or compute_stress
        with torch.enable_grad() if need_grad else contextlib.nullcontext():
            if need_grad and not pos.requires_grad:
                pos = pos.detach().requires_grad_(True)
            strain = None
            if compute_stress:
                strain = torch.zeros(
                    batch.num_structures, 3, 3, dtype=pos.dtype, device=pos.device, requires_grad=True
                )
            energy, v = self._energy_and_features(batch, pos, strain)
            out: dict[str, torch.Tensor] = {"energy": energy}
            inputs = ([pos] if self.conservative else []) + ([strain] if strain is not None else [])
            grads = torch.autograd.grad(energy.sum(), inputs, create_graph=create_graph) if inputs else []
            if self.conservative:
                out["forces"] = -grads[0]
            else:
                assert self.force_head is not None
                out["forces"] = self.force_head(v).squeeze(-1) * self.scale  # [N, 3]
            if strain is not None:
                vol = torch.linalg.det(batch.cell.to(pos.dtype)).abs().clamp_min(1e-12)
                out["stress"] = grads[-1] / vol[:, None, None]
        if not create_graph and not batch.pos.requires_grad:
            out = {k: t.detach() for k, t in out.items()}
        return out

    def save_pretrained(self, path: str | Path) -> None:
        """Write ``config.json`` and ``model.pt`` (a plain state dict) into a folder."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps({"class": "TinyPaiNN", **self.hparams}, indent=1))
        torch.save(self.state_dict(), path / "model.pt")

    @classmethod
    def from_pretrained(cls, path: str | Path, *, map_location: str = "cpu") -> TinyPaiNN:
        """Load a model written by :meth:`save_pretrained` from a local folder."""
        return load_model(path, map_location=map_location)


def load_model(path: str | Path, *, map_location: str = "cpu") -> TinyPaiNN:
    """Load a :class:`TinyPaiNN` checkpoint folder (``config.json`` + ``model.pt``).

    Args:
        path: a local folder written by :meth:`TinyPaiNN.save_pretrained`.
        map_location: where to load the tensors.

    Returns:
        The model in eval mode.

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        ValueError: the config names another model class.
    """
    path = Path(path)
    cfg_file, weights = path / "config.json", path / "model.pt"
    for f in (cfg_file, weights):
        if not f.is_file():
            raise FileNotFoundError(f"checkpoint file {f} not found (expected config.json and model.pt)")
    cfg = json.loads(cfg_file.read_text())
    if cfg.pop("class", None) != "TinyPaiNN":
        raise ValueError(f"{cfg_file} does not describe a TinyPaiNN")
    cfg["elements"] = tuple(cfg["elements"])
    model = TinyPaiNN(**cfg)
    model.load_state_dict(torch.load(weights, map_location=map_location, weights_only=True))
    return model.eval()


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters.

    Example:
        >>> count_parameters(nn.Linear(3, 2))
        8
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
