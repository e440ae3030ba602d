"""SPICE reader: unit conversion and field checks on a tiny stand-in with the SPICE 2 layout
(a mapping here; an HDF5 file where h5py is installed)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from iclr25.methods.hessian_distill import SPICE_FIELDS, LabelledStructures, SpiceHDF5

pytestmark = pytest.mark.usefixtures("one_thread")

HARTREE_EV, BOHR_A = 27.211386024367243, 0.5291772105638411  # CODATA 2014, as in ase.units


def _molecules() -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    water = {
        "atomic_numbers": np.array([8, 1, 1], dtype=np.int16),
        "conformations": rng.normal(size=(3, 3, 3)).astype(np.float32) * 2,  # bohr
        "dft_total_energy": np.array([-76.4, -76.39, -76.41]),  # hartree
        "dft_total_gradient": rng.normal(size=(3, 3, 3)).astype(np.float32) * 0.01,  # hartree/bohr
        "smiles": np.array([b"[H:2][O:1][H:3]"]),
    }
    iodo = {
        "atomic_numbers": np.array([6, 53, 1, 1, 1], dtype=np.int16),
        "conformations": rng.normal(size=(2, 5, 3)) * 3,
        "dft_total_energy": np.array([-7155.0, -7154.9]),
        "dft_total_gradient": rng.normal(size=(2, 5, 3)) * 0.02,
    }
    return {"[H:2][O:1][H:3]": water, "[C:1]([I:2])([H:3])([H:4])[H:5]": iodo}


def test_units_are_converted_to_angstrom_ev(tmp_path: Path) -> None:
    mols = _molecules()
    ds = SpiceHDF5(mols)
    assert len(ds) == 5
    a = ds[1]  # water, conformation 1
    w = mols["[H:2][O:1][H:3]"]
    assert a.numbers.tolist() == [8, 1, 1] and a.info == {"spice_id": "[H:2][O:1][H:3]", "conformation": 1}
    assert np.allclose(a.positions, w["conformations"][1] * BOHR_A)
    assert a.get_potential_energy() == pytest.approx(-76.39 * HARTREE_EV)
    forces = -w["dft_total_gradient"][1] * HARTREE_EV / BOHR_A  # minus the gradient
    assert np.allclose(a.get_forces(), forces)
    labelled = LabelledStructures.from_atoms(ds.atoms())
    assert len(labelled) == 5 and labelled.forces.shape == (3 * 3 + 2 * 5, 3)
    assert len(pickle.loads(pickle.dumps(ds))) == 5


def test_subsets_and_bad_layouts_are_named() -> None:
    mols = _molecules()
    assert [n for n, _ in SpiceHDF5(mols, elements=(1, 8)).index] == ["[H:2][O:1][H:3]"] * 3
    assert len(SpiceHDF5(mols, where=lambda name, z: 53 in z)) == 2  # the iodine subset
    assert SpiceHDF5(mols, max_conformations=1).index == [
        ("[H:2][O:1][H:3]", 0),
        ("[C:1]([I:2])([H:3])([H:4])[H:5]", 0),
    ]
    with pytest.raises(ValueError, match="'benzene' is not in"):
        SpiceHDF5(mols, molecules=["benzene"])
    del mols["[H:2][O:1][H:3]"]["dft_total_gradient"]
    with pytest.raises(ValueError, match=r"lacks field.*dft_total_gradient"):
        SpiceHDF5(mols)
    mols = _molecules()
    mols["[H:2][O:1][H:3]"]["dft_total_energy"] = np.zeros(2)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        SpiceHDF5(mols)
    with pytest.raises(FileNotFoundError, match=r"nope\.hdf5"):
        SpiceHDF5("nope.hdf5")


def test_hdf5_file_round_trip(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "spice.hdf5"
    mols = _molecules()
    with h5py.File(path, "w") as f:
        for name, fields in mols.items():
            g = f.create_group(name)
            for key, value in fields.items():
                g.create_dataset(key, data=value)
    ds = SpiceHDF5(path)
    ref = SpiceHDF5(mols, molecules=sorted(mols))  # the file lists its groups by name
    assert len(ds) == len(ref) == 5 and set(SPICE_FIELDS) <= set(mols["[H:2][O:1][H:3]"])
    for i in range(len(ds)):
        assert ds[i].info == ref[i].info and np.allclose(ds[i].get_forces(), ref[i].get_forces())
    again = pickle.loads(pickle.dumps(ds))  # reopens the file on first read (DataLoader workers)
    assert again[4].get_potential_energy() == pytest.approx(ref[4].get_potential_energy())
    ds.close()
    (tmp_path / "bad.hdf5").write_text("not hdf5")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        SpiceHDF5(tmp_path / "bad.hdf5")


def test_missing_h5py_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("No module named 'h5py'")
        return real(name, *args, **kwargs)

    (tmp_path / "spice.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n")
    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(ImportError, match="needs h5py"):
        SpiceHDF5(tmp_path / "spice.hdf5")
