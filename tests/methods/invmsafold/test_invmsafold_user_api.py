"""User-facing entry points of InvMSAFold: real-MSA letters, structure → sampler, safetensors weights,
the ESM-IF1 encoder path (with a tiny stand-in for fair-esm that the test builds) and the README."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.methods.invmsafold import (
    PROTEIN_ALPHABET,
    UNKNOWN_RESIDUES,
    ARPotts,
    DecoderConfig,
    ESMIF1Encoder,
    InvMSAFold,
    LatticeEncoder,
    LatticeWorld,
    PottsParams,
    PrecomputedEmbeddings,
    TrainConfig,
    decode,
    encode,
    read_a3m,
    sample_msa,
    train_invmsafold,
)

_README = Path(__file__).parents[3] / "src/iclr25/methods/invmsafold/README.md"


# --- unknown residues ---------------------------------------------------------------------------


def test_unknown_residues_map_to_gap_in_a3m(tmp_path) -> None:
    # query, a homologue with X and a lower-case insertion, one with every other IUPAC code
    (tmp_path / "m.a3m").write_text(">q\nACDEFG\n>h1\nAxCXD-F\n>h2\nBJOUZ.Y\n")
    rows = read_a3m(tmp_path / "m.a3m")
    assert rows == ["ACDEFG", "ACXD-F", "BJOUZY"]  # letters kept as written, insertions dropped
    tok = encode(rows, PROTEIN_ALPHABET)
    gap = PROTEIN_ALPHABET.index("-")
    want = [[PROTEIN_ALPHABET.index(c) if c in PROTEIN_ALPHABET else gap for c in r] for r in rows]
    assert tok.tolist() == want
    assert tok[1].tolist() == [1, 2, gap, 3, gap, 5]  # X at position 2 is a gap, like the real gap
    assert tok[2].tolist() == [gap] * 5 + [PROTEIN_ALPHABET.index("Y")]
    assert decode(tok[1:2], PROTEIN_ALPHABET) == ["AC-D-F"]
    assert set(UNKNOWN_RESIDUES) == set("BJOUXZ")


@pytest.mark.parametrize(("bad", "row", "pos"), [("AC3E", 1, 2), ("ACD*", 1, 3), ("A#DE", 1, 1)])
def test_invalid_characters_name_character_and_row(bad: str, row: int, pos: int) -> None:
    with pytest.raises(ValueError, match=rf"row {row}, position {pos}: character '{re.escape(bad[pos])}'"):
        encode(["ACDE", bad], PROTEIN_ALPHABET)


def test_unknown_residue_errors_without_gap_state_and_lowercase_hint() -> None:
    with pytest.raises(ValueError, match=r"row 0, position 1: character 'X'.*lacks"):
        encode(["AXDE"], "ACDEFGHIKLMNPQRSTVWY")  # the lattice alphabet has no gap
    with pytest.raises(ValueError, match=r"character 'c'.*read_a3m"):
        encode(["AcDE"], PROTEIN_ALPHABET)
    with pytest.raises(ValueError, match=r"character '\.'.*read_a3m"):
        encode(["A.DE"], PROTEIN_ALPHABET)


# --- a tiny trained model -----------------------------------------------------------------------

_CFG = DecoderConfig(
    embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=3, q=20, dropout=0.0
)
_TC = TrainConfig(steps=8, lr=3e-3, batch_structures=2, msa_rows=8)


def _trained() -> tuple[InvMSAFold, LatticeWorld]:
    world = LatticeWorld((3, 3))
    msas, _ = sample_msa(
        world, [0, 1], n_seqs=16, beta=5.0, n_chains=8, burn_in_sweeps=2, thin_sweeps=1,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    torch.manual_seed(0)
    model = InvMSAFold(_CFG, LatticeEncoder(max_len=9, coord_dim=2, d_model=8, n_layers=1, n_heads=2))
    train_invmsafold(
        model, world.structures[:2], list(msas), variant="ar", config=_TC,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    return model, world


def test_from_structure_gives_samplers_end_to_end() -> None:
    model, world = _trained()
    s = world.structures[1]
    ar = model.from_structure(s.coords, variant="ar")  # plain lattice coordinates
    pw = model.from_structure(s, variant="pw")
    assert isinstance(ar, ARPotts) and isinstance(pw, PottsParams)
    assert ar.alphabet == pw.alphabet == model.alphabet and ar.length == pw.length == 9
    # coordinates and the structure object give the same model
    assert torch.equal(ar.V, pw.V) and torch.equal(ar.h, pw.h)
    for sampler in (ar, pw):
        a, b = sampler.sample(50, seed=3), sampler.sample(50, seed=3)
        assert a.shape == (50, 9) and torch.equal(a, b)
        assert not torch.equal(a, sampler.sample(50, seed=4))
    # the string API is the sampler plus decode
    assert model.sample(s, 6, variant="ar", seed=1) == decode(ar.sample(6, seed=1), ar.alphabet)
    assert model.sample(s, 6, variant="pw", seed=1) == decode(pw.sample(6, seed=1), pw.alphabet)
    assert bool(ar.log_prob(ar.sample(20, seed=0)).le(0).all())
    with pytest.raises(ValueError, match="variant"):
        model.from_structure(s, variant="gibbs")
    with pytest.raises(ValueError, match="integer"):
        model.from_structure(s.coords.astype(float))


# --- safetensors --------------------------------------------------------------------------------


def test_safetensors_round_trip_identical_outputs_and_samples(tmp_path) -> None:
    model, world = _trained()
    model.save_pretrained(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]
    back = InvMSAFold.from_pretrained(tmp_path / "m")
    assert not back.training
    emb = torch.randn(2, 9, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[False] * 9, [False] * 7 + [True] * 2])
    model.eval()
    with torch.no_grad():
        for x, y in zip(model(emb, mask), back(emb, mask), strict=True):
            assert torch.equal(x, y)
    s = world.structures[0]
    for variant in ("ar", "pw"):
        want = model.from_structure(s, variant=variant).sample(40, seed=7)
        assert torch.equal(back.from_structure(s, variant=variant).sample(40, seed=7), want)


def test_legacy_state_dict_directory_still_loads(tmp_path) -> None:
    model, world = _trained()
    model.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").unlink()
    torch.save(model.state_dict(), tmp_path / "m" / "model.pt")
    back = InvMSAFold.from_pretrained(tmp_path / "m")
    assert back.sample(world.structures[1], 5, seed=2) == model.sample(world.structures[1], 5, seed=2)
    (tmp_path / "m" / "model.pt").unlink()
    with pytest.raises(FileNotFoundError, match=r"model\.safetensors"):
        InvMSAFold.from_pretrained(tmp_path / "m")


def test_missing_safetensors_gives_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"pip install 'iclr25\[invmsafold\]'"):
        InvMSAFold(_CFG).save_pretrained(tmp_path / "m")


def test_precomputed_safetensors_embeddings(tmp_path) -> None:
    from safetensors.torch import save_file

    save_file({"d1": torch.randn(5, 8), "d2": torch.randn(7, 8)}, str(tmp_path / "emb.safetensors"))
    enc = PrecomputedEmbeddings(tmp_path / "emb.safetensors")
    assert enc.ids() == ["d1", "d2"] and enc.embed("d2").shape == (7, 8)


# --- ESM-IF1 through a stand-in fair-esm ----------------------------------------------------------

_PRETRAINED = """
import types
import torch


