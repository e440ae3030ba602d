"""Tests of the FTCT data generator."""

import numpy as np
import pytest
import torch

from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    check_no_leakage,
    draw_trace,
    longest_consistent_chain,
    make_compositional_tests,
    make_copy_tests,
    make_in_distribution_tests,
    make_training_corpus,
    noise_values,
    pack_traces,
)

CFG = FTCTConfig(depth=5, max_child_len=3, n_structure=60, n_fragment=200)


@pytest.fixture(scope="module")
def world():
    g = CausalGraph.random(CFG, np.random.default_rng(0))
    tok = FTCTTokenizer(CFG.n_letters, CFG.modulus, CFG.context_div)
    corpus = make_training_corpus(g, tok, CFG, np.random.default_rng(1))
    return g, tok, corpus


def _split_traces(tok, ids):
    """Split a packed sequence (ids) into per-trace id lists at newlines."""
    out, cur = [], []
    for t in ids:
        if t == tok.pad_id:
            break
        if t == tok.newline_id:
            out.append(cur)
            cur = []
        else:
            cur.append(t)
    return out


def test_fragments_have_2_to_M_vertices_in_graph_order(world):
    g, _, corpus = world
    sizes = set()
    for kind, traces in zip(corpus.kind.tolist(), corpus.traces, strict=False):
        if kind != 1:
            continue
        for pairs in traces:
            graph_steps = [(v, x) for v, x in pairs if v in g.vertices]
            sizes.add(len(graph_steps))
            letters = [v for v, _ in graph_steps]
            assert tuple(letters) in g.child_chains(len(letters) - 1)  # a path, in graph order
            assert longest_consistent_chain(g, pairs) == len(letters)
    assert sizes == {2, 3}


def test_leakage_assertion_fires_on_a_planted_full_chain(world):
    g, _, corpus = world
    check_no_leakage(g, [p for ts in corpus.traces for p in ts], CFG.max_child_len)
    chain = g.full_chains()[0]
    vals = g.propagate(chain, g.roots[0])
    planted = []
    for i, (v, x) in enumerate(zip(chain, vals, strict=False)):
        planted += [(v, x), ("Z" if "Z" not in g.vertices else "Y", 3 + i)]  # noise between: not contiguous
    assert longest_consistent_chain(g, planted) == 5
    with pytest.raises(ValueError, match="leakage"):
        check_no_leakage(g, [planted], CFG.max_child_len)


def test_packed_examples_share_one_vertex_order(world):
    _, _, corpus = world
    for traces in corpus.traces:
        assert len(traces) == CFG.examples_per_seq
        orders = {tuple(v for v, _ in pairs) for pairs in traces}
        assert len(orders) == 1


def test_context_tokens_come_from_the_vertex_set_with_counts_in_range(world):
    _, tok, corpus = world
    lo, hi = CFG.context_range
    for row in corpus.input_ids[:50].tolist():
        for trace in _split_traces(tok, row):
            body = trace[3:]  # after the question 'X = ?:'
            run = []
            for t in body:
                owner = tok.context_owner(t)
                if owner is not None:
                    run.append(owner)
                elif tok.is_letter(t):
                    assert lo <= len(run) < hi
                    assert all(o == tok.letter_of(t) for o in run)
                    run = []


def test_noise_values_are_never_admissible(world):
    g, _, corpus = world
    noise = noise_values(g, CFG)
    assert noise and not set(noise) & g.all_admissible()
    for kind, traces in zip(corpus.kind.tolist(), corpus.traces, strict=False):
        for pairs in traces:
            for v, x in pairs:
                if kind == 0 or v not in g.vertices:
                    assert x in noise


def test_loss_mask_matches_a_hand_built_example():
    tok = FTCTTokenizer(n_letters=4, modulus=10, context_div=1)
    rng = np.random.default_rng(0)
    t1 = draw_trace(tok, ["A", "B"], [3, 5], (1, 2), rng)
    t2 = draw_trace(tok, ["A", "B"], [4, 6], (0, 1), rng)
    ids, labels = pack_traces(tok, [t1, t2])
    words = ["B", "=", "?:", "A~0", "A", "=", "3", ",", "B~0", "B", "=", "5", "<nl>"]
    words += ["B", "=", "?:", "A", "=", "4", ",", "B", "=", "6", "<nl>"]
    assert tok.decode(ids) == words
    supervised = [w if lab != -100 else None for w, lab in zip(words, labels, strict=False)]
    assert supervised == [None] * 8 + ["B~0", "B", "=", "5", None] + [None] * 7 + ["B", "=", "6", None]


