"""Low-rank Potts models: energies, pseudo-likelihood, autoregressive form, samplers, export.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva, Barthelemy
Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975.

Implements Sec. 3 of the paper:

- couplings ``J_ij(a,b) = K^{-1/2} sum_k V_{k,i}(a) V_{k,j}(b)`` for ``i != j``, ``J_ii = 0``;
- PW joint ``log p(s) = sum_i h_i(s_i) + 1/2 sum_{i != j} J_ij(s_i, s_j) - log Z`` and its
  pseudo-likelihood in O(K L q) per sequence via ``R_k = sum_j V_{k,j}(s_j)`` (self term removed);
- ‖J‖²_F in low-rank form through the Gram tensors ``G_{kl,i} = sum_a V_{k,i}(a) V_{l,i}(a)``;
- InvMSAFold-AR: ``p(s) = prod_i softmax_a(h_i(a) + c_i^{-1} sum_{j<i} J_ij(a, s_j))[s_i]`` with
  ``c_i = max(i, 1)`` (0-based), exact ancestral sampling with exclusive prefix sums;
- Gibbs sampling of the PW model with the same running sums.

One sign convention throughout: larger ``h``/``J`` means more probable (softmax(+field)).

The models compute on the device of their parameters; token inputs are moved there. The seeded
samplers draw from a CPU ``torch.Generator`` and move each draw to that device, so a seed gives
the same random stream whatever device the parameters live on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from iclr25.common import rng

__all__ = [
    "ARPotts",
    "PottsParams",
    "ar_fields",
    "ar_frobenius_sq",
    "ar_log_prob",
    "conditional_logits",
    "lowrank_energy",
    "pseudo_log_likelihood",
    "pw_frobenius_sq",
    "read_adabmdca_text",
    "read_npz",
    "write_adabmdca_text",
    "write_npz",
]


def _scale(V: Tensor) -> float:
    return float(V.shape[-3]) ** -0.5


def _check_tokens(seqs: Tensor, q: int, length: int) -> Tensor:
    if seqs.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"sequences must be integer tokens, got {seqs.dtype}")
    if seqs.shape[-1] != length:
        raise ValueError(f"sequences have length {seqs.shape[-1]}, the model has L = {length}")
    if seqs.numel() and (int(seqs.min()) < 0 or int(seqs.max()) >= q):
        raise ValueError(
            f"sequence tokens must lie in [0, q={q}); got range [{int(seqs.min())}, {int(seqs.max())}]"
        )
    return seqs.long()


def _gather_u(V: Tensor, seqs: Tensor) -> Tensor:
    """``u[..., m, k, i] = V[..., k, i, s_{m,i}]``.

    Shape:
        ``V [B, K, L, q]``, ``seqs [B, M, L]`` -> ``[B, M, K, L]``.
    """
    B, K, L, q = V.shape
    M = seqs.shape[1]
    idx = seqs[:, :, None, :, None].expand(B, M, K, L, 1)
    return V[:, None].expand(B, M, K, L, q).gather(-1, idx)[..., 0]  # [B, M, K, L]


def lowrank_energy(V: Tensor, h: Tensor, seqs: Tensor) -> Tensor:
    """Unnormalised PW log-probability ``sum_i h_i(s_i) + 1/2 sum_{i!=j} J_ij(s_i, s_j)``.

    Computed as ``sum_i h_i(s_i) + K^{-1/2}/2 sum_k [(sum_i u_ki)^2 - sum_i u_ki^2]``; the subtracted
    squares are the self-couplings ``J_ii`` that the model excludes.

    Args:
        V: low-rank factors.
        h: fields.
        seqs: integer tokens.

    Returns:
        Energies (higher = more probable).

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]`` -> ``[B, M]``.

    Example:
        >>> V, h = torch.zeros(1, 2, 3, 4), torch.zeros(1, 3, 4)
        >>> lowrank_energy(V, h, torch.zeros(1, 5, 3, dtype=torch.long)).shape
        torch.Size([1, 5])
    """
    u = _gather_u(V, seqs)  # [B, M, K, L]
    fields = h[:, None].expand(-1, seqs.shape[1], -1, -1).gather(-1, seqs[..., None])[..., 0].sum(-1)
    pair = 0.5 * _scale(V) * (u.sum(-1).pow(2) - u.pow(2).sum(-1)).sum(-1)
    return fields + pair


def conditional_logits(V: Tensor, h: Tensor, seqs: Tensor) -> Tensor:
    """Conditional fields ``A_i(a) = h_i(a) + sum_{j != i} J_ij(a, s_j)`` of the PW model.

    ``A_i(a) = h_i(a) + K^{-1/2} sum_k V_{k,i}(a) (R_k - u_{k,i})`` with ``R_k = sum_j u_{k,j}``; the
    ``- u_{k,i}`` removes the self-coupling, so ``A_i`` does not depend on ``s_i``.

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]`` -> ``[B, M, L, q]``.

    Example:
        >>> V, h = torch.randn(1, 2, 3, 4), torch.randn(1, 3, 4)
        >>> conditional_logits(V, h, torch.zeros(1, 5, 3, dtype=torch.long)).shape
        torch.Size([1, 5, 3, 4])
    """
    u = _gather_u(V, seqs)  # [B, M, K, L]
    rest = u.sum(-1, keepdim=True) - u  # [B, M, K, L]: R_k - u_{k,i}
    return h[:, None] + _scale(V) * torch.einsum("bkia,bmki->bmia", V, rest)


def pseudo_log_likelihood(V: Tensor, h: Tensor, seqs: Tensor) -> Tensor:
    """``log p(s_i | s_\\i)`` for every site, the terms of the pseudo-likelihood.

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]`` -> ``[B, M, L]``.

    Example:
        >>> V, h = torch.zeros(1, 1, 2, 3), torch.zeros(1, 2, 3)
        >>> round(float(pseudo_log_likelihood(V, h, torch.zeros(1, 1, 2, dtype=torch.long))[0, 0, 0]), 4)
        -1.0986
    """
    a = conditional_logits(V, h, seqs)
    return a.gather(-1, seqs[..., None])[..., 0] - torch.logsumexp(a, -1)


def _gram(V: Tensor) -> Tensor:
    """``G_{kl,i} = sum_a V_{k,i}(a) V_{l,i}(a)``; ``[B, K, L, q] -> [B, K, K, L]``."""
    return torch.einsum("bkia,blia->bkli", V, V)


def pw_frobenius_sq(V: Tensor) -> Tensor:
    """``‖J‖²_F`` over the full symmetric coupling matrix without diagonal blocks, per structure.

    ``K^{-1} [sum_{k,l} (sum_i G_{kl,i})^2 - sum_i sum_{k,l} G_{kl,i}^2]``.

    Shape:
        ``V [B, K, L, q] -> [B]``.

    Example:
        >>> float(pw_frobenius_sq(torch.ones(1, 1, 2, 1)))
        2.0
    """
    g = _gram(V)
    return (g.sum(-1).pow(2).sum((-1, -2)) - g.pow(2).sum((-1, -2, -3))) / V.shape[-3]


def _c(length: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """ArDCA rescaling ``c_i = max(i, 1)`` with 0-based i (number of preceding sites)."""
    return torch.arange(length, device=device, dtype=dtype).clamp(min=1)


def ar_frobenius_sq(V: Tensor) -> Tensor:
    """``sum_i sum_{j<i} ‖J_ij / c_i‖²_F`` of the AR model's rescaled lower triangle, per structure.

    Shape:
        ``V [B, K, L, q] -> [B]``.

    Example:
        >>> float(ar_frobenius_sq(torch.ones(1, 1, 3, 1)))
        1.5
    """
    g = _gram(V)  # [B, K, K, L]
    prefix = torch.cumsum(g, -1) - g  # exclusive prefix sums over j < i
    c = _c(V.shape[-2], V.device, V.dtype)
    return (g * prefix).sum((-2, -3)).div(c.pow(2)).sum(-1) / V.shape[-3]


def ar_fields(V: Tensor, h: Tensor, seqs: Tensor) -> Tensor:
    """AR conditional logits ``h_i(a) + (c_i sqrt(K))^{-1} sum_k V_{k,i}(a) R_{k,i}``.

    ``R`` is the exclusive prefix sum of ``u``.

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]`` -> ``[B, M, L, q]``.
    """
    u = _gather_u(V, seqs)  # [B, M, K, L]
    r = torch.cumsum(u, -1) - u  # R_{k,i} = sum_{j<i} u_{k,j}
    c = _c(V.shape[-2], V.device, V.dtype)
    return h[:, None] + _scale(V) * torch.einsum("bkia,bmki->bmia", V, r) / c[:, None]


def ar_log_prob(V: Tensor, h: Tensor, seqs: Tensor) -> Tensor:
    """Per-site ``log p(s_i | s_<i)`` of InvMSAFold-AR (sum over sites = exact log-probability).

    Shape:
        ``V [B, K, L, q]``, ``h [B, L, q]``, ``seqs [B, M, L]`` -> ``[B, M, L]``.

    Example:
        >>> V, h = torch.zeros(1, 1, 2, 3), torch.zeros(1, 2, 3)
        >>> round(float(ar_log_prob(V, h, torch.zeros(1, 1, 2, dtype=torch.long)).sum()), 4)
        -2.1972
    """
    a = ar_fields(V, h, seqs)
    return a.gather(-1, seqs[..., None])[..., 0] - torch.logsumexp(a, -1)


def _categorical(logits: Tensor, generator: torch.Generator) -> Tensor:
    """Draw one index per row of ``[N, q]`` logits by inverse CDF (one uniform per row).

    The uniforms come from ``generator`` on its own device and are moved to the logits' device.
    """
    p = torch.softmax(logits, -1).cumsum(-1)
    u = rng.rand(logits.shape[0], 1, generator=generator, dtype=p.dtype, device=p.device) * p[:, -1:]
    return (p < u).sum(-1).clamp(max=logits.shape[-1] - 1)


@dataclass
class PottsParams:
    """A low-rank Potts model of one structure (the PW model of InvMSAFold).

    Args:
        h: fields ``h_i(a)``, ``[L, q]``.
        V: low-rank factors ``V_{k,i}(a)``, ``[K, L, q]``; ``J_ij = K^{-1/2} V_i^T V_j`` off the diagonal.
        alphabet: letters of the q states.

    Example:
        >>> p = PottsParams(torch.zeros(3, 2), torch.ones(1, 3, 2), "AB")
        >>> J, h = p.to_dense()
        >>> J.shape, float(J[0, 0].abs().sum()), float(J[0, 1, 0, 0])
        (torch.Size([3, 3, 2, 2]), 0.0, 1.0)
    """

    h: Tensor
    V: Tensor
    alphabet: str

    def __post_init__(self) -> None:
        if self.V.ndim != 3 or self.h.ndim != 2:
            raise ValueError(
                f"need h [L, q] and V [K, L, q], got {tuple(self.h.shape)} and {tuple(self.V.shape)}"
            )
        if self.V.shape[0] < 1:
            raise ValueError("rank K must be >= 1")
        if self.V.shape[1:] != self.h.shape:
            raise ValueError(f"V {tuple(self.V.shape)} does not match h {tuple(self.h.shape)}")
        if len(self.alphabet) != self.h.shape[1]:
            raise ValueError(f"alphabet has {len(self.alphabet)} letters, q = {self.h.shape[1]}")

    @property
    def length(self) -> int:
        """L."""
        return int(self.h.shape[0])

    @property
    def q(self) -> int:
        """Number of states."""
        return int(self.h.shape[1])

    @property
    def rank(self) -> int:
        """K."""
        return int(self.V.shape[0])

    @property
    def scale(self) -> float:
        """``K^{-1/2}``."""
        return self.rank**-0.5

    def _tok(self, seqs: Tensor) -> Tensor:
        return _check_tokens(torch.as_tensor(seqs), self.q, self.length).to(self.h.device)[None]

    def energy(self, seqs: Tensor) -> Tensor:
        """Unnormalised log-probability of ``[N, L]`` tokens, ``[N]``."""
        return lowrank_energy(self.V[None], self.h[None], self._tok(seqs))[0]

    def conditional_logits(self, seqs: Tensor) -> Tensor:
        """``A_i(a)`` for ``[N, L]`` tokens, ``[N, L, q]``."""
        return conditional_logits(self.V[None], self.h[None], self._tok(seqs))[0]

    def pseudo_log_likelihood(self, seqs: Tensor) -> Tensor:
        """``log p(s_i | s_\\i)``, ``[N, L]``."""
        return pseudo_log_likelihood(self.V[None], self.h[None], self._tok(seqs))[0]

    def to_dense(self) -> tuple[Tensor, Tensor]:
        """Dense couplings with zero diagonal blocks and the fields: ``(J [L, L, q, q], h [L, q])``."""
        J = self.scale * torch.einsum("kia,kjb->ijab", self.V, self.V)
        eye = torch.eye(self.length, dtype=torch.bool, device=J.device)
        return J.masked_fill(eye[:, :, None, None], 0.0), self.h

    def as_ar(self) -> ARPotts:
        """The same parameters read as InvMSAFold-AR (lower triangle, ``1/max(i,1)`` rescaling)."""
        return ARPotts(self.h, self.V, self.alphabet)

    @torch.no_grad()
    def sample_gibbs(
        self,
        n: int,
        *,
        sweeps: int = 20,
        burn_in: int = 10,
        thin: int = 1,
        chains: int | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> Tensor:
        """Gibbs sampling with running sums ``R_k`` (O(K q) per site update).

        ``chains`` parallel chains (default ``n``) start uniform at random; each runs
        ``total = max(sweeps, burn_in + (reads - 1) * thin + 1)`` sweeps, where ``reads =
        ceil(n / chains)``, and a sequence is read after every ``thin`` sweeps ending with the last:
        the chains stop as soon as the last sample is read (no sweep is wasted), and every sweep
        before the first read (at least ``burn_in``) is burn-in.

        Args:
            n: sequences returned.
            sweeps: minimum total sweeps per chain.
            burn_in: minimum sweeps before the first read.
            thin: sweeps between reads.
            chains: parallel chains.
            temperature: divides the conditional logits.
            seed: seed of a CPU generator; its draws are moved to the parameters' device, so a
                seed gives the same chains' random stream on every device.

        Returns:
            ``[n, L]`` tokens on the parameters' device.

        Example:
            >>> p = PottsParams(torch.zeros(3, 2), torch.zeros(1, 3, 2), "AB")
            >>> p.sample_gibbs(4, sweeps=2, burn_in=1).shape
            torch.Size([4, 3])
        """
        if n < 1 or thin < 1 or burn_in < 0 or temperature <= 0:
            raise ValueError("need n >= 1, thin >= 1, burn_in >= 0, temperature > 0")
        g = torch.Generator().manual_seed(seed)  # CPU stream; draws move to the parameters' device
        chains = n if chains is None else chains
        reads = -(-n // chains)
        total = max(sweeps, burn_in + (reads - 1) * thin + 1)
        s = rng.randint(0, self.q, (chains, self.length), generator=g, device=self.h.device)
        V, h, sc = self.V, self.h, self.scale
        vt = V.permute(1, 2, 0)  # [L, q, K]
        r = torch.zeros(chains, self.rank, dtype=V.dtype, device=V.device)
        for i in range(self.length):
            r += vt[i, s[:, i]]
        first = total - 1 - (reads - 1) * thin  # reads at sweeps first, first + thin, ..., total - 1
        out = []
        for sweep in range(total):
            for i in range(self.length):
                own = vt[i, s[:, i]]  # [chains, K]
                logits = h[i] + sc * (r - own) @ vt[i].T  # [chains, q]
                new = _categorical(logits / temperature, g)
                r += vt[i, new] - own
                s[:, i] = new
            if sweep >= first and (sweep - first) % thin == 0:
                out.append(s.clone())
        return torch.cat(out)[:n]

    def sample(
        self, n: int, *, temperature: float = 1.0, seed: int = 0, sweeps: int = 30, burn_in: int = 20
    ) -> Tensor:
        """``n`` sequences from ``n`` independent Gibbs chains (InvMSAFold-PW sampling).

        The same call as :meth:`ARPotts.sample`, so either model serves as a sampler; defaults as
        :class:`~iclr25.methods.invmsafold.SampleConfig`. See :meth:`sample_gibbs` for the options.

        Returns:
            ``[n, L]`` tokens (``decode(tokens, self.alphabet)`` gives strings).

        Example:
            >>> p = PottsParams(torch.zeros(3, 2), torch.zeros(1, 3, 2), "AB")
            >>> p.sample(4, seed=0, sweeps=2, burn_in=1).shape
            torch.Size([4, 3])
        """
        return self.sample_gibbs(n, sweeps=sweeps, burn_in=burn_in, temperature=temperature, seed=seed)

    def numpy(self) -> dict[str, np.ndarray]:
        """Parameters as numpy: ``h [L, q]``, ``V [K, L, q]``, dense ``J [L, L, q, q]``."""
        J, h = self.to_dense()
        return {
            "h": h.detach().cpu().numpy(),
            "V": self.V.detach().cpu().numpy(),
            "J": J.detach().cpu().numpy(),
        }


@dataclass
class ARPotts:
    """InvMSAFold-AR: the low-rank Potts parameters read autoregressively (exactly normalised).

    ``p(s) = prod_i softmax_a(h_i(a) + c_i^{-1} sum_{j<i} J_ij(a, s_j))[s_i]``, ``c_i = max(i, 1)``.

    Args:
        h: fields, ``[L, q]``.
        V: low-rank factors, ``[K, L, q]``.
        alphabet: letters of the q states.

    Example:
        >>> m = ARPotts(torch.zeros(2, 3), torch.randn(2, 2, 3), "ABC")
        >>> s = m.sample(5, seed=0)
        >>> s.shape, bool(m.log_prob(s).le(0).all())
        (torch.Size([5, 2]), True)
    """

    h: Tensor
    V: Tensor
    alphabet: str

    def __post_init__(self) -> None:
        PottsParams(self.h, self.V, self.alphabet)  # same shape checks

    @property
    def length(self) -> int:
        """L."""
        return int(self.h.shape[0])

    @property
    def q(self) -> int:
        """Number of states."""
        return int(self.h.shape[1])

    @property
    def rank(self) -> int:
        """K."""
        return int(self.V.shape[0])

    def log_prob(self, seqs: Tensor) -> Tensor:
        """Exact ``log p(s)`` of ``[N, L]`` tokens (on any device), ``[N]`` on the parameters' device."""
        t = _check_tokens(torch.as_tensor(seqs), self.q, self.length).to(self.h.device)[None]
        return ar_log_prob(self.V[None], self.h[None], t)[0].sum(-1)

    def dense_log_prob(self, seqs: Tensor) -> Tensor:
        """``log p(s)`` from the dense couplings (O(L² q²) reference), ``[N]``."""
        t = _check_tokens(torch.as_tensor(seqs), self.q, self.length).to(self.h.device)
        J, h = PottsParams(self.h, self.V, self.alphabet).to_dense()
        total = torch.zeros(t.shape[0], dtype=h.dtype, device=h.device)
        for i in range(self.length):
            f = h[i].expand(t.shape[0], -1).clone()
            for j in range(i):
                f = f + J[i, j][:, t[:, j]].T / max(i, 1)
            total += torch.log_softmax(f, -1).gather(1, t[:, i : i + 1])[:, 0]
        return total

    @torch.no_grad()
    def sample(self, n: int, *, temperature: float = 1.0, seed: int = 0) -> Tensor:
        """Exact ancestral sampling N→C, carrying ``R_k = sum_{j<i} V_{k,j}(s_j)`` (O(K q) per site).

        Args:
            n: number of sequences.
            temperature: divides the conditional logits.
            seed: seed of a CPU generator; its draws are moved to the parameters' device, so a
                seed gives the same random stream on every device.

        Returns:
            ``[n, L]`` tokens on the parameters' device.
        """
        if n < 1 or temperature <= 0:
            raise ValueError("need n >= 1 and temperature > 0")
        g = torch.Generator().manual_seed(seed)  # CPU stream; draws move to the parameters' device
        vt = self.V.permute(1, 2, 0)  # [L, q, K]
        sc = self.rank**-0.5
        r = torch.zeros(n, self.rank, dtype=self.V.dtype, device=self.V.device)
        s = torch.empty(n, self.length, dtype=torch.long, device=self.V.device)
        for i in range(self.length):
            logits = self.h[i] + (sc / max(i, 1)) * (r @ vt[i].T)  # [n, q]
            s[:, i] = _categorical(logits / temperature, g)
            r += vt[i, s[:, i]]
        return s

    def macs_per_sequence(self) -> int:
        """Multiply-adds to sample one sequence: per site ``K q`` (field) + ``K`` (prefix update)."""
        return self.length * (self.rank * self.q + self.rank)


