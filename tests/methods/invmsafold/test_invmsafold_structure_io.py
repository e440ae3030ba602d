"""MSA files (a3m, aligned FASTA/A2M) to tokens, and Cα contact maps from PDB files, on tiny stand-ins."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.methods.invmsafold import (
    PROTEIN_ALPHABET,
    ca_contact_map,
    decode,
    load_msa,
    read_ca_coords,
)

GAP = PROTEIN_ALPHABET.index("-")


def test_a3m_and_a2m_give_the_same_tokens(tmp_path) -> None:
    # the same alignment: a3m (insertions only where they occur) and A2M ('.' pads insert columns)
    (tmp_path / "d.a3m").write_text(">query\nACDEF\n>h1 some description\nAC-kEX\n>h2\nAqqCDE-\n")
    (tmp_path / "d.a2m").write_text(">query\nAC..DEF\n>h1\nAC.-kEX\n>h2\nAqqCDE-\n")
    a3m = load_msa(tmp_path / "d.a3m")
    assert a3m.dtype == torch.long and a3m.shape == (3, 5)
    assert decode(a3m, PROTEIN_ALPHABET) == ["ACDEF", "AC-E-", "ACDE-"]  # X -> gap, insertions out
    assert torch.equal(load_msa(tmp_path / "d.a2m"), a3m)
    assert torch.equal(load_msa(tmp_path / "d.a3m", length=5), a3m)
    (tmp_path / "plain.fasta").write_text(">q\nAC-D\n>h\nGG\nHH\n")  # multi-line rows
    assert decode(load_msa(tmp_path / "plain.fasta"), PROTEIN_ALPHABET) == ["AC-D", "GGHH"]
    assert load_msa(tmp_path / "plain.fasta")[0, 2].item() == GAP


@pytest.mark.parametrize(
    ("name", "text", "kw", "message"),
    [
        ("u.fasta", ">q\nACD\n>h\nAC\n", {}, "aligned FASTA row 1 has 2 columns, row 0 has 3"),
        ("b.a3m", ">q\nACD\n>h\nA3D\n", {}, r"b\.a3m: row 1, position 1: character '3'"),
        ("l.a3m", ">q\nACD\n", {"length": 4}, "3 match columns, the structure 4"),
        ("x.sto", ">q\nACD\n", {}, "unknown MSA suffix '.sto'"),
        ("x.sto", ">q\nACD\n", {"fmt": "stockholm"}, "fmt must be 'a3m' or 'fasta'"),
        ("e.a3m", "", {}, "no sequences"),
        ("i.a3m", ">q\nacd\n", {}, "no match column"),
        ("n.fasta", "ACD\n", {}, "before the first '>' header"),
    ],
)
def test_msa_errors_name_file_and_problem(tmp_path, name, text, kw, message) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        load_msa(tmp_path / name, **kw)


def test_missing_msa_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.a3m"):
        load_msa(tmp_path / "missing.a3m")


def _atom(
    serial: int, name: str, res: str, chain: str, num: int, xyz, alt: str = " ", icode: str = " "
) -> str:
    x, y, z = xyz
    return (
        f"ATOM  {serial:5d} {name:<4}{alt}{res:>3} {chain}{num:4d}{icode}   "
        f"{x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00           {name[0]}"
    )


def test_ca_coords_and_contacts_from_pdb(tmp_path) -> None:
    lines = [
        "HEADER    TOY",
        _atom(1, "N", "MET", "A", 1, (0.5, 0, 0)),
        _atom(2, "CA", "MET", "A", 1, (0, 0, 0)),
        _atom(3, "CA", "GLY", "A", 2, (3.8, 0, 0), alt="A"),
        _atom(4, "CA", "GLY", "A", 2, (9.9, 9, 9), alt="B"),  # second alternate location: skipped
        _atom(5, "CA", "MSE", "A", 3, (7.6, 0, 0)),  # non-standard residue: 'X'
        _atom(6, "CA", "LYS", "A", 4, (30.0, 0, 0)),
        _atom(7, "CA", "ALA", "B", 1, (1, 1, 1)),  # another chain
        "HETATM    8  O   HOH A 101      1.000   1.000   1.000  1.00  0.00           O",
        "ENDMDL",
        _atom(9, "CA", "ALA", "A", 5, (0, 0, 0)),  # second model: not read
    ]
    (tmp_path / "toy.pdb").write_text("\n".join(lines) + "\n")
    xyz, seq = read_ca_coords(tmp_path / "toy.pdb")
    assert seq == "MGXK" and xyz.shape == (4, 3)
    np.testing.assert_allclose(xyz[1], [3.8, 0, 0])
    cmap = ca_contact_map(xyz)
    want = np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(cmap, want)
    assert ca_contact_map(xyz, min_separation=2).sum() == 2  # only the (0, 2) pair and its mirror
    assert read_ca_coords(tmp_path / "toy.pdb", chain="B")[1] == "A"
    with pytest.raises(ValueError, match="no Cα atom in chain 'C'"):
        read_ca_coords(tmp_path / "toy.pdb", chain="C")
    with pytest.raises(FileNotFoundError, match=r"none\.pdb"):
        read_ca_coords(tmp_path / "none.pdb")
    (tmp_path / "bad.pdb").write_text(_atom(1, "CA", "ALA", "A", 1, (0, 0, 0))[:32] + "xx\n")
    with pytest.raises(ValueError, match=r"bad\.pdb:1: Cα coordinates do not parse"):
        read_ca_coords(tmp_path / "bad.pdb")
    with pytest.raises(ValueError, match=r"\[L, 3\]"):
        ca_contact_map(np.zeros((3, 2)))
