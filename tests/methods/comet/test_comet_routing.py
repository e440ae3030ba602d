"""k-WTA, the routing chain (Eqs. 3-6), determinism and checkpoints of the COMET router."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from iclr25.methods.comet import COMETMLP, COMETRouter, keep_count, kwta_mask, mask_cosine


def test_kwta_matches_brute_force_sort() -> None:
    scores = torch.randn(20, 17, generator=torch.Generator().manual_seed(0))
    for k in (1, 5, 16, 17):
        got = kwta_mask(scores, k)
        for row, mrow in zip(scores, got, strict=True):
            kth = sorted(row.tolist(), reverse=True)[k - 1]
            want = [v >= kth for v in row.tolist()]
            assert mrow.tolist() == want
        assert (got.sum(-1) == k).all()
        assert torch.equal(kwta_mask(scores, k, ties="exact"), got)


def test_threshold_keeps_ties_exact_keeps_k() -> None:
    scores = torch.tensor([[5.0, 2.0, 2.0, 2.0, 1.0]])
    assert kwta_mask(scores, 2).int().tolist() == [[1, 1, 1, 1, 0]]
    exact = kwta_mask(scores, 2, ties="exact")
    assert int(exact.sum()) == 2 and bool(exact[0, 0])


@pytest.mark.parametrize(("n", "p"), [(10, 0.25), (100, 0.29), (3, 0.1), (7, 1.0), (1000, 0.5), (513, 0.9)])
def test_keep_count_formula(n: int, p: float) -> None:
    assert keep_count(n, p) == max(1, int(n * p))


def test_exact_mask_count_of_router() -> None:
    router = COMETRouter(6, (10, 7, 3), p_keep=0.3, seed=1, ties="exact")
    masks = router(torch.randn(50, 6))
    assert [int(m.sum(-1).unique().item()) for m in masks] == [3, 2, 1]


def test_p_keep_one_gives_all_ones() -> None:
    router = COMETRouter(4, (5, 6), p_keep=1.0)
    assert all(bool(m.all()) for m in router(torch.randn(3, 4)))


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, float("nan")])
def test_bad_p_keep_raises(p: float) -> None:
    with pytest.raises(ValueError, match="p_keep"):
        keep_count(10, p)
    with pytest.raises(ValueError, match="p_keep"):
        COMETRouter(4, (5,), p_keep=p)
    with pytest.raises(ValueError, match="p_keep"):
        COMETMLP(4, (5,), 2, p_keep=p)


def test_bad_k_and_ties() -> None:
    with pytest.raises(ValueError):
        kwta_mask(torch.randn(2, 3), 0)
    with pytest.raises(ValueError):
        kwta_mask(torch.randn(2, 3), 4)
    with pytest.raises(ValueError, match="ties"):
        kwta_mask(torch.randn(2, 3), 1, ties="paper")  # type: ignore[arg-type]


def test_input_width_mismatch_raises() -> None:
    router = COMETRouter(4, (5,), p_keep=0.5)
    with pytest.raises(ValueError, match="input width"):
        router(torch.randn(2, 3))
    with pytest.raises(ValueError, match="input width"):
        COMETMLP(4, (5,), 2, p_keep=0.5)(torch.randn(2, 3))


def test_recursion_matches_numpy() -> None:
    """Eqs. 4-6 in NumPy: c = V z, m = top-k(c), z = m * c, on a 3-layer router."""
    router = COMETRouter(5, (8, 6, 4), p_keep=0.5, seed=3)
    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(1))
    got = router(x)
    z = x.numpy().astype(np.float64)
    for v, k, m_t in zip(router.weights, router.ks, got, strict=True):
        c = z @ v.numpy().astype(np.float64).T
        kth = -np.sort(-c, axis=1)[:, k - 1 : k]
        m = c >= kth
        np.testing.assert_array_equal(m, m_t.numpy())
        z = c * m


def test_routing_state_is_carried_not_restarted() -> None:
    """Layer 2 reads m_1 * V_1 x (not x, and not f(.)): editing V_1 changes layer-2 masks."""
    router = COMETRouter(4, (64, 64), p_keep=0.5, seed=0)
    x = torch.randn(30, 4)
    m2 = router(x)[1]
    with torch.no_grad():
        router.weight_0.mul_(-1)
    assert not torch.equal(router(x)[1], m2)


def test_same_seed_same_v_other_seed_differs() -> None:
    a, b, c = (COMETRouter(4, (8, 8), 0.5, seed=s) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.weights, b.weights, strict=True))
    assert not torch.equal(a.weight_0, c.weight_0)


def test_v_range_is_default_linear_init() -> None:
    router = COMETRouter(16, (200,), 0.5, seed=0)
    assert float(router.weight_0.abs().max()) <= 0.25
    assert float(router.weight_0.abs().max()) > 0.24


def test_v_not_a_parameter_and_in_state_dict() -> None:
    net = COMETMLP(4, (8, 8), 2, p_keep=0.5, seed=0)
    names = {n for n, _ in net.named_parameters()}
    assert not any("router" in n for n in names)
    assert {"router.weight_0", "router.weight_1"} <= set(net.state_dict())
    assert all(not v.requires_grad for v in net.router.weights)


def test_checkpoint_round_trip_restores_v_and_masks() -> None:
    net = COMETMLP(4, (8, 8), 2, p_keep=0.5, seed=0)
    x = torch.randn(10, 4)
    masks = net.masks(x)
    buf = io.BytesIO()
    torch.save(net.state_dict(), buf)
    buf.seek(0)
    other = COMETMLP(4, (8, 8), 2, p_keep=0.5, seed=5)
    assert not torch.equal(other.router.weight_0, net.router.weight_0)
    other.load_state_dict(torch.load(buf))
    assert torch.equal(other.router.weight_0, net.router.weight_0)
    assert all(torch.equal(a, b) for a, b in zip(other.masks(x), masks, strict=True))
    assert torch.equal(other(x), net(x))


def test_state_dict_without_routing_buffer_raises() -> None:
    net = COMETMLP(4, (8, 8), 2, p_keep=0.5)
    sd = {k: v for k, v in net.state_dict().items() if k != "router.weight_1"}
    with pytest.raises(ValueError, match="routing buffer"):
        COMETMLP(4, (8, 8), 2, p_keep=0.5).load_state_dict(sd)
    with pytest.raises(ValueError, match="routing buffer"):
        COMETMLP(4, (8, 8), 2, p_keep=0.5).load_state_dict(sd, strict=False)


def test_mask_cosine_is_overlap_fraction() -> None:
    a = kwta_mask(torch.randn(5, 20), 4, ties="exact")
    b = kwta_mask(torch.randn(5, 20), 4, ties="exact")
    overlap = (a & b).sum(-1).double() / 4
    assert torch.allclose(mask_cosine(a, b), overlap)
    assert torch.allclose(mask_cosine([a, a], [a, a]), torch.ones(5, dtype=torch.float64))


def test_layer_noaffine_norm_has_no_parameters() -> None:
    router = COMETRouter(4, (8,), 0.5, routing_norm="layer_noaffine")
    assert sum(p.numel() for p in router.parameters()) == 0
    assert router(torch.randn(3, 4))[0].sum(-1).tolist() == [4, 4, 4]
