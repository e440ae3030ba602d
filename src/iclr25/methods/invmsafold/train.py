"""Training of InvMSAFold (pseudo-likelihood or autoregressive likelihood) and of the IF-AR baseline.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Silva, Meynard-Piganeau, Lucibello,
Feinauer, ICLR 2025, arXiv:2406.11975, Sec. 3 and App.: at each step B structures, each with M MSA
rows drawn uniformly with replacement (no reweighting); Gaussian noise σ on the embeddings; loss
``mean_{b,m,valid i} NLL + η_J Σ_b ‖J_b‖²_F / B + η_h Σ_b ‖h_b‖² / B`` with the PW pseudo-likelihood
or the AR conditionals (then ‖J‖² over the rescaled lower triangle); AdamW.

The trainers run on ``device`` (default: where the model already is); the batch and noise draws
come from the caller's generator on its own device (the CPU for the usual CPU generator) and are
moved to the model, so a CPU-seeded run draws the same batches and noise on every device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from iclr25.common import rng

from .baselines import IFAR
from .config import TrainConfig
from .data import pad_batch, subsample_rows
from .decoder import InvMSAFold
from .encoders import LatticeEncoder
from .potts import ar_frobenius_sq, ar_log_prob, pseudo_log_likelihood, pw_frobenius_sq

if TYPE_CHECKING:
    from iclr25._core.claims import ProgressFn

__all__ = ["invmsafold_loss", "train_ifar", "train_invmsafold"]


def invmsafold_loss(
    V: Tensor,
    h: Tensor,
    seqs: Tensor,
    padding_mask: Tensor,
    *,
    variant: Literal["pw", "ar"],
    eta_j: float,
    eta_h: float,
) -> Tensor:
    """Regularised negative (pseudo-)log-likelihood of a batch.

    Args:
        V: low-rank factors (zero at padding).
        h: fields (zero at padding).
        seqs: MSA rows (any token at padded sites).
        padding_mask: True at padded sites.
        variant: "pw" (pseudo-likelihood) or "ar" (autoregressive likelihood).
        eta_j: η_J.
        eta_h: η_h.

    Returns:
        Scalar loss.

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]``, ``padding_mask [B, L]``.

    Example:
        >>> V, h = torch.zeros(1, 2, 3, 4), torch.zeros(1, 3, 4)
        >>> s, pm = torch.zeros(1, 5, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.bool)
        >>> round(float(invmsafold_loss(V, h, s, pm, variant="pw", eta_j=0.0, eta_h=0.0)), 4)
        1.3863
    """
    if seqs.ndim != 3 or seqs.shape[0] != V.shape[0] or seqs.shape[2] != V.shape[2]:
        raise ValueError(
            f"MSA batch {tuple(seqs.shape)} does not match [B, M, L] = [{V.shape[0]}, M, {V.shape[2]}]"
        )
    if int(seqs.min()) < 0 or int(seqs.max()) >= V.shape[-1]:
        raise ValueError(f"MSA tokens must lie in [0, q={V.shape[-1]})")
    if variant == "pw":
        ll, frob = pseudo_log_likelihood(V, h, seqs), pw_frobenius_sq(V)
    elif variant == "ar":
        ll, frob = ar_log_prob(V, h, seqs), ar_frobenius_sq(V)
    else:
        raise ValueError(f"variant must be 'pw' or 'ar', got {variant!r}")
    valid = (~padding_mask)[:, None, :].expand_as(ll)
    nll = -(ll * valid).sum() / valid.sum()  # divides by M × unpadded sites
    B = V.shape[0]
    return nll + eta_j * frob.sum() / B + eta_h * h.pow(2).sum() / B


class _Embedder:
    """Batches of per-residue embeddings for a fixed structure list (features cached once)."""

    def __init__(self, encoder: object, structures: Sequence[object], device: torch.device) -> None:
        self.trainable = isinstance(encoder, LatticeEncoder)
        self.encoder = encoder
        if self.trainable:
            self.items = [encoder.features(s).to(device) for s in structures]
        else:
            if encoder is None:
                raise ValueError("the model needs an encoder to train from structures")
            self.items = [encoder.embed(s).to(device) for s in structures]

    def __call__(self, idx: list[int]) -> tuple[Tensor, Tensor]:
        x, mask = pad_batch([self.items[i] for i in idx])
        x, mask = x.to(self.items[0].device), mask.to(self.items[0].device)
        return (self.encoder(x, mask) if self.trainable else x), mask


def _check_msas(structures: Sequence[object], msas: Sequence[Tensor], q: int) -> None:
    if len(structures) != len(msas) or not structures:
        raise ValueError(f"{len(structures)} structures but {len(msas)} MSAs")
    for n, (s, m) in enumerate(zip(structures, msas, strict=True)):
        length = getattr(s, "length", None)
        if m.ndim != 2 or m.shape[0] < 1:
            raise ValueError(f"MSA {n} must be [N >= 1, L], got {tuple(m.shape)}")
        if length is not None and m.shape[1] != length:
            raise ValueError(f"MSA {n} has length {m.shape[1]} but its structure has L = {length}")
        if int(m.min()) < 0 or int(m.max()) >= q:
            raise ValueError(f"MSA {n} has tokens outside [0, q={q})")


def _place(model: torch.nn.Module, device: torch.device | str | None) -> torch.device:
    """Move ``model`` to ``device`` (``None``: leave it) and return the device it trains on."""
    if device is not None:
        model.to(device)
    return next(model.parameters()).device


def _report(progress: ProgressFn | None, stage: str, step: int, steps: int) -> None:
    """Call ``progress`` at step 0 and every 5 % of the steps."""
    if progress is not None and step % max(1, steps // 20) == 0:
        progress(stage, step, steps)


def train_invmsafold(
    model: InvMSAFold,
    structures: Sequence[object],
    msas: Sequence[Tensor],
    *,
    variant: Literal["pw", "ar"],
    config: TrainConfig,
    generator: torch.Generator,
    progress: ProgressFn | None = None,
    on_step: Callable[[int], None] | None = None,
    device: torch.device | str | None = None,
) -> list[float]:
    """Train InvMSAFold on (structure, MSA) pairs; returns the loss per step.

    Args:
        model: the network (its encoder, if trainable, is trained too).
        structures: structures the encoder embeds (lattice structures or domain ids).
        msas: one ``[N_b, L_b]`` token tensor per structure.
        variant: "pw" or "ar".
        config: steps, lr, batch sizes, η, noise.
        generator: torch RNG for batches and noise.
        progress: optional ``progress(stage, done, total)``, called every 5 % of the steps.
        on_step: called as ``on_step(steps_done)`` after every step, in eval mode without
            gradients (e.g. a validation curve).
        device: where to train: the model is moved there (in place) and the embeddings and MSA
            batches follow it; ``None`` keeps the model where it is. Batches and noise are drawn
            from ``generator`` on its own device and then moved.

    Returns:
        The loss of every step.

    Example:
        >>> import numpy as np
        >>> from iclr25.methods.invmsafold import DecoderConfig, LatticeStructure
        >>> s = LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [1, 1], [1, 0]]))
        >>> enc = LatticeEncoder(max_len=4, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
        >>> cfg = DecoderConfig(embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=2)
        >>> m = InvMSAFold(cfg, enc)
        >>> g = torch.Generator().manual_seed(0)
        >>> tc = TrainConfig(steps=3, lr=1e-2, batch_structures=1, msa_rows=2)
        >>> msa = torch.zeros(3, 4, dtype=torch.long)
        >>> losses = train_invmsafold(m, [s], [msa], variant="ar", config=tc, generator=g)
        >>> len(losses)
        3
    """
    _check_msas(structures, msas, model.config.q)
    device = _place(model, device)
    embed = _Embedder(model.encoder, structures, device)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    model.train()
    losses = []
    for step in range(config.steps):
        _report(progress, f"InvMSAFold-{variant.upper()} training", step, config.steps)
        idx = rng.randint(0, len(structures), (config.batch_structures,), generator=generator).tolist()
        emb, mask = embed(idx)
        emb = emb + config.noise * rng.randn(*emb.shape, generator=generator).to(emb)
        rows, _ = pad_batch([subsample_rows(msas[i], config.msa_rows, generator).T for i in idx])
        seqs = rows.transpose(1, 2).to(device)  # [B, M, L]
        V, h = model(emb, mask)
        loss = invmsafold_loss(V, h, seqs, mask, variant=variant, eta_j=config.eta_j, eta_h=config.eta_h)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach().item())
        if on_step is not None:
            model.eval()
            with torch.no_grad():
                on_step(step + 1)
            model.train()
    model.eval()
    return losses


def train_ifar(
    model: IFAR,
    structures: Sequence[object],
    seqs: Sequence[Tensor],
    *,
    config: TrainConfig,
    generator: torch.Generator,
    progress: ProgressFn | None = None,
    stop: int | None = None,
    on_step: Callable[[int], None] | None = None,
    device: torch.device | str | None = None,
) -> list[float]:
    """Train the IF-AR baseline by teacher forcing (cross-entropy); returns the loss per step.

    With one native sequence per structure this is one-to-one inverse folding; with MSA rows it is
    the data-matched diagnostic. Batches: ``batch_structures`` × ``msa_rows`` rows with replacement.

    Args:
        model: the IF-AR network (its encoder is trained too).
        structures: lattice structures.
        seqs: one ``[N_b, L_b]`` token tensor per structure.
        config: steps, lr, batch sizes, noise.
        generator: torch RNG for batches and noise.
        progress: optional ``progress(stage, done, total)``, called every 5 % of the steps.
        stop: end after this many steps (the first steps of a longer schedule).
        on_step: called as ``on_step(steps_done)`` after every step (e.g. a validation curve).
        device: where to train: the model is moved there (in place) and the features and
            sequence batches follow it; ``None`` keeps the model where it is. Batches and noise
            are drawn from ``generator`` on its own device and then moved.

    Returns:
        The loss of every step.
    """
    _check_msas(structures, seqs, model.q)
    device = _place(model, device)
    embed = [model.encoder.features(s).to(device) for s in structures]
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    model.train()
    losses = []
    for step in range(config.steps if stop is None else min(stop, config.steps)):
        _report(progress, "IF-AR training", step, config.steps)
        idx = rng.randint(0, len(structures), (config.batch_structures,), generator=generator).tolist()
        feats, mask = pad_batch([embed[i] for i in idx])  # on the model's device
        feats = feats + config.noise * rng.randn(*feats.shape, generator=generator, device=device)
        rows, _ = pad_batch([subsample_rows(seqs[i], config.msa_rows, generator).T for i in idx])
        tok = rows.transpose(1, 2).to(device)  # [B, M, L]
        logits = model(feats, tok, mask)
        valid = (~mask)[:, None, :].expand(tok.shape)
        loss = F.cross_entropy(logits[valid], tok[valid])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach().item())
        if on_step is not None:
            model.eval()
            with torch.no_grad():
                on_step(step + 1)
            model.train()
    model.eval()
    return losses
