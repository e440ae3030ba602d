"""Exactness of Hessian rows: VJP vs finite differences and torch.func.hessian, symmetry,
translation invariance, rotation equivariance, EMT teacher vs ase.vibrations, row sampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hessian_distill_helpers import batch64, cluster, model64, tetra

from iclr25.methods.hessian_distill import (
    ASECalculatorTeacher,
    AtomsBatch,
    TinyPaiNN,
    force_jacobian,
    hessian_rows,
    sample_rows,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _all_rows(n: int, b: int = 0) -> torch.Tensor:
    k = torch.arange(3 * n)
    return torch.stack([torch.full_like(k, b), k // 3, k % 3], dim=1)


def test_vjp_rows_equal_central_differences_float64() -> None:
    m, b = model64(), batch64([cluster(0), cluster(1)])
    rows = torch.tensor([[0, 2, 1], [1, 5, 0], [1, 12, 2], [0, 0, 0]])
    vjp = hessian_rows(m, b, rows)
    fd = hessian_rows(m, b, rows, mode="fd", fd_step=1e-4)
    torch.testing.assert_close(vjp, fd, rtol=1e-5, atol=1e-6 * fd.abs().max().item())
    cols = hessian_rows(m, b, rows, mode="fd_columns", fd_step=1e-4)
    torch.testing.assert_close(vjp, cols, rtol=1e-5, atol=1e-6 * fd.abs().max().item())


def test_vjp_rows_float32_within_1e3() -> None:
    m = TinyPaiNN(hidden=8, layers=2, n_rbf=6, cutoff=4.0)
    b = AtomsBatch.from_atoms([cluster(0)], cutoff=4.0)
    rows = torch.tensor([[0, 3, 2], [0, 7, 0]])
    vjp, fd = hessian_rows(m, b, rows), hessian_rows(m, b, rows, mode="fd", fd_step=1e-2)
    assert (vjp - fd).abs().max() <= 1e-3 * fd.abs().max() + 1e-3


def test_vjp_rows_equal_minus_torch_func_hessian_on_4_atoms() -> None:
    m, b = model64(), batch64([tetra()])
    # reverse-over-reverse: torch.func.hessian's forward mode loads TorchScript decompositions
    h = torch.func.jacrev(torch.func.jacrev(lambda p: m.energy(b, p).sum()))(b.pos).reshape(12, 12)
    rows = hessian_rows(m, b, _all_rows(4)).reshape(12, 12)
    torch.testing.assert_close(rows, -h, rtol=1e-8, atol=1e-10)


def test_conservative_hessian_symmetric_translation_invariant_and_equivariant() -> None:
    m, b = model64(), batch64([cluster(2)])
    jac = force_jacobian(m, b, 0)  # -H
    torch.testing.assert_close(jac, jac.T, rtol=1e-9, atol=1e-10)
    # translating every atom by the same vector changes nothing: Σ_j ∂F_i/∂x_j (same component) = 0
    sums = jac.reshape(39, 13, 3).sum(dim=1)
    assert sums.abs().max() < 1e-8 * jac.abs().max()
    # forces rotate with the frame
    q, _ = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    f = m(b)["forces"]
    f_rot = m(b.with_positions(b.pos @ q.T))["forces"]
    torch.testing.assert_close(f_rot, f @ q.T, rtol=1e-8, atol=1e-10)


def test_direct_model_rows_differ_from_columns() -> None:
    m, b = model64(conservative=False), batch64([cluster(0)])
    jac = force_jacobian(m, b, 0, mode="autograd")
    torch.testing.assert_close(jac, force_jacobian(m, b, 0, mode="fd"), rtol=1e-5, atol=1e-7)
    assert (jac - jac.T).abs().max() > 1e-3 * jac.abs().max()
    with pytest.raises(ValueError, match="conservative"):
        hessian_rows(m, b, torch.tensor([[0, 0, 0]]), mode="fd_columns")


def test_emt_fd_hessian_matches_ase_vibrations(tmp_path) -> None:
    from ase.calculators.emt import EMT
    from ase.vibrations import Vibrations

    atoms = cluster(3)
    atoms.calc = EMT()
    vib = Vibrations(atoms, delta=0.01, name=str(tmp_path / "vib"), nfree=2)
    vib.run()
    h_ase = vib.get_vibrations().get_hessian_2d()
    jac = ASECalculatorTeacher(fd_step=0.01).jacobian(atoms)
    ours = -(jac + jac.T) / 2
    np.testing.assert_allclose(ours, h_ase, rtol=1e-6, atol=1e-6 * np.abs(h_ase).max())


def test_teacher_rows_batched_equal_single_structure_calls() -> None:
    a, c = cluster(0), cluster(1)
    t = ASECalculatorTeacher()
    both = t.columns([a, c], [[0, 5], [38]])
    np.testing.assert_allclose(both[1][0], t.columns([c], [[38]])[0][0], rtol=1e-9, atol=1e-9)
    rows = t.hessian_rows(AtomsBatch.from_atoms([a, c], dtype=torch.float64), torch.tensor([[1, 12, 2]]))
    np.testing.assert_allclose(rows[0].numpy().reshape(-1), both[1][0], rtol=1e-9, atol=1e-9)


def test_sample_rows_uniform_without_replacement_seeded_and_free_only() -> None:
    a = cluster(0)
    from ase.constraints import FixAtoms

    a.set_constraint(FixAtoms(indices=list(range(12))))  # only atom 12 is free: 3 coordinates
    b = AtomsBatch.from_atoms([a, cluster(1)])
    r1 = sample_rows(b, 3, torch.Generator().manual_seed(0))
    r2 = sample_rows(b, 3, torch.Generator().manual_seed(0))
    assert torch.equal(r1, r2)
    first = r1[r1[:, 0] == 0]
    assert set(first[:, 1].tolist()) == {12} and sorted(first[:, 2].tolist()) == [0, 1, 2]
    with pytest.raises(ValueError, match="3·N_free"):
        sample_rows(b, 4, torch.Generator().manual_seed(0))
    allowed = {b.ids[1]: torch.tensor([4, 7])}
    r = sample_rows(b, 2, torch.Generator().manual_seed(1), allowed=allowed)
    flat = (3 * r[r[:, 0] == 1, 1] + r[r[:, 0] == 1, 2]).sort().values
    assert flat.tolist() == [4, 7]


def test_hard_mining_prefers_high_loss_rows() -> None:
    b = AtomsBatch.from_atoms([cluster(0)], ids=["x"])
    loss = torch.zeros(39, dtype=torch.float64)
    loss[:10] = 0.0
    loss[10] = 5.0
    loss[11:] = float("nan")
    loss[11:20] = 0.0
    picks = [
        int(3 * r[0, 1] + r[0, 2])
        for r in (
            sample_rows(b, 1, torch.Generator().manual_seed(s), strategy="hard", running_loss={"x": loss})
            for s in range(20)
        )
    ]
    # unvisited rows score 1.1 x max = 5.5 > 5.0; visited zeros are practically never drawn
    assert all(p == 10 or p >= 20 for p in picks)


def test_rows_out_of_range_raise() -> None:
    m, b = model64(), batch64([cluster(0)])
    for bad in ([[1, 0, 0]], [[0, 13, 0]], [[0, 0, 3]], [[0, -1, 0]]):
        with pytest.raises(ValueError, match=r"out of range|component"):
            hessian_rows(m, b, torch.tensor(bad))
    with pytest.raises(ValueError, match="shape"):
        hessian_rows(m, b, torch.tensor([0, 0, 0]))
