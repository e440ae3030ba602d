"""Hessian rows of a force field: vector-Jacobian products, finite differences, row sampling.

Implements Sec. 3 of *Towards Fast, Specialized Machine Learning Force Fields: Distilling
Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan;
ICLR 2025; arXiv:2501.09009): a Hessian row of structure b is the derivative of one force
component ``F_{a,c}`` with respect to all positions of b, ``J_r = ∂F_{a,c}/∂X ∈ R^{N_b x 3}``
(for a conservative model ``J = -∂²E/∂X²``). Rows are drawn per structure per step
(uniformly without replacement among free coordinates, or by "hard mining" ∝
softmax(running loss / T)).

VJP rows: a one-hot cotangent on the force output. Because the force Jacobian of a batch is
block-diagonal over structures, one VJP with one one-hot per structure yields one row of every
structure at once, so ``s`` rows per structure cost ``s`` VJPs whatever the batch size.

Finite differences give **columns** ``∂F/∂x_r`` (Trap 1); :func:`force_jacobian` with
``mode="fd"`` builds the full Jacobian from all ``±h`` copies and rows are sliced from it, so the
result is correct for direct-force (non-symmetric) models too.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from .batch import AtomsBatch

__all__ = ["check_rows", "force_jacobian", "hessian_rows", "sample_rows"]


def check_rows(batch: AtomsBatch, rows: torch.Tensor) -> torch.Tensor:
    """Validate ``rows`` ``[R, 3]`` = (structure, local atom, component); returns them as long.

    Raises:
        ValueError: wrong shape, or an index out of range for the batch.
    """
    rows = torch.as_tensor(rows, dtype=torch.long)
    if rows.dim() != 2 or rows.shape[1] != 3:
        raise ValueError(f"rows must have shape [R, 3] (structure, atom, component), got {tuple(rows.shape)}")
    if rows.numel() == 0:
        return rows
    s, a, c = rows.unbind(1)
    if s.min() < 0 or s.max() >= batch.num_structures:
        raise ValueError(f"row structure index out of range [0, {batch.num_structures})")
    n = batch.sizes[s]
    if (a < 0).any() or (a >= n).any():
        k = int(torch.nonzero((a < 0) | (a >= n))[0])
        raise ValueError(f"row {k}: atom {int(a[k])} out of range for a structure of {int(n[k])} atoms")
    if (c < 0).any() or (c > 2).any():
        raise ValueError("row component must be 0, 1 or 2")
    return rows


def _rank_within_structure(structures: torch.Tensor) -> torch.Tensor:
    """For each row, how many earlier rows belong to the same structure."""
    rank = torch.zeros_like(structures)
    seen: dict[int, int] = {}
    for k, b in enumerate(structures.tolist()):
        rank[k] = seen.get(b, 0)
        seen[b] = rank[k].item() + 1
    return rank


def hessian_rows(
    model: Any,
    batch: AtomsBatch,
    rows: torch.Tensor,
    *,
    mode: Literal["vjp", "fd", "fd_columns"] = "vjp",
    create_graph: bool = False,
    fd_step: float = 1e-4,
) -> torch.Tensor:
    """Rows ``J_r = ∂F_{a,c}/∂X_b`` of the force Jacobian (Eq. 2; ``-H`` for conservative models).

    Args:
        model: an :class:`~iclr25.methods.hessian_distill.EnergyModel`, or a teacher with a
            ``hessian_rows(batch, rows)`` method (which is then called).
        batch: the structures.
        rows: ``[R, 3]`` (structure, local atom index, component).
        mode: "vjp" (autograd; exact), "fd" (central differences of the forces over every
            coordinate of the structure, rows sliced from the full Jacobian), or "fd_columns"
            (central differences over the requested coordinate only: the column ``∂F/∂x_r``,
            equal to the row for conservative models only, which it requires; one ±h pair of
            copies of the batch per row rank, the cheapest path for training).
        create_graph: keep the graph so the rows can be trained on (double backward; the
            finite-difference path keeps it too, Trap 3).
        fd_step: h in Å for ``mode="fd"`` (use float64 for h = 1e-4; Trap 6).

    Returns:
        ``[R, N_max, 3]``: row r in the first ``N_b`` atom slots of its structure, zero-padded.

    Raises:
        ValueError: rows out of range or an unknown mode.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import TinyPaiNN
        >>> m = TinyPaiNN(hidden=8, layers=1, n_rbf=4).double()
        >>> atoms = Icosahedron("Cu", 2)
        >>> atoms.rattle(0.05, seed=0)  # off the symmetric geometry, where FD is accurate
        >>> b = AtomsBatch.from_atoms([atoms], dtype=torch.float64)
        >>> r = torch.tensor([[0, 3, 1]])
        >>> torch.allclose(hessian_rows(m, b, r), hessian_rows(m, b, r, mode="fd"), atol=1e-6)
        True
    """
    if hasattr(model, "hessian_rows") and not isinstance(model, torch.nn.Module):
        return model.hessian_rows(batch, rows)
    rows = check_rows(batch, rows)
    if mode not in ("vjp", "fd", "fd_columns"):
        raise ValueError(f"mode must be 'vjp', 'fd' or 'fd_columns', got {mode!r}")
    n_max = int(batch.sizes.max())
    out = batch.pos.new_zeros(rows.shape[0], n_max, 3)
    if rows.shape[0] == 0:
        return out
    if mode == "fd":
        for b in rows[:, 0].unique().tolist():
            jac = force_jacobian(model, batch, b, mode="fd", fd_step=fd_step, create_graph=create_graph)
            n = int(batch.sizes[b])
            for k in torch.nonzero(rows[:, 0] == b).flatten().tolist():
                r = 3 * int(rows[k, 1]) + int(rows[k, 2])
                out[k, :n] = jac[r].reshape(n, 3)
        return out
    rank = _rank_within_structure(rows[:, 0])
    n_rank = int(rank.max()) + 1
    if mode == "fd_columns":
        return _fd_columns(model, batch, rows, rank, n_rank, n_max, fd_step, create_graph)
    pos = batch.pos.detach().requires_grad_(True)
    forces = model(batch.with_positions(pos), create_graph=True)["forces"]  # [N, 3]
    result = []
    for k in range(n_rank):
        sel = torch.nonzero(rank == k).flatten()
        cot = torch.zeros_like(forces)  # [N, 3]; one one-hot per structure
        atom = batch.ptr[rows[sel, 0]] + rows[sel, 1]
        cot[atom, rows[sel, 2]] = 1.0
        (jac,) = torch.autograd.grad(
            forces, pos, cot, create_graph=create_graph, retain_graph=create_graph or k < n_rank - 1
        )  # [N, 3]: structure b's block holds its row
        result.append((sel, jac))
    return _pieces(batch, rows, n_max, result)


def _pieces(batch: AtomsBatch, rows: torch.Tensor, n_max: int, per_rank: list) -> torch.Tensor:
    """Cut each row's structure block out of ``[N, 3]`` batch-wide results and pad to ``n_max``."""
    pieces: list[torch.Tensor | None] = [None] * rows.shape[0]
    for sel, full in per_rank:
        for k in sel.tolist():
            b = int(rows[k, 0])
            lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
            pieces[k] = torch.nn.functional.pad(full[lo:hi], (0, 0, 0, n_max - (hi - lo)))
    return torch.stack(pieces)  # type: ignore[arg-type]


