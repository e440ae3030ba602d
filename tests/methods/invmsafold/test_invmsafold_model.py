"""The network, encoders, data I/O, metrics, training and baseline of InvMSAFold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.methods.invmsafold import (
    IFAR,
    LATTICE_ALPHABET,
    ClaimConfig,
    DecoderConfig,
    InvMSAFold,
    LatticeEncoder,
    LatticeWorld,
    PrecomputedEmbeddings,
    StructureEncoder,
    TrainConfig,
    covariance_pearson,
    decode,
    encode,
    hamming_to,
    mean_pairwise_hamming,
    pca_kl,
    read_a3m,
    read_fasta,
    train_ifar,
    train_invmsafold,
    write_fasta,
)

_TINY = DecoderConfig(
    embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=3, q=20, dropout=0.0
)


def _world() -> LatticeWorld:
    return LatticeWorld((3, 3))


def _model(seed: int = 0, **kw) -> InvMSAFold:
    torch.manual_seed(seed)
    enc = LatticeEncoder(max_len=9, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
    return InvMSAFold(_TINY, enc, **kw)


def test_forward_padding_outputs_zero_and_valid_part_unchanged() -> None:
    m = _model().eval()
    emb = torch.randn(2, 6, 8)
    mask = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        V, h = m(emb, mask)
        V1, h1 = m(emb[1:, :4], None)
    assert V.shape == (2, 3, 6, 20) and h.shape == (2, 6, 20)
    assert float(V[1, :, 4:].abs().max()) == 0.0 and float(h[1, 4:].abs().max()) == 0.0
    assert torch.allclose(V1, V[1:, :, :4], atol=1e-5) and torch.allclose(h1, h[1:, :4], atol=1e-5)


def test_forward_errors() -> None:
    m = _model()
    with pytest.raises(ValueError, match="non-finite"):
        m(torch.full((1, 3, 8), float("nan")))
    with pytest.raises(ValueError, match=r"\[B, L, 8\]"):
        m(torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match="rank"):
        DecoderConfig(rank=0)
    with pytest.raises(ValueError, match="n_heads"):
        DecoderConfig(d_model=10, n_heads=3)


def test_independent_variant_has_no_couplings() -> None:
    s = _world().structures[0]
    p = _model(independent=True).potts(s)
    J, _ = p.to_dense()
    assert float(J.abs().max()) == 0.0


def test_training_reduces_loss_and_is_deterministic() -> None:
    w = _world()
    structs = list(w.structures[:2])
    msas = [torch.randint(0, 20, (30, 9), generator=torch.Generator().manual_seed(i)) for i in range(2)]
    cfg = TrainConfig(steps=25, lr=1e-2, batch_structures=2, msa_rows=16)
    runs = []
    for _ in range(2):
        m = _model(seed=1)
        losses = train_invmsafold(
            m, structs, msas, variant="pw", config=cfg, generator=torch.Generator().manual_seed(0)
        )
        runs.append((losses, m.sample(structs[0], 5, seed=2)))
    assert runs[0] == runs[1]
    assert np.mean(runs[0][0][-5:]) < np.mean(runs[0][0][:5])
    with pytest.raises(ValueError, match="length"):
        bad = [torch.zeros(3, 4, dtype=torch.long)] * 2
        train_invmsafold(_model(), structs, bad, variant="ar", config=cfg, generator=torch.Generator())


def test_training_reports_progress_every_five_percent() -> None:
    w = _world()
    s = w.structures[0]
    msa = torch.randint(0, 20, (8, 9), generator=torch.Generator().manual_seed(0))
    cfg = TrainConfig(steps=40, lr=1e-3, batch_structures=1, msa_rows=4)
    calls: list[tuple[str, int, int]] = []
    record = lambda *a: calls.append(a)  # noqa: E731
    train_invmsafold(
        _model(), [s], [msa], variant="ar", config=cfg, generator=torch.Generator(), progress=record
    )
    assert calls == [("InvMSAFold-AR training", i, 40) for i in range(0, 40, 2)]
    calls.clear()
    torch.manual_seed(0)
    enc = LatticeEncoder(max_len=9, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
    ifar = IFAR(enc, q=20, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16)
    train_ifar(ifar, [s], [msa[:1]], config=cfg, generator=torch.Generator(), progress=record)
    assert calls == [("IF-AR training", i, 40) for i in range(0, 40, 2)]


def test_sample_variants_and_bad_variant() -> None:
    m = _model()
    s = _world().structures[1]
    ar = m.sample(s, 4, variant="ar", seed=0)
    pw = m.sample(s, 4, variant="pw", seed=0, gibbs_sweeps=3, gibbs_burn_in=1)
    assert len(ar) == len(pw) == 4 and all(len(x) == 9 and set(x) <= set(LATTICE_ALPHABET) for x in ar + pw)
    with pytest.raises(ValueError, match="variant"):
        m.sample(s, 2, variant="xx")


def test_save_and_load_pretrained(tmp_path) -> None:
    m = _model()
    s = _world().structures[2]
    m.save_pretrained(tmp_path / "model")
    back = InvMSAFold.from_pretrained(tmp_path / "model")
    assert back.sample(s, 6, seed=4) == m.sample(s, 6, seed=4)


def test_precomputed_embeddings_npz_and_pt(tmp_path) -> None:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "emb.npz", d1=rng.normal(size=(5, 8)).astype(np.float32), d2=rng.normal(size=(7, 8)))
    torch.save({"d1": torch.randn(5, 8)}, tmp_path / "emb.pt")
    for path in (tmp_path / "emb.npz", tmp_path / "emb.pt"):
        enc = PrecomputedEmbeddings(path)
        assert isinstance(enc, StructureEncoder) and enc.embed_dim == 8
        torch.manual_seed(0)
        model = InvMSAFold(_TINY, enc)
        msa = torch.randint(0, 20, (10, 5), generator=torch.Generator().manual_seed(0))
        tc = TrainConfig(steps=2, lr=1e-3, batch_structures=1, msa_rows=4)
        train_invmsafold(
            model, ["d1"], [msa], variant="ar", config=tc, generator=torch.Generator().manual_seed(0)
        )
        assert len(model.sample("d1", 3)[0]) == 5
        with pytest.raises(KeyError):
            enc.embed("missing")
    # a saved model reloads with its embedding file as the frozen encoder
    model.save_pretrained(tmp_path / "m")
    back = InvMSAFold.from_pretrained(tmp_path / "m", embeddings=tmp_path / "emb.pt")
    assert back.sample("d1", 3, seed=1) == model.sample("d1", 3, seed=1)
    np.savez(tmp_path / "bad.npz", d1=np.full((3, 8), np.inf))
    with pytest.raises(ValueError, match="non-finite"):
        PrecomputedEmbeddings(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError):
        PrecomputedEmbeddings(tmp_path / "none.pt")
    with pytest.raises(ValueError, match="width"):
        InvMSAFold(_TINY.replace(embed_dim=4), PrecomputedEmbeddings(tmp_path / "emb.pt"))


def test_encode_decode_fasta_a3m(tmp_path) -> None:
    t = encode(["ACDY", "YYYY"], LATTICE_ALPHABET)
    assert decode(t, LATTICE_ALPHABET) == ["ACDY", "YYYY"]
    with pytest.raises(ValueError, match="outside the alphabet"):
        encode(["ACBX"], LATTICE_ALPHABET)
    with pytest.raises(ValueError, match="expected 5"):
        encode(["ACDY"], LATTICE_ALPHABET, length=5)
    write_fasta(tmp_path / "s.fasta", ["AC", "DE"])
    assert read_fasta(tmp_path / "s.fasta") == [("sample_0", "AC"), ("sample_1", "DE")]
    (tmp_path / "x.a3m").write_text(">q\nACDE\n>h1\nA-DdeE\n>h2\nAC..DE\n")
    assert read_a3m(tmp_path / "x.a3m") == ["ACDE", "A-DE", "ACDE"]


def test_metrics_independent_sample_and_pca_kl_self() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, (2000, 6)), rng.integers(0, 4, (2000, 6))
    assert abs(covariance_pearson(a, b, 4)) < 0.1
    assert pca_kl(a, a, 4) == pytest.approx(0.0, abs=1e-12)
    assert pca_kl(np.zeros((50, 6), dtype=int), a, 4) > 0.5
    assert hamming_to(np.array([[0, 1, 2]]), np.array([0, 1, 0])) == pytest.approx(1 / 3)
    assert mean_pairwise_hamming(np.array([[0, 0], [0, 0]])) == 0.0


def test_ifar_trains_samples_and_counts() -> None:
    w = _world()
    torch.manual_seed(0)
    enc = LatticeEncoder(max_len=9, coord_dim=2, d_model=8, n_layers=1, n_heads=2)
    m = IFAR(enc, q=20, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16)
    native = torch.arange(9)[None] % 20
    tc = TrainConfig(steps=40, lr=2e-2, batch_structures=1, msa_rows=8)
    losses = train_ifar(m, [w.structures[0]], [native], config=tc, generator=torch.Generator().manual_seed(0))
    assert losses[-1] < losses[0]
    s = m.sample(w.structures[0], 200, seed=0)
    with torch.no_grad():
        lp = m.log_prob(w.structures[0], s)
        full = m.log_prob(w.structures[0], native)
    assert torch.isfinite(lp).all()
    # the trained native is at least as likely as the average cached sample
    assert float(full) > float(lp.mean()) - 1e-3
    assert m.macs_per_sequence(9) > 10 * _model().potts(w.structures[0]).as_ar().macs_per_sequence()


def test_claim_config_validation() -> None:
    with pytest.raises(ValueError, match="q must be 20"):
        ClaimConfig(decoder=_TINY.replace(q=21))
