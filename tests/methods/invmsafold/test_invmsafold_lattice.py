"""The lattice-protein world: enumeration counts, MJ table, exact P_nat, incremental energies, MSAs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.methods.invmsafold import (
    LATTICE_ALPHABET,
    MJ_TABLE,
    LatticeStructure,
    LatticeWorld,
    contact_energy,
    count_hamiltonian_paths_dp,
    enumerate_compact_walks,
    mj_matrix,
    sample_msa,
)


def test_walk_counts_match_independent_dp() -> None:
    assert len(enumerate_compact_walks((3, 3))) == count_hamiltonian_paths_dp((3, 3)) == 40
    assert len(enumerate_compact_walks((4, 4))) == count_hamiltonian_paths_dp((4, 4)) == 552


def test_5x5_walks_and_distinct_contact_maps() -> None:
    walks = enumerate_compact_walks((5, 5))
    assert walks.shape == (8648, 25)
    # every walk visits each site once and moves by unit steps
    assert (np.sort(walks, 1) == np.arange(25)).all()
    coords = np.array(list(np.ndindex(5, 5)))
    steps = np.abs(np.diff(coords[walks], axis=1)).sum(-1)
    assert (steps == 1).all()
    assert len(LatticeWorld((5, 5)).structures) == 1081


def test_mj_table_symmetric_and_spot_values() -> None:
    assert np.allclose(MJ_TABLE, MJ_TABLE.T)
    a = LATTICE_ALPHABET.index
    assert MJ_TABLE[a("C"), a("C")] == -5.44
    assert MJ_TABLE[a("F"), a("L")] == -7.28
    assert MJ_TABLE[a("K"), a("K")] == -0.12
    assert MJ_TABLE[a("P"), a("C")] == -3.07
    with pytest.raises(ValueError, match="permutation"):
        mj_matrix("ABC")
    r = contact_energy("mj_residual", 2.0)
    assert np.allclose(r, r.T) and np.allclose(r.mean(0), 0)


def test_p_nat_sums_to_one_and_incremental_energy() -> None:
    w = LatticeWorld((4, 4), temperature=0.7)
    g = torch.Generator().manual_seed(0)
    s = torch.randint(0, 20, (5, 16), generator=g)
    total = sum(w.p_nat(s, k) for k in range(len(w.structures)))
    assert torch.allclose(total, torch.ones(5), atol=1e-4)
    # energy by the definition for one structure
    st = w.structures[3]
    direct = [sum(MJ_TABLE[row[i], row[j]] for i, j in st.contacts.tolist()) for row in s.tolist()]
    assert np.allclose(w.energies(s)[:, 3].numpy(), direct, atol=1e-4)
    new = torch.randint(0, 20, (5,), generator=g)
    t = s.clone()
    t[:, 7] = new
    assert torch.allclose(w.energies(s) + w.delta_energies(s, 7, new), w.energies(t), atol=1e-4)


def test_structure_without_contacts_and_bad_sequences_raise() -> None:
    with pytest.raises(ValueError, match="no contacts"):
        LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [0, 2]]))
    w = LatticeWorld((3, 3))
    with pytest.raises(ValueError, match=r"\[N, 9\]"):
        w.energies(torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="lie in"):
        w.energies(torch.full((1, 9), 20))


def test_msa_sampling_deterministic_and_selected() -> None:
    w = LatticeWorld((4, 4), energy=contact_energy("mj_residual", 6.0))
    kw = dict(n_seqs=40, beta=10.0, gamma=2.0, n_chains=20, burn_in_sweeps=2, thin_sweeps=1, warm_sweeps=10)
    a, la = sample_msa(w, [0, 5], generator=torch.Generator().manual_seed(0), **kw)
    b, lb = sample_msa(w, [0, 5], generator=torch.Generator().manual_seed(0), **kw)
    assert torch.equal(a, b) and torch.equal(la, lb)
    assert a.shape == (2, 40, 16)
    assert torch.allclose(la[1], w.log_p_nat(a[1], 5), atol=1e-4)
    rand = torch.randint(0, 20, (40, 16), generator=torch.Generator().manual_seed(1))
    assert float(la[0].exp().mean()) > 0.5 > float(w.p_nat(rand, 0).mean())