def _fd_columns(
    model: Any,
    batch: AtomsBatch,
    rows: torch.Tensor,
    rank: torch.Tensor,
    n_rank: int,
    n_max: int,
    fd_step: float,
    create_graph: bool,
) -> torch.Tensor:
    """Columns ∂F/∂x_r by central differences; one ±h copy of the whole batch per row rank."""
    if not getattr(model, "conservative", True):
        raise ValueError(
            "mode='fd_columns' gives columns, equal to rows only for conservative models (Trap 1)"
        )
    if fd_step <= 0:
        raise ValueError(f"fd_step must be > 0, got {fd_step}")
    n_struct = batch.num_structures
    disp, sels = [], []
    for k in range(n_rank):
        sel = torch.nonzero(rank == k).flatten()
        d = torch.zeros_like(batch.pos)  # one displaced coordinate per structure
        d[batch.ptr[rows[sel, 0]] + rows[sel, 1], rows[sel, 2]] = fd_step
        disp += [d, -d]
        sels.append(sel)
    copies = batch.select(list(range(n_struct)) * (2 * n_rank))
    copies = copies.with_positions(copies.pos + torch.cat(disp))
    forces = model(copies, create_graph=create_graph)["forces"]  # [2·n_rank·N, 3]
    n = batch.pos.shape[0]
    per_rank = []
    for k, sel in enumerate(sels):
        plus, minus = forces[2 * k * n : (2 * k + 1) * n], forces[(2 * k + 1) * n : (2 * k + 2) * n]
        per_rank.append((sel, (plus - minus) / (2 * fd_step)))
    return _pieces(batch, rows, n_max, per_rank)