def write_npz(path: str | Path, params: PottsParams) -> None:
    """Save ``h``, ``V``, dense ``J`` and the alphabet to a ``.npz`` file."""
    d = params.numpy()
    np.savez(path, h=d["h"], V=d["V"], J=d["J"], alphabet=np.array(params.alphabet))


def read_npz(path: str | Path) -> PottsParams:
    """Load a :class:`PottsParams` written by :func:`write_npz`."""
    with np.load(path) as z:
        return PottsParams(torch.from_numpy(z["h"]), torch.from_numpy(z["V"]), str(z["alphabet"]))


def write_adabmdca_text(path: str | Path, params: PottsParams) -> None:
    """Write the dense model in adabmDCA/bmDCA text format.

    Lines ``J i j a b value`` for ``i < j`` and ``h i a value`` (0-based indices), with the
    ``p ∝ exp(+h + J)`` sign convention used by adabmDCA.
    """
    J, h = params.to_dense()
    J, h = J.detach().cpu().numpy(), h.detach().cpu().numpy()
    L, q = h.shape
    lines = []
    for i in range(L):
        for j in range(i + 1, L):
            for a in range(q):
                for b in range(q):
                    lines.append(f"J {i} {j} {a} {b} {J[i, j, a, b]:.8g}")
    for i in range(L):
        for a in range(q):
            lines.append(f"h {i} {a} {h[i, a]:.8g}")
    Path(path).write_text("\n".join(lines) + "\n")


def read_adabmdca_text(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a dense ``(J [L, L, q, q], h [L, q])`` from adabmDCA text (symmetrised, zero diagonal)."""
    rows = [ln.split() for ln in Path(path).read_text().splitlines() if ln.strip()]
    hs = [r for r in rows if r[0] == "h"]
    L = max(int(r[1]) for r in hs) + 1
    q = max(int(r[2]) for r in hs) + 1
    J, h = np.zeros((L, L, q, q)), np.zeros((L, q))
    for r in rows:
        if r[0] == "J":
            i, j, a, b = map(int, r[1:5])
            J[i, j, a, b] = J[j, i, b, a] = float(r[5])
        elif r[0] == "h":
            h[int(r[1]), int(r[2])] = float(r[3])
    return J, h