def test_corpus_labels_are_masked_on_heads_newlines_and_padding(world):
    _, tok, corpus = world
    lab, ids = corpus.labels, corpus.input_ids
    assert bool((lab[ids == tok.newline_id] == -100).all())
    assert bool((lab[ids == tok.question_id] == -100).all())
    assert bool((lab[corpus.attention_mask == 0] == -100).all())
    sup = lab != -100
    assert bool((lab[sup] == ids[sup]).all())


def test_corpus_is_deterministic_in_the_seed(world):
    g, tok, corpus = world
    again = make_training_corpus(g, tok, CFG, np.random.default_rng(1))
    assert torch.equal(corpus.input_ids, again.input_ids) and torch.equal(corpus.labels, again.labels)


@pytest.mark.parametrize("demos", ["same", "other_chain", "shuffled"])
def test_compositional_prompts(world, demos):
    g, tok, _ = world
    items = make_compositional_tests(g, tok, CFG, 2, 10, np.random.default_rng(3), demos=demos)
    for it in items:
        assert it.chain in g.full_chains()
        assert [v for v, _ in it.gold_pairs] == list(it.chain[1:])
        full = it.full_ids
        assert [tok.letter_of(full[p]) for p, _ in it.pair_pos] == list(it.chain)
        assert [tok.value_of(full[q]) for _, q in it.pair_pos[1:]] == [x for _, x in it.gold_pairs]
        assert full[it.te_pos] == tok.value_id(dict(it.gold_pairs)[tok.letter_of(full[it.te_pos - 2])])
        demos_ids = it.prompt_ids[: it.query_start]
        assert demos_ids.count(tok.newline_id) == 2
        demo_letters = [tok.letter_of(t) for t in demos_ids if tok.is_letter(t)]
        if demos == "same":
            assert set(demo_letters) == set(it.chain)
        elif demos == "other_chain":
            assert not set(demo_letters[1:]) & set(it.chain[1:])  # only the shared root overlaps
        # no noise vertices in test traces
        assert set(demo_letters) <= set(g.vertices)


def test_in_distribution_prompts(world):
    g, tok, _ = world
    for it in make_in_distribution_tests(g, tok, CFG, 1, 10, np.random.default_rng(4)):
        assert it.kind == "in_distribution"
        assert it.gold_pairs[-1][0] == it.target == it.chain[1]
        assert tok.letter_of(it.full_ids[it.te_pos - 2]) == it.target


def _query_letters(tok, item):
    """Letters of the query trace (the part of prompt + gold after the last newline)."""
    ids = item.full_ids[item.query_start :]
    return [tok.letter_of(i) for i in ids if tok.is_letter(i)][1:]  # drop the question's letter


@pytest.mark.parametrize("kind", ["icl", "random", "chain", "chain_noise"])
def test_copy_probes_repeat_one_sentence_with_fresh_values(world, kind):
    g, tok, _ = world
    items = make_copy_tests(g, tok, CFG, 2, 30, np.random.default_rng(3), kind=kind)
    noise = set(noise_values(g, CFG))
    for it in items:
        assert it.kind == "copy" and it.demos == kind and it.k == 2
        demos = _split_traces(tok, it.prompt_ids[: it.query_start])
        assert len(demos) == 2
        sentence = _query_letters(tok, it)
        for d in demos:
            assert [tok.letter_of(i) for i in d if tok.is_letter(i)][1:] == sentence
        assert [v for v, _ in it.gold_pairs] == sentence[1:]
        values = dict(it.gold_pairs)
        chain_steps = [v for v in sentence if v in it.chain]
        if kind in ("random", "chain"):
            assert len(sentence) == CFG.depth and all(x in noise for x in values.values())
        if kind == "chain":
            assert tuple(sentence) in g.full_chains()
        if kind == "chain_noise":
            assert tuple(chain_steps) in g.full_chains() and len(sentence) > CFG.depth
            assert all(v not in g.vertices for v in sentence if v not in it.chain)
        if kind == "icl":
            assert len(it.chain) in (0, 2)  # noise values only, or a 2-vertex fragment


def test_copy_probe_kind_is_checked(world):
    g, tok, _ = world
    with pytest.raises(ValueError, match="kind"):
        make_copy_tests(g, tok, CFG, 1, 2, np.random.default_rng(0), kind="letters")