def force_jacobian(
    model: torch.nn.Module,
    batch: AtomsBatch,
    structure: int,
    *,
    mode: Literal["autograd", "fd"] = "autograd",
    fd_step: float = 1e-4,
    create_graph: bool = False,
) -> torch.Tensor:
    """The full force Jacobian ``J[i, j] = ∂F_i/∂x_j`` of one structure (flattened coordinates).

    Args:
        model: an energy model.
        batch: the structures.
        structure: which structure.
        mode: "autograd" (3N VJPs) or "fd" (all 2·3N ±h copies evaluated in one batch).
        fd_step: h in Å for finite differences.
        create_graph: keep the graph (training through finite differences).

    Returns:
        ``[3N, 3N]``; rows are ``∂F_i/∂X``. For a conservative model it is ``-H`` (symmetric).

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import TinyPaiNN
        >>> m = TinyPaiNN(hidden=8, layers=1, n_rbf=4).double()
        >>> b = AtomsBatch.from_atoms([Icosahedron("Cu", 2)], dtype=torch.float64)
        >>> force_jacobian(m, b, 0).shape
        torch.Size([39, 39])
    """
    if not 0 <= structure < batch.num_structures:
        raise ValueError(f"structure {structure} out of range [0, {batch.num_structures})")
    one = batch.select([structure])
    n = one.pos.shape[0]
    if mode == "autograd":
        rows = torch.stack(
            [torch.zeros(3 * n, dtype=torch.long), torch.arange(3 * n) // 3, torch.arange(3 * n) % 3], dim=1
        )
        return hessian_rows(model, one, rows, create_graph=create_graph).reshape(3 * n, 3 * n)
    if mode != "fd":
        raise ValueError(f"mode must be 'autograd' or 'fd', got {mode!r}")
    if fd_step <= 0:
        raise ValueError(f"fd_step must be > 0, got {fd_step}")
    # all ±h copies in one batch: copy 2k is x + h e_k, copy 2k+1 is x - h e_k
    copies = one.select([0] * (6 * n))
    disp = torch.zeros(6 * n, n, 3, dtype=one.pos.dtype)
    k = torch.arange(3 * n)
    disp[2 * k, k // 3, k % 3] = fd_step
    disp[2 * k + 1, k // 3, k % 3] = -fd_step
    copies = copies.with_positions(copies.pos + disp.reshape(-1, 3))
    copies.ids = [f"{one.ids[0]}#{c}" for c in range(6 * n)]
    forces = model(copies, create_graph=create_graph)["forces"].reshape(6 * n, 3 * n)
    cols = (forces[0::2] - forces[1::2]) / (2 * fd_step)  # [3N(perturbed j), 3N(force i)]
    return cols.T  # J[i, j] = ∂F_i/∂x_j


def sample_rows(
    batch: AtomsBatch,
    per_structure: int,
    generator: torch.Generator,
    *,
    strategy: Literal["uniform", "hard"] = "uniform",
    running_loss: dict[str, torch.Tensor] | None = None,
    temperature: float = 0.1,
    min_visited: float = 0.1,
    allowed: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Draw Hessian rows for every structure of a batch (Sec. 3, row subsampling).

    Rows are drawn without replacement among the ``3·N_free`` free coordinates of each
    structure. ``"hard"``: once more than ``min_visited`` of a structure's rows have a running
    loss, rows are drawn ∝ softmax(loss / temperature), unvisited rows scoring 1.1 x max.

    Args:
        batch: the structures.
        per_structure: s, rows per structure.
        generator: the trainer's generator (seeded sampling, Trap 9).
        strategy: "uniform" or "hard".
        running_loss: structure id -> ``[3N]`` running per-row loss (NaN = unvisited).
        temperature: softmax temperature of hard mining.
        min_visited: fraction of visited rows before hard mining starts.
        allowed: structure id -> flat coordinates that have teacher labels (row-subsampled
            labels); rows are drawn from their intersection with the free coordinates.

    Returns:
        ``[B * s, 3]`` rows (structure, local atom, component), grouped by structure.

    Raises:
        ValueError: ``per_structure`` < 1 or larger than a structure's free coordinates.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> b = AtomsBatch.from_atoms([Icosahedron("Cu", 2)] * 2, ids=["a", "b"])
        >>> sample_rows(b, 2, torch.Generator().manual_seed(0)).shape
        torch.Size([4, 3])
    """
    if per_structure < 1:
        raise ValueError(f"per_structure must be >= 1, got {per_structure}")
    if strategy not in ("uniform", "hard"):
        raise ValueError(f"strategy must be 'uniform' or 'hard', got {strategy!r}")
    out = []
    for b in range(batch.num_structures):
        lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
        free_atoms = torch.nonzero(~batch.fixed[lo:hi]).flatten()
        coords = (free_atoms[:, None] * 3 + torch.arange(3)).flatten()  # free flat coordinates
        if allowed is not None and batch.ids[b] in allowed:
            coords = coords[torch.isin(coords, allowed[batch.ids[b]])]
        if per_structure > coords.numel():
            raise ValueError(
                f"structure {batch.ids[b]!r}: {per_structure} rows requested but only "
                f"{coords.numel()} free coordinates (3·N_free)"
            )
        weights = torch.ones(coords.numel(), dtype=torch.float64)
        if strategy == "hard" and running_loss is not None and batch.ids[b] in running_loss:
            loss = running_loss[batch.ids[b]].to(torch.float64)[coords]
            visited = ~torch.isnan(loss)
            if visited.float().mean() > min_visited:
                score = torch.where(visited, loss, 1.1 * loss[visited].max())
                weights = torch.softmax(score / temperature, dim=0)
        pick = torch.multinomial(weights, per_structure, replacement=False, generator=generator)
        flat = coords[pick]
        out.append(torch.stack([torch.full_like(flat, b), flat // 3, flat % 3], dim=1))
    return torch.cat(out)
