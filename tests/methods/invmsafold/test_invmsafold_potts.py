"""Exactness tests of the low-rank Potts model: PLL, energies, ‖J‖², AR normalisation, samplers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from iclr25.methods.invmsafold import (
    ARPotts,
    PottsParams,
    ar_frobenius_sq,
    conditional_logits,
    invmsafold_loss,
    lowrank_energy,
    pseudo_log_likelihood,
    pw_frobenius_sq,
    read_adabmdca_text,
    read_npz,
    write_adabmdca_text,
    write_npz,
)


def _random(K: int, L: int, q: int, seed: int = 0, B: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(B, K, L, q, generator=g, dtype=torch.float64)
    h = torch.randn(B, L, q, generator=g, dtype=torch.float64)
    return V, h


def _dense_energy(J: torch.Tensor, h: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    L = h.shape[0]
    out = torch.zeros(s.shape[0], dtype=h.dtype)
    for i in range(L):
        out += h[i, s[:, i]]
        for j in range(L):
            if i != j:
                out += 0.5 * J[i, j, s[:, i], s[:, j]]
    return out


def _all_seqs(L: int, q: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(q), repeat=L)))


def test_lowrank_energy_equals_dense() -> None:
    V, h = _random(3, 6, 5)
    p = PottsParams(h[0], V[0], "ABCDE")
    J, _ = p.to_dense()
    s = torch.randint(0, 5, (20, 6), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(p.energy(s), _dense_energy(J, h[0], s), atol=1e-10)


def test_lowrank_pll_equals_dense_and_brute_force_with_padding() -> None:
    K, L, q, pad = 3, 8, 5, 2
    V, h = _random(K, L, q, seed=3)
    V[:, :, L - pad :] = 0.0
    h[:, L - pad :] = 0.0
    s = torch.randint(0, q, (1, 7, L), generator=torch.Generator().manual_seed(4))
    pll = pseudo_log_likelihood(V, h, s)[0]  # [7, L]
    valid = L - pad
    # dense: conditional field from J on the unpadded block
    p = PottsParams(h[0, :valid], V[0, :, :valid], "ABCDE")
    J, hh = p.to_dense()
    for m in range(7):
        for i in range(valid):
            field = hh[i].clone()
            for j in range(valid):
                if j != i:
                    field += J[i, j][:, s[0, m, j]]
            dense = torch.log_softmax(field, -1)[s[0, m, i]]
            # brute force: ratio of joint energies over the q values of site i
            energies = []
            for a in range(q):
                t = s[0, m, :valid].clone()
                t[i] = a
                energies.append(p.energy(t[None])[0])
            brute = p.energy(s[0, m, :valid][None])[0] - torch.logsumexp(torch.stack(energies), 0)
            assert math.isclose(float(pll[m, i]), float(dense), abs_tol=1e-10)
            assert math.isclose(float(pll[m, i]), float(brute), abs_tol=1e-10)


def test_pll_against_brute_force_four_site_model() -> None:
    """Pseudo-likelihood of a 4-site Potts model against conditionals of the enumerated joint."""
    V, h = _random(2, 4, 3, seed=5)
    p = PottsParams(h[0], V[0], "ABC")
    allseq = _all_seqs(4, 3)
    logp = p.energy(allseq)
    logp = logp - torch.logsumexp(logp, 0)
    table = logp.view(3, 3, 3, 3)
    s = torch.tensor([[2, 0, 1, 1]])
    pll = p.pseudo_log_likelihood(s)[0]
    for i in range(4):
        idx = list(s[0].tolist())
        idx[i] = slice(None)
        cond = torch.log_softmax(table[tuple(idx)], 0)[s[0, i]]
        assert math.isclose(float(pll[i]), float(cond), abs_tol=1e-10)


def test_conditional_does_not_depend_on_own_state() -> None:
    V, h = _random(3, 5, 4, seed=6)
    s = torch.randint(0, 4, (1, 3, 5), generator=torch.Generator().manual_seed(0))
    a = conditional_logits(V, h, s)
    t = s.clone()
    t[..., 2] = (t[..., 2] + 1) % 4
    b = conditional_logits(V, h, t)
    assert torch.allclose(a[..., 2, :], b[..., 2, :], atol=1e-12)


def test_j_symmetric_zero_diagonal() -> None:
    V, h = _random(3, 5, 4, seed=7)
    J, _ = PottsParams(h[0], V[0], "ABCD").to_dense()
    assert torch.allclose(J, J.permute(1, 0, 3, 2))
    assert all(float(J[i, i].abs().max()) == 0.0 for i in range(5))


def test_frobenius_pw_and_ar_equal_dense() -> None:
    V, h = _random(3, 6, 5, seed=8, B=2)
    for b in range(2):
        J, _ = PottsParams(h[b], V[b], "ABCDE").to_dense()
        assert math.isclose(float(pw_frobenius_sq(V)[b]), float(J.pow(2).sum()), rel_tol=1e-10)
        ar = sum(float(J[i, j].pow(2).sum()) / max(i, 1) ** 2 for i in range(6) for j in range(i))
        assert math.isclose(float(ar_frobenius_sq(V)[b]), ar, rel_tol=1e-10)


def test_ar_normalised_and_lowrank_equals_dense() -> None:
    V, h = _random(2, 4, 3, seed=9)
    m = ARPotts(h[0], V[0], "ABC")
    allseq = _all_seqs(4, 3)
    lp = m.log_prob(allseq)
    assert math.isclose(float(torch.logsumexp(lp, 0)), 0.0, abs_tol=1e-10)
    assert torch.allclose(lp, m.dense_log_prob(allseq), atol=1e-10)


def test_ar_sampler_matches_exact_distribution_chi2() -> None:
    from scipy.stats import chisquare

    V, h = _random(2, 4, 3, seed=10)
    m = ARPotts(h[0].float(), V[0].float(), "ABC")
    allseq = _all_seqs(4, 3)
    p = m.log_prob(allseq).double().exp()
    p = p / p.sum()
    s = m.sample(100_000, seed=0)
    code = (s * torch.tensor([27, 9, 3, 1])).sum(1)
    counts = torch.bincount(code, minlength=81).double()
    assert chisquare(counts.numpy(), (p * 100_000).numpy()).pvalue > 1e-3


def test_gibbs_stationary_law_matches_boltzmann() -> None:
    V, h = _random(2, 3, 3, seed=11)
    p = PottsParams(h[0].float() * 0.5, V[0].float() * 0.5, "ABC")
    allseq = _all_seqs(3, 3)
    target = torch.softmax(p.energy(allseq).double(), 0)
    s = p.sample_gibbs(20_000, sweeps=10, burn_in=10, thin=1, chains=2000, seed=1)
    code = (s * torch.tensor([9, 3, 1])).sum(1)
    emp = torch.bincount(code, minlength=27).double() / len(s)
    assert 0.5 * float((emp - target).abs().sum()) < 0.02


@pytest.mark.parametrize(
    ("n", "chains", "sweeps", "burn_in", "thin", "total"),
    [(4, None, 30, 20, 1, 30), (6, 2, 3, 1, 2, 6), (5, 5, 2, 4, 1, 5)],
)
def test_gibbs_stops_after_the_last_read(monkeypatch, n, chains, sweeps, burn_in, thin, total) -> None:
    """``total = max(sweeps, burn_in + (reads - 1) thin + 1)`` sweeps and no more; the last read is
    the chains' final state."""
    from iclr25.methods.invmsafold import potts

    calls: list[torch.Tensor] = []
    draw = potts._categorical

    def counted(logits: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        out = draw(logits, g)
        calls.append(out)
        return out

    monkeypatch.setattr(potts, "_categorical", counted)
    V, h = _random(2, 4, 3, seed=5)
    p = PottsParams(h[0].float(), V[0].float(), "ABC")
    s = p.sample_gibbs(n, sweeps=sweeps, burn_in=burn_in, thin=thin, chains=chains, seed=0)
    assert len(calls) == total * p.length  # one draw per site per sweep
    last = torch.stack(calls[-p.length :], 1)  # the final sweep's state of every chain
    n_chains = n if chains is None else chains
    reads = -(-n // n_chains)
    assert torch.equal(s[(reads - 1) * n_chains :], last[: n - (reads - 1) * n_chains])


def test_temperature_flattens_ar_samples() -> None:
    V, h = _random(2, 5, 4, seed=12)
    m = ARPotts(3 * h[0].float(), V[0].float(), "ABCD")
    cold = m.sample(2000, temperature=0.3, seed=0)
    hot = m.sample(2000, temperature=3.0, seed=0)
    assert len(torch.unique(hot, dim=0)) > len(torch.unique(cold, dim=0))
    assert torch.equal(m.sample(50, seed=3), m.sample(50, seed=3))


def test_loss_invariant_to_extra_padding() -> None:
    V, h = _random(3, 5, 4, seed=13)
    s = torch.randint(0, 4, (1, 6, 5), generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(1, 5, dtype=torch.bool)
    Vp = torch.cat([V, torch.zeros(1, 3, 3, 4, dtype=V.dtype)], 2)
    hp = torch.cat([h, torch.zeros(1, 3, 4, dtype=h.dtype)], 1)
    sp = torch.cat([s, torch.zeros(1, 6, 3, dtype=torch.long)], 2)
    maskp = torch.cat([mask, torch.ones(1, 3, dtype=torch.bool)], 1)
    for variant in ("pw", "ar"):
        a = invmsafold_loss(V, h, s, mask, variant=variant, eta_j=1e-2, eta_h=1e-2)
        b = invmsafold_loss(Vp, hp, sp, maskp, variant=variant, eta_j=1e-2, eta_h=1e-2)
        assert math.isclose(float(a), float(b), rel_tol=1e-12)


def test_energy_batch_shapes_and_errors() -> None:
    V, h = _random(2, 3, 4)
    assert lowrank_energy(V, h, torch.zeros(1, 2, 3, dtype=torch.long)).shape == (1, 2)
    p = PottsParams(h[0], V[0], "ABCD")
    with pytest.raises(ValueError, match="lie in"):
        p.energy(torch.tensor([[0, 4, 1]]))
    with pytest.raises(ValueError, match="length"):
        p.energy(torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="rank"):
        PottsParams(h[0], V[0][:0], "ABCD")
    with pytest.raises(ValueError, match="alphabet"):
        PottsParams(h[0], V[0], "ABC")
    with pytest.raises(ValueError, match="MSA tokens"):
        invmsafold_loss(V, h, torch.full((1, 2, 3), 9), torch.zeros(1, 3, dtype=torch.bool), variant="pw",
                        eta_j=0.0, eta_h=0.0)  # fmt: skip


def test_export_round_trip(tmp_path) -> None:
    V, h = _random(2, 4, 3, seed=14)
    p = PottsParams(h[0], V[0], "ABC")
    write_npz(tmp_path / "m.npz", p)
    back = read_npz(tmp_path / "m.npz")
    assert torch.allclose(back.V, p.V) and torch.allclose(back.h, p.h) and back.alphabet == "ABC"
    with np.load(tmp_path / "m.npz") as z:
        assert z["J"].shape == (4, 4, 3, 3)
    write_adabmdca_text(tmp_path / "m.txt", p)
    J, hh = read_adabmdca_text(tmp_path / "m.txt")
    Jd, _ = p.to_dense()
    assert np.allclose(J, Jd.numpy(), atol=1e-6) and np.allclose(hh, h[0].numpy(), atol=1e-6)
