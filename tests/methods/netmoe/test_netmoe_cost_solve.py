"""Cost model (num, c, c', link bytes, times) and the placement solvers against brute force and ILP."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iclr25.methods.netmoe import (
    Placement,
    Topology,
    assignment_counts,
    expert_replacement,
    expert_stats,
    greedy_placement,
    identity_placement,
    inter_cost,
    intra_cost,
    link_bytes,
    placement_cost,
    random_placement,
    solve_bottleneck,
    solve_ilp,
    solve_joint,
    solve_two_stage,
    traffic,
)
from iclr25.methods.netmoe.routing_data import routing_entropy, synthetic_trace

# Hand-worked example: 4 samples, S = 2, k = 2, 2 nodes x 2 devices, expert e on device e.
IDS = np.array(
    [
        [[0, 1], [0, 2]],  # num [2, 1, 1, 0]
        [[3, 2], [3, 1]],  # num [0, 1, 1, 2]
        [[0, 1], [1, 0]],  # num [2, 2, 0, 0]
        [[2, 3], [2, 3]],  # num [0, 0, 2, 2]
    ]
)
TOPO = Topology(2, 2, bw_intra=4.0, bw_inter=1.0, bytes_per_token=1)


def test_hand_worked_num_c_cprime() -> None:
    num = assignment_counts(IDS, np.arange(4), 4)
    assert num.tolist() == [[2, 1, 1, 0], [0, 1, 1, 2], [2, 2, 0, 0], [0, 0, 2, 2]]
    assert inter_cost(num, TOPO).tolist() == [[1, 3], [3, 1], [0, 4], [4, 0]]
    assert intra_cost(num, TOPO).tolist() == [[1, 2, 0, 1], [1, 0, 2, 1], [2, 2, 0, 0], [0, 0, 2, 2]]


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (2, 4), (4, 2), (1, 4)])
def test_counts_identity_holds(nodes: int, gpus: int) -> None:
    topo = Topology(nodes, gpus)
    j = topo.devices
    ids = synthetic_trace(3 * j, 10, 2 * j, 2, beta=0.3, seed=1)
    num = assignment_counts(ids, np.arange(2 * j) % j, j)
    assert (num.sum(1) == 10 * 2).all()
    c, cp = inter_cost(num, topo), intra_cost(num, topo)
    for g in range(j):  # c[i, node(g)] + c'[i, g] + num[i, g] = S k
        assert (c[:, topo.node_of(g)] + cp[:, g] + num[:, g] == 20).all()


def test_link_bytes_sent_equal_received_and_times() -> None:
    num = assignment_counts(IDS, np.arange(4), 4)
    pl = Placement(np.array([0, 3, 1, 2]))
    links = link_bytes(num, pl.device_of_sample, TOPO)
    assert links.sum() == num.sum()  # every copy is sent once and received once
    assert links.sum(1).tolist() == num.sum(0).tolist()  # sent by each expert device
    assert links.sum(0).tolist() == [4.0, 4.0, 4.0, 4.0]  # received: S k per sample
    rep = traffic(num, pl.device_of_sample, TOPO)
    c, cp = inter_cost(num, TOPO), intra_cost(num, TOPO)
    g = pl.device_of_sample
    assert rep.inter_bytes == c[np.arange(4), g // 2].sum() == 1 + 1 + 0 + 0
    assert rep.intra_bytes == cp[np.arange(4), g].sum() == 1 + 1 + 2 + 2
    assert rep.t_sum == pytest.approx(2 / 1.0 + 6 / 4.0)
    assert rep.t_max == pytest.approx(max(1 + 1 / 4, 1 + 1 / 4, 2 / 4, 2 / 4))


def test_migrate_adds_residual_rows() -> None:
    num = assignment_counts(IDS, np.arange(4), 4)
    origin = identity_placement(4, TOPO).device_of_sample
    moved = np.array([1, 0, 2, 3])
    plain = link_bytes(num, moved, TOPO)
    mig = link_bytes(num, moved, TOPO, origin=origin, residual="migrate", tokens_per_sample=2)
    extra = mig - plain
    assert extra.sum() == 4 * 2 and extra[0, 1] == 2 and extra[1, 0] == 2 and extra[2, 2] == 2
    with pytest.raises(ValueError, match="migrate"):
        link_bytes(num, moved, TOPO, residual="migrate")


def _balanced(n: int, j: int):
    per = n // j
    for assign in itertools.product(range(j), repeat=n):
        if all(assign.count(g) == per for g in range(j)):
            yield np.array(assign)


@pytest.mark.parametrize("n,nodes,gpus", [(4, 2, 1), (6, 3, 1), (4, 1, 2), (6, 1, 3), (4, 2, 2)])
def test_km_equals_brute_force(n: int, nodes: int, gpus: int) -> None:
    topo = Topology(nodes, gpus, bw_intra=4.0, bw_inter=1.0, bytes_per_token=1)
    j = topo.devices
    for seed in range(5):
        num = assignment_counts(synthetic_trace(n, 6, 2 * j, 2, beta=0.3, seed=seed), np.arange(2 * j) % j, j)
        all_p = [Placement(a) for a in _balanced(n, j)]
        best = {
            o: min(placement_cost(num, p, topo, o) for p in all_p) for o in ("inter", "sum", "bottleneck")
        }
        p2 = solve_two_stage(num, topo)
        p2.validate(topo)
        assert placement_cost(num, p2, topo, "inter") == best["inter"]
        if nodes == 1 or gpus == 1:  # one stage only: exactly optimal for the sum too
            assert placement_cost(num, p2, topo, "sum") == pytest.approx(best["sum"])
        assert placement_cost(num, solve_joint(num, topo), topo, "sum") == pytest.approx(best["sum"])
        pb = solve_bottleneck(num, topo)
        assert placement_cost(num, pb, topo, "bottleneck") == pytest.approx(best["bottleneck"])
        tie = min(
            placement_cost(num, p, topo, "sum")
            for p in all_p
            if placement_cost(num, p, topo, "bottleneck") <= best["bottleneck"] + 1e-12
        )
        assert placement_cost(num, pb, topo, "sum") == pytest.approx(tie)


def test_stages_equal_ilp_and_order() -> None:
    rng = np.random.default_rng(0)
    for t in range(6):
        topo = Topology(2, 2) if t % 2 else Topology(2, 4)
        j = topo.devices
        n = 16 if j == 8 else int(rng.choice([8, 12, 16]))
        num = assignment_counts(synthetic_trace(n, 12, 2 * j, 2, beta=0.2, seed=t), np.arange(2 * j) % j, j)
        p2 = solve_two_stage(num, topo)
        _, opt1 = solve_ilp(num, topo, "inter")
        _, opt2 = solve_ilp(num, topo, "intra", node_of_sample=p2.device_of_sample // topo.gpus_per_node)
        pj, optj = solve_ilp(num, topo, "sum")
        pj.validate(topo)
        assert placement_cost(num, p2, topo, "inter") == opt1
        assert placement_cost(num, p2, topo, "intra") == opt2
        joint = placement_cost(num, solve_joint(num, topo), topo, "sum")
        assert joint == pytest.approx(optj, rel=1e-9)
        assert placement_cost(num, p2, topo, "sum") >= joint - 1e-9
        pm, optm = solve_ilp(num, topo, "max")
        assert placement_cost(num, pm, topo, "max") == pytest.approx(optm, rel=1e-6)
        assert optm <= placement_cost(num, p2, topo, "max") + 1e-9


def test_solvers_balanced_deterministic_never_worse() -> None:
    topo = Topology(2, 4)
    for seed in range(4):
        ids = synthetic_trace(32, 32, 32, 2, beta=0.1, seed=seed)
        num = assignment_counts(ids, np.arange(32) % 8, 8)
        p = solve_two_stage(num, topo)
        p.validate(topo)
        assert np.array_equal(p.device_of_sample, solve_two_stage(num, topo).device_of_sample)
        inter = placement_cost(num, p, topo, "inter")
        for other in (
            identity_placement(32, topo),
            random_placement(32, topo, seed),
            greedy_placement(num, topo),
        ):
            other.validate(topo)
            assert inter <= placement_cost(num, other, topo, "inter")
        for solver in (solve_joint, solve_bottleneck, greedy_placement):
            solver(num, topo).validate(topo)


def test_placement_permutation_and_balance_errors() -> None:
    p = Placement(np.array([1, 0, 1, 0]))
    assert p.permutation().tolist() == [1, 3, 0, 2]
    with pytest.raises(ValueError, match="not balanced"):
        Placement(np.array([0, 0, 0, 1])).validate(Topology(1, 2))
    with pytest.raises(ValueError, match="outside"):
        Placement(np.array([0, 2])).validate(Topology(1, 2))


def test_bad_input_errors() -> None:
    num = np.ones((6, 4), dtype=np.int64)
    with pytest.raises(ValueError, match="not divisible"):
        solve_two_stage(num, Topology(2, 2))
    with pytest.raises(ValueError, match="not divisible"):
        identity_placement(5, Topology(2, 2))
    with pytest.raises(ValueError, match="expert_device"):
        assignment_counts(IDS, np.array([0, 1, 2, 4]), 4)
    with pytest.raises(ValueError, match="expert ids"):
        assignment_counts(IDS, np.array([0, 1, 2]), 4)
    with pytest.raises(ValueError, match="non-negative"):
        inter_cost(-np.ones((4, 4)), Topology(2, 2))
    with pytest.raises(ValueError, match="shape"):
        intra_cost(np.ones((4, 3)), Topology(2, 2))
    with pytest.raises(ValueError, match="4 devices but the process group has 2"):
        Topology(2, 2).check_world(2)
    for bad in ({"nodes": 0}, {"gpus_per_node": 1.5}, {"bw_inter": -1.0}, {"bytes_per_token": 0}):
        with pytest.raises(ValueError, match="Topology"):
            Topology(**{"nodes": 2, "gpus_per_node": 2, **bad})


def test_expert_replacement_moves_experts_to_their_traffic() -> None:
    topo = Topology(2, 2)
    ids = np.zeros((4, 4, 1), dtype=np.int64)
    ids[:, :, 0] = np.array([3, 2, 1, 0])[:, None]  # sample on device g only uses expert 3 - g
    stats = expert_stats(ids, identity_placement(4, topo).device_of_sample, 4, 4)
    new, moved = expert_replacement(stats, topo, np.arange(4), expert_bytes=10.0)
    assert new.tolist() == [3, 2, 1, 0] and moved == 40.0


def test_traces_reproducible_and_entropy_rises_with_beta() -> None:
    a = synthetic_trace(8, 16, 16, 2, beta=0.1, seed=3)
    assert np.array_equal(a, synthetic_trace(8, 16, 16, 2, beta=0.1, seed=3))
    assert not np.array_equal(a, synthetic_trace(8, 16, 16, 2, beta=0.1, seed=4))
    assert (a[..., 0] != a[..., 1]).all()  # k distinct experts per token
    ent = [
        routing_entropy(synthetic_trace(32, 64, 16, 2, beta=b, seed=0), 16) for b in (0.03, 0.3, 3.0, 30.0)
    ]
    assert all(x < y for x, y in itertools.pairwise(ent))
    uni = routing_entropy(synthetic_trace(32, 64, 16, 2, beta=0.03, lam=0.0, seed=0), 16)
    assert uni > ent[0]