class TinyIF(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.args = types.SimpleNamespace(encoder_embed_dim=width)
        self.proj = torch.nn.Linear(9, width)


def load_model_and_alphabet_local(path):
    data = torch.load(path)  # like fair-esm: default weights_only, a Namespace inside
    model = TinyIF(data["args"].encoder_embed_dim)
    model.load_state_dict(data["model"])
    return model, "alphabet"
"""

_UTIL = """
import numpy as np
import torch


def load_coords(path, chain):
    with np.load(path) as z:
        coords = z[chain]
    return coords, "X" * len(coords)


def get_encoder_output(model, alphabet, coords):
    x = torch.as_tensor(coords, dtype=torch.float32).reshape(len(coords), 9)
    return torch.tanh(model.proj(x))
"""


@pytest.fixture
def esm_standin(tmp_path, monkeypatch):
    """A fake ``esm`` package (checkpoint loader, coordinate reader, encoder output) on sys.path."""
    root = tmp_path / "site"
    (root / "esm" / "inverse_folding").mkdir(parents=True)
    (root / "esm" / "__init__.py").write_text("")
    (root / "esm" / "pretrained.py").write_text(_PRETRAINED)
    (root / "esm" / "inverse_folding" / "__init__.py").write_text("")
    (root / "esm" / "inverse_folding" / "util.py").write_text(_UTIL)
    for name in [m for m in sys.modules if m == "esm" or m.startswith("esm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    torch.manual_seed(0)
    lin = torch.nn.Linear(9, 8)
    state = {f"proj.{k}": v for k, v in lin.state_dict().items()}
    args = argparse.Namespace(encoder_embed_dim=8)
    torch.save({"args": args, "model": state}, tmp_path / "esm_if1_gvp4_t16_142M_UR50.pt")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "dom.npz", A=rng.normal(size=(6, 3, 3)), B=rng.normal(size=(4, 3, 3)))
    yield tmp_path
    for name in [m for m in list(sys.modules) if m == "esm" or m.startswith("esm.")]:
        sys.modules.pop(name)


def test_esm_if1_encoder_trains_samples_and_precomputes(esm_standin) -> None:
    d = esm_standin
    enc = ESMIF1Encoder(d / "esm_if1_gvp4_t16_142M_UR50.pt")
    assert enc.embed_dim == 8
    dom_a, dom_b = (d / "dom.npz", "A"), (d / "dom.npz", "B")
    assert enc.embed(dom_a).shape == (6, 8) and enc.embed(dom_b).shape == (4, 8)
    with np.load(d / "dom.npz") as z:  # backbone coordinates directly
        assert torch.equal(enc.embed(z["A"]), enc.embed(dom_a))
    cfg = _CFG.replace(q=21)
    torch.manual_seed(0)
    model = InvMSAFold(cfg, enc)
    assert model.alphabet == PROTEIN_ALPHABET and not any(
        n.startswith("encoder") for n, _ in model.named_parameters()
    )
    msas = [
        encode(["ACDEFX", "ACD-FG", "SCDEFG"], PROTEIN_ALPHABET),
        encode(["MKLV", "MKIV"], PROTEIN_ALPHABET),
    ]
    tc = TrainConfig(steps=4, lr=3e-3, batch_structures=2, msa_rows=4)
    train_invmsafold(
        model, [dom_a, dom_b], msas, variant="pw", config=tc, generator=torch.Generator().manual_seed(0)
    )
    seqs = model.sample(dom_a, 5, variant="ar", seed=0)
    assert len(seqs) == 5 and all(len(x) == 6 for x in seqs)
    # precomputing once gives the same Potts model as embedding on the fly
    torch.save({"dA": enc.embed(dom_a)}, d / "emb.pt")
    model.save_pretrained(d / "m")
    pre = InvMSAFold.from_pretrained(d / "m", embeddings=d / "emb.pt")
    live = InvMSAFold.from_pretrained(d / "m", encoder=enc)
    assert torch.equal(pre.potts("dA").V, live.potts(dom_a).V)
    assert live.sample(dom_a, 5, variant="ar", seed=0) == seqs
    with pytest.raises(FileNotFoundError, match="structure file"):
        enc.embed((d / "none.pdb", "A"))
    with pytest.raises(ValueError, match=r"\[L, 3, 3\]"):
        enc.embed(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="either"):
        InvMSAFold.from_pretrained(d / "m", encoder=enc, embeddings=d / "emb.pt")


def test_esm_if1_encoder_errors_without_fair_esm(tmp_path, monkeypatch) -> None:
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        ESMIF1Encoder(tmp_path / "missing.pt")
    (tmp_path / "esm_if1_gvp4_t16_142M_UR50.pt").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "esm", None)  # as if fair-esm were not installed
    with pytest.raises(ImportError, match=r"fair-esm.*PrecomputedEmbeddings"):
        ESMIF1Encoder(tmp_path / "esm_if1_gvp4_t16_142M_UR50.pt")


# --- README -------------------------------------------------------------------------------------


def test_readme_paper_scale_block_compiles() -> None:
    """The ESM-IF1 block needs fair-esm and a local checkpoint, so it is only compiled (the
    contract suite runs the other Usage blocks, in order, in one process)."""
    usage = _README.read_text().split("## Usage", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python paper-scale\n(.*?)```", usage, flags=re.S)
    assert len(blocks) == 1 and "ESMIF1Encoder(" in blocks[0]
    compile(blocks[0], "README", "exec")
