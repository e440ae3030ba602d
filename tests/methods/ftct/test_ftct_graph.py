"""Tests of the FTCT causal graph."""

import itertools

import numpy as np
import pytest

from iclr25.methods.ftct import CausalGraph, FTCTConfig, apply_edge


def _graph(seed: int = 0, **kw) -> CausalGraph:
    return CausalGraph.random(FTCTConfig(**kw), np.random.default_rng(seed))


def test_apply_edge_abs_and_mod():
    assert apply_edge(5, "+", 3, 200) == 8
    assert apply_edge(2, "-", 5, 200) == 3  # |2 - 5| = 3
    assert apply_edge(198, "+", 5, 200) == 3  # 203 mod 200
    with pytest.raises(ValueError):
        apply_edge(1, "*", 2, 10)


def test_merge_pos_zero_gives_one_root_and_two_full_chains():
    g = _graph()
    assert [len(level) for level in g.levels] == [1, 2, 2, 2, 2]
    chains = g.full_chains()
    assert len(chains) == 2
    assert all(c[0] == g.levels[0][0] and len(c) == 5 for c in chains)
    assert len(set(g.vertices)) == 9


def test_values_follow_edge_ops():
    g = _graph(seed=3)
    for chain in g.full_chains():
        vals = g.propagate(chain, 70)
        for (u, v), xu, xv in zip(itertools.pairwise(chain), vals, vals[1:], strict=False):
            op, a = g.edges[(u, v)]
            assert xv == abs(xu + a if op == "+" else xu - a) % g.modulus


def test_admissible_ranges_contain_every_propagated_value():
    g = _graph(seed=1)
    for chain in g.full_chains():
        for root in g.roots:
            for v, x in zip(chain, g.propagate(chain, root), strict=False):
                assert x in g.admissible_values(v)
    # and nothing else: each vertex has exactly as many values as roots (steps are bijective here)
    assert all(len(g.admissible_values(v)) == len(g.roots) for v in g.vertices)


def test_child_chains_match_brute_force():
    g = _graph(seed=2)
    for edge_len in range(0, g.depth):
        brute = sorted(
            p
            for p in itertools.permutations(g.vertices, edge_len + 1)
            if all((u, v) in g.edges for u, v in itertools.pairwise(p))
        )
        assert g.child_chains(edge_len) == brute
    assert g.child_chains(1) and len(g.child_chains(1)) == len(g.edges)


def test_merge_in_the_middle_gives_four_full_chains():
    g = _graph(merge_pos=2)
    assert [len(level) for level in g.levels] == [2, 2, 1, 2, 2]
    assert len(g.full_chains()) == 4
    merged = g.levels[2][0]
    assert len(g.parents(merged)) == 2
    with pytest.raises(ValueError):
        g.parent(merged)


def test_graph_is_deterministic_in_the_seed():
    assert _graph(seed=5).edges == _graph(seed=5).edges
    assert _graph(seed=5).edges != _graph(seed=6).edges
