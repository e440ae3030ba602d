"""FTCT data: fragmented training corpus and chained few-shot chain-of-thought tests.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements Section 3.2 (training
data: structure/"ICL" sequences and fragment/"MK" sequences with noise vertices, several
traces of one vertex order packed per sequence), Section 3.3 (compositional few-shot tests on
full chains never seen whole) and the in-distribution fragment tests of the experiments.

A trace of vertices ``v_1 .. v_L`` with values ``x_1 .. x_L`` is::

    v_L = ?: [ctx] v_1 = x_1 , [ctx] v_2 = x_2 , ... [ctx] v_L = x_L

Its *head* is the question ``v_L = ?:`` plus the first step ``[ctx] v_1 = x_1 ,`` (the test
prompt gives the first vertex and its value, as in the paper); everything after the head is
supervised, the head and the newlines between traces are not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from iclr25.methods.ftct.config import FTCTConfig
from iclr25.methods.ftct.graph import LETTERS, CausalGraph
from iclr25.methods.ftct.vocab import FTCTTokenizer

__all__ = [
    "COPY_KINDS",
    "Corpus",
    "TestItem",
    "Trace",
    "check_no_leakage",
    "draw_trace",
    "longest_consistent_chain",
    "make_compositional_tests",
    "make_copy_tests",
    "make_in_distribution_tests",
    "make_probe_tests",
    "make_training_corpus",
    "noise_values",
    "pack_traces",
]

STRUCTURE, FRAGMENT = 0, 1
Demos = Literal["same", "other_chain", "shuffled"]


@dataclass(frozen=True)
class Trace:
    """One tokenised trace.

    Args:
        ids: token ids of the whole trace (no trailing newline).
        head_len: length of the unsupervised head (question + first step).
        pairs: ``(letter, value)`` per step, in order.
        pair_pos: ``(letter index, value index)`` of each step within ``ids``.
    """

    ids: tuple[int, ...]
    head_len: int
    pairs: tuple[tuple[str, int], ...]
    pair_pos: tuple[tuple[int, int], ...]


def draw_trace(
    tok: FTCTTokenizer,
    letters: Sequence[str],
    values: Sequence[int],
    context_range: tuple[int, int],
    rng: np.random.Generator,
) -> Trace:
    """Tokenise one trace, sampling 1..k private context tokens before each vertex.

    Args:
        tok: the vocabulary.
        letters: vertex letters, length L >= 1.
        values: one value per letter.
        context_range: ``[low, high)`` number of context tokens per step (without replacement).
        rng: source of randomness.

    Returns:
        The :class:`Trace`.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.

    Example:
        >>> tok = FTCTTokenizer(n_letters=3, modulus=10, context_div=2)
        >>> t = draw_trace(tok, ["A", "B"], [4, 6], (0, 1), np.random.default_rng(0))
        >>> tok.decode(t.ids), t.head_len
        (['B', '=', '?:', 'A', '=', '4', ',', 'B', '=', '6'], 7)
    """
    if len(letters) != len(values) or not letters:
        raise ValueError("letters and values must be non-empty and of equal length")
    lo, hi = context_range
    counts = rng.integers(lo, hi, size=len(letters))  # context tokens per step
    picks = rng.random((len(letters), tok.context_div)).argsort(axis=1)  # a random order per step
    ids = [tok.letter_id(letters[-1]), tok.eq_id, tok.question_id]
    pair_pos = []
    head_len = 0
    for i, (x, v) in enumerate(zip(letters, values, strict=False)):
        pool = tok.context_ids(x)
        ids += [pool[j] for j in picks[i, : counts[i]]]
        pair_pos.append((len(ids), len(ids) + 2))
        ids += [tok.letter_id(x), tok.eq_id, tok.value_id(v)]
        if i < len(letters) - 1:
            ids.append(tok.comma_id)
        if i == 0:
            head_len = len(ids)
    pairs = tuple((x, int(v)) for x, v in zip(letters, values, strict=False))
    return Trace(ids=tuple(ids), head_len=head_len, pairs=pairs, pair_pos=tuple(pair_pos))


def noise_values(graph: CausalGraph, cfg: FTCTConfig) -> tuple[int, ...]:
    """Noise values: ``[0, noise_high)`` minus every admissible vertex value (Section 3.2)."""
    out = tuple(sorted(set(range(cfg.noise_high)) - graph.all_admissible()))
    if not out:
        raise ValueError("every noise value is admissible for some vertex; raise noise_high or root_low")
    return out


def longest_consistent_chain(graph: CausalGraph, pairs: Sequence[tuple[str, int]]) -> int:
    """Longest run of graph-consistent steps along a graph path, in trace order (not only adjacent).

    Counts vertices ``u_1 .. u_m`` appearing in this order (anywhere in the trace) such that each
    ``(u_i, u_{i+1})`` is an edge and each value follows from the previous one with admissible
    values. A fragment of M vertices scores M; noise vertices score 0.

    Args:
        graph: the causal graph.
        pairs: ``(letter, value)`` per step of one trace.

    Returns:
        The longest such run (0 if no step holds a graph vertex with an admissible value).

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.
    """
    best = [0] * len(pairs)
    for j, (v, xv) in enumerate(pairs):
        if v not in graph.vertices or xv not in graph.admissible_values(v):
            continue
        best[j] = 1
        for i in range(j):
            u, xu = pairs[i]
            if best[i] and graph.consistent(u, xu, v, xv):
                best[j] = max(best[j], best[i] + 1)
    return max(best, default=0)


def longest_letter_path(graph: CausalGraph, letters: Sequence[str]) -> int:
    """Longest run of graph vertices along a graph path, in trace order, letters only.

    Like :func:`longest_consistent_chain` but blind to the values: it counts vertices
    ``u_1 .. u_m`` appearing in this order (not only adjacent) with each ``(u_i, u_{i+1})`` an
    edge. A structure sentence of random letters with noise values can hold a long one by
    chance: the vertex order of a chain without its values.

    Args:
        graph: the causal graph.
        letters: the letters of one trace, in order.

    Returns:
        The longest such run (0 if the trace holds no graph vertex).

    Example:
        >>> g = CausalGraph(levels=(("A",), ("B",), ("C",)), edges={("A", "B"): ("+", 1),
        ...     ("B", "C"): ("+", 1)}, roots=(0,), modulus=10)
        >>> longest_letter_path(g, ["A", "X", "B", "C"]), longest_letter_path(g, ["C", "B", "A"])
        (3, 1)
    """
    best = [0] * len(letters)
    for j, v in enumerate(letters):
        if v not in graph.vertices:
            continue
        best[j] = 1
        for i in range(j):
            if best[i] and (letters[i], v) in graph.edges:
                best[j] = max(best[j], best[i] + 1)
    return max(best, default=0)


def count_long_paths(
    graph: CausalGraph, traces: Sequence[Sequence[tuple[str, int]]], min_len: int
) -> dict[str, int]:
    """How many training traces hold at least ``min_len`` vertices of a graph path, in order.

    ``consistent`` counts runs whose values follow the edges (a chain the model could learn
    whole; the corpus builder rejects any longer than M), ``letters`` counts runs of the
    vertex order alone, values ignored.

    Args:
        graph: the causal graph.
        traces: ``(letter, value)`` lists, one per training trace.
        min_len: the shortest run counted, e.g. M + 1 or the chain depth n.

    Returns:
        ``{"consistent": count, "letters": count}``.
    """
    if min_len < 1:
        raise ValueError(f"min_len must be >= 1, got {min_len}")
    out = {"consistent": 0, "letters": 0}
    for pairs in traces:
        out["consistent"] += longest_consistent_chain(graph, pairs) >= min_len
        out["letters"] += longest_letter_path(graph, [v for v, _ in pairs]) >= min_len
    return out


def check_no_leakage(
    graph: CausalGraph, traces: Sequence[Sequence[tuple[str, int]]], max_child_len: int
) -> None:
    """Raise ``ValueError`` if any trace holds more than M consistent graph vertices (Trap 4).

    Args:
        graph: the causal graph.
        traces: ``(letter, value)`` lists, one per training trace.
        max_child_len: M.
    """
    for t, pairs in enumerate(traces):
        run = longest_consistent_chain(graph, pairs)
        if run > max_child_len:
            raise ValueError(
                f"leakage: training trace {t} holds {run} > M={max_child_len} consistent vertices"
            )


@dataclass
class Corpus:
    """Padded training sequences.

    Args:
        input_ids: token ids, right-padded with ``<pad>``. Shape: ``(N, L)``.
        labels: ``input_ids`` where supervised, -100 elsewhere. Shape: ``(N, L)``.
        attention_mask: 1 on real tokens. Shape: ``(N, L)``.
        kind: 0 for structure (ICL) sequences, 1 for fragment (MK) sequences. Shape: ``(N,)``.
        traces: per sequence, the ``(letter, value)`` list of each packed trace.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor
    kind: torch.Tensor
    traces: list[list[tuple[tuple[str, int], ...]]] = field(repr=False)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def _fragment_sentence(
    graph: CausalGraph, cfg: FTCTConfig, rng: np.random.Generator, non_graph: Sequence[str]
) -> tuple[list[str], tuple[str, ...], list[int]]:
    """Letters of one fragment sequence: a child chain at sorted random slots, noise letters elsewhere."""
    m = cfg.max_child_len
    edge_len = int(rng.integers(1, m))  # uniform in [1, M-1]
    chains = graph.child_chains(edge_len)
    chain = chains[int(rng.integers(len(chains)))]
    lo = max(m, cfg.tl_low)
    hi = max(lo + 1, cfg.depth + cfg.addlen)
    length = int(rng.integers(lo, hi + 1))
    diam = min(len(chain) + cfg.nearlen, length)
    slots = sorted(int(s) for s in rng.choice(diam, size=len(chain), replace=False))
    shift = int(rng.integers(0, length - diam + 1))
    slots = [s + shift for s in slots]
    sentence: list[str] = []
    for i in range(length):
        if i in slots:
            sentence.append(chain[slots.index(i)])
            continue
        if cfg.leak_prob_node > 0 and rng.random() < cfg.leak_prob_node:
            pool = [v for v in graph.vertices if v not in chain and v not in sentence]
        else:
            pool = [x for x in non_graph if x not in sentence]
        sentence.append(pool[int(rng.integers(len(pool)))])
    return sentence, chain, slots


def _fragment_values(
    graph: CausalGraph,
    cfg: FTCTConfig,
    sentence: Sequence[str],
    chain: Sequence[str],
    slots: Sequence[int],
    noise: Sequence[int],
    rng: np.random.Generator,
) -> list[int]:
    """Fresh values for one fragment trace: the chain follows the graph, noise letters get noise."""
    starts = sorted(graph.admissible_values(chain[0]))
    chain_vals = graph.propagate(chain, starts[int(rng.integers(len(starts)))])
    values = []
    for i, x in enumerate(sentence):
        if i in slots:
            values.append(chain_vals[slots.index(i)])
        elif x in graph.vertices and cfg.leak_prob_val > 0 and rng.random() < cfg.leak_prob_val:
            adm = sorted(graph.admissible_values(x))
            values.append(adm[int(rng.integers(len(adm)))])
        else:
            values.append(noise[int(rng.integers(len(noise)))])
    return values


def pack_traces(tok: FTCTTokenizer, traces: Sequence[Trace]) -> tuple[list[int], list[int]]:
    """Concatenate traces, each followed by a newline; supervise each trace after its head.

    Args:
        tok: the vocabulary.
        traces: the traces of one sequence.

    Returns:
        ``(ids, labels)`` with -100 on heads and newlines.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.
    """
    ids: list[int] = []
    labels: list[int] = []
    for t in traces:
        ids += t.ids
        labels += [-100] * t.head_len + list(t.ids[t.head_len :])
        ids.append(tok.newline_id)
        labels.append(-100)
    return ids, labels


def make_training_corpus(
    graph: CausalGraph, tok: FTCTTokenizer, cfg: FTCTConfig, rng: np.random.Generator
) -> Corpus:
    """Structure and fragment sequences, shuffled together (Section 3.2).

    Structure sequences: 2..n+addlen distinct letters from the whole alphabet (graph letters
    included) with noise values only. Fragment sequences: a child chain of 2..M vertices at
    sorted random slots among non-graph noise letters, values following the graph from a random
    admissible start. Each sequence packs ``examples_per_seq`` traces with one vertex order and
    fresh values and context tokens. With no leak probabilities, raises if any trace holds more
    than M consistent graph vertices.

    Args:
        graph: the causal graph.
        tok: the vocabulary.
        cfg: the data config.
        rng: source of randomness.

    Returns:
        The :class:`Corpus`.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.2.
    """
    noise = noise_values(graph, cfg)
    alphabet = list(LETTERS[: cfg.n_letters])
    non_graph = [x for x in alphabet if x not in graph.vertices]
    kinds = [STRUCTURE] * cfg.n_structure + [FRAGMENT] * cfg.n_fragment
    order = rng.permutation(len(kinds))
    seqs: list[tuple[list[int], list[int]]] = []
    all_traces: list[list[tuple[tuple[str, int], ...]]] = []
    for idx in order:
        kind = kinds[int(idx)]
        if kind == STRUCTURE:
            length = int(rng.integers(2, cfg.depth + cfg.addlen + 1))
            sentence = [alphabet[i] for i in rng.choice(len(alphabet), size=length, replace=False)]
            value_lists = [
                [noise[int(j)] for j in rng.integers(len(noise), size=length)]
                for _ in range(cfg.examples_per_seq)
            ]
        else:
            sentence, chain, slots = _fragment_sentence(graph, cfg, rng, non_graph)
            value_lists = [
                _fragment_values(graph, cfg, sentence, chain, slots, noise, rng)
                for _ in range(cfg.examples_per_seq)
            ]
        traces = [draw_trace(tok, sentence, vals, cfg.context_range, rng) for vals in value_lists]
        seqs.append(pack_traces(tok, traces))
        all_traces.append([t.pairs for t in traces])
    if cfg.leak_prob_node == 0 and cfg.leak_prob_val == 0:
        check_no_leakage(graph, [p for ts in all_traces for p in ts], cfg.max_child_len)
    n = len(seqs)
    width = max((len(s[0]) for s in seqs), default=1)
    input_ids = np.full((n, width), tok.pad_id, dtype=np.int64)
    labels = np.full((n, width), -100, dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.int64)
    for i, (ids, lab) in enumerate(seqs):
        input_ids[i, : len(ids)] = ids
        labels[i, : len(lab)] = lab
        mask[i, : len(ids)] = 1
    kind_t = torch.tensor([kinds[int(i)] for i in order], dtype=torch.long)
    return Corpus(
        input_ids=torch.from_numpy(input_ids),
        labels=torch.from_numpy(labels),
        attention_mask=torch.from_numpy(mask),
        kind=kind_t,
        traces=all_traces,
    )


@dataclass(frozen=True)
class TestItem:
    """One test prompt with its gold continuation.

    Args:
        prompt_ids: demonstrations, each followed by a newline, then the query's head.
        gold_ids: the gold continuation of the query trace.
        gold_pairs: ``(letter, value)`` steps in ``gold_ids``.
        chain: the query's graph vertices (a full chain, or the fragment for in-distribution).
        k: number of demonstrations.
        kind: "compositional" or "in_distribution".
        demos: "same", "other_chain" or "shuffled".
        query_start: index in ``prompt_ids`` where the query trace begins.
        pair_pos: ``(letter index, value index)`` of each query step within ``prompt_ids + gold_ids``.
        te_pos: index in ``prompt_ids + gold_ids`` of a value token scored teacher-forced.
        max_new_tokens: decoding budget (gold length bound plus slack).
        target: the fragment's second vertex, whose value ``tr_val`` scores (in-distribution only).
        knock_pos: query step whose value was replaced at random (probe tests), else -1.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.3.
    """

    __test__ = False  # not a pytest test class

    prompt_ids: tuple[int, ...]
    gold_ids: tuple[int, ...]
    gold_pairs: tuple[tuple[str, int], ...]
    chain: tuple[str, ...]
    k: int
    kind: str
    demos: str
    query_start: int
    pair_pos: tuple[tuple[int, int], ...]
    te_pos: int
    max_new_tokens: int
    target: str = ""
    knock_pos: int = -1

    @property
    def full_ids(self) -> tuple[int, ...]:
        """``prompt_ids + gold_ids`` (the teacher-forced sequence)."""
        return self.prompt_ids + self.gold_ids


def _check_k(k_shots: int, n: int) -> None:
    if k_shots < 0:
        raise ValueError(f"k_shots must be >= 0, got {k_shots}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")


def _roots(graph: CausalGraph, v: str, rng: np.random.Generator) -> int:
    adm = sorted(graph.admissible_values(v))
    return adm[int(rng.integers(len(adm)))]


def _assemble(
    tok: FTCTTokenizer, demos: Sequence[Trace], query: Trace, cut: int, end: int
) -> tuple[tuple[int, ...], tuple[int, ...], int, tuple[tuple[int, int], ...]]:
    prompt: list[int] = []
    for d in demos:
        prompt += [*list(d.ids), tok.newline_id]
    start = len(prompt)
    prompt += list(query.ids[:cut])
    gold = tuple(query.ids[cut:end])
    pos = tuple((start + a, start + b) for a, b in query.pair_pos)
    return tuple(prompt), gold, start, pos


def _max_new(n_steps: int, cfg: FTCTConfig) -> int:
    # each step: up to (high-1) context tokens + letter, '=', value, ','; plus slack (Trap 8)
    return n_steps * (cfg.context_range[1] - 1 + 4) + 4


def _whole_query_item(
    tok: FTCTTokenizer,
    cfg: FTCTConfig,
    demo_traces: Sequence[Trace],
    query: Trace,
    *,
    chain: Sequence[str],
    k: int,
    kind: str,
    demos: str,
    te_step: int,
    **extra: Any,
) -> TestItem:
    """A prompt of the demonstrations and the query's head, with the rest of the query as gold.

    ``te_step`` is the query step whose value is scored teacher-forced.
    """
    prompt, gold, start, pos = _assemble(tok, demo_traces, query, query.head_len, len(query.ids))
    return TestItem(
        prompt_ids=prompt,
        gold_ids=gold,
        gold_pairs=query.pairs[1:],
        chain=tuple(chain),
        k=k,
        kind=kind,
        demos=demos,
        query_start=start,
        pair_pos=pos,
        te_pos=pos[te_step][1],
        max_new_tokens=_max_new(len(query.pairs) - 1, cfg),
        **extra,
    )


def make_compositional_tests(
    graph: CausalGraph,
    tok: FTCTTokenizer,
    cfg: FTCTConfig,
    k_shots: int,
    n: int,
    rng: np.random.Generator,
    demos: Demos = "same",
) -> list[TestItem]:
    """Few-shot chain-of-thought prompts on full chains (Section 3.3).

    Each prompt holds ``k_shots`` clean demonstrations (context tokens, no noise vertices,
    fresh root values) and then the query's head (question plus the root step); the gold
    continuation is the rest of the full chain.

    Args:
        graph: the causal graph.
        tok: the vocabulary.
        cfg: the data config.
        k_shots: number of demonstrations k >= 0.
        n: number of prompts.
        rng: source of randomness.
        demos: "same" (the query's chain), "other_chain" (another full chain: a negative
            control) or "shuffled" (the query's vertices in a shuffled order after the root:
            a negative control).

    Returns:
        ``n`` :class:`TestItem` objects.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.3.
    """
    _check_k(k_shots, n)
    if demos not in ("same", "other_chain", "shuffled"):
        raise ValueError(f"demos must be 'same', 'other_chain' or 'shuffled', got {demos!r}")
    chains = graph.full_chains()
    if demos == "other_chain" and len(chains) < 2:
        raise ValueError("other_chain demonstrations need a graph with at least two full chains")
    items = []
    for _ in range(n):
        chain = chains[int(rng.integers(len(chains)))]
        if demos == "other_chain":
            others = [c for c in chains if c != chain]
            demo_chain = others[int(rng.integers(len(others)))]
        else:
            demo_chain = chain
        perm = list(range(len(chain)))
        if demos == "shuffled":
            while perm == sorted(perm):
                perm = [0, *(int(i) + 1 for i in rng.permutation(len(chain) - 1))]
        demo_traces = []
        for _ in range(k_shots):
            vals = graph.propagate(demo_chain, _roots(graph, demo_chain[0], rng))
            letters = [demo_chain[i] for i in perm]
            demo_traces.append(draw_trace(tok, letters, [vals[i] for i in perm], cfg.context_range, rng))
        query = draw_trace(
            tok, chain, graph.propagate(chain, _roots(graph, chain[0], rng)), cfg.context_range, rng
        )
        j = int(rng.integers(1, len(chain)))
        items.append(
            _whole_query_item(
                tok,
                cfg,
                demo_traces,
                query,
                chain=chain,
                k=k_shots,
                kind="compositional",
                demos=demos,
                te_step=j,
            )
        )
    return items


def make_probe_tests(
    graph: CausalGraph, tok: FTCTTokenizer, cfg: FTCTConfig, k_shots: int, n: int, rng: np.random.Generator
) -> list[TestItem]:
    """Compositional prompts whose query has one value "knocked" for the parent-value probe.

    At a random step ``j`` in ``1 .. depth-2`` the value is replaced by a random admissible one
    and the later values are recomputed from it, so the parent value of step ``j + 1`` is
    independent of its grandparent's (Section 5, probing).

    Args:
        graph: the causal graph.
        tok: the vocabulary.
        cfg: the data config.
        k_shots: demonstrations per prompt.
        n: number of prompts.
        rng: source of randomness.

    Returns:
        Items with ``knock_pos`` set.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 5.
    """
    _check_k(k_shots, n)
    chains = graph.full_chains()
    items = []
    for _ in range(n):
        chain = chains[int(rng.integers(len(chains)))]
        demo_traces = [
            draw_trace(
                tok, chain, graph.propagate(chain, _roots(graph, chain[0], rng)), cfg.context_range, rng
            )
            for _ in range(k_shots)
        ]
        vals = graph.propagate(chain, _roots(graph, chain[0], rng))
        j = int(rng.integers(1, len(chain) - 1))
        knocked = graph.propagate(chain[j:], _roots(graph, chain[j], rng))
        vals = vals[:j] + knocked
        query = draw_trace(tok, chain, vals, cfg.context_range, rng)
        items.append(
            _whole_query_item(
                tok,
                cfg,
                demo_traces,
                query,
                chain=chain,
                k=k_shots,
                kind="compositional",
                demos="same",
                te_step=j + 1,
                knock_pos=j,
            )
        )
    return items


def make_in_distribution_tests(
    graph: CausalGraph, tok: FTCTTokenizer, cfg: FTCTConfig, k_shots: int, n: int, rng: np.random.Generator
) -> list[TestItem]:
    """Fragment-sequence prompts like the training data (the paper's in-distribution checks).

    The prompt holds ``k_shots`` traces of a fragment sentence and the query trace up to and
    including the first fragment vertex's step; ``tr_val`` asks whether the next fragment
    vertex's value is right given the gold prefix (the vertex-order check is the ``icl`` copy
    probe, :func:`make_copy_tests`).

    Args:
        graph: the causal graph.
        tok: the vocabulary.
        cfg: the data config.
        k_shots: demonstrations per prompt.
        n: number of prompts.
        rng: source of randomness.

    Returns:
        Items with ``kind == "in_distribution"``; ``te_pos`` is the second fragment vertex's value.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.
    """
    _check_k(k_shots, n)
    noise = noise_values(graph, cfg)
    non_graph = [x for x in LETTERS[: cfg.n_letters] if x not in graph.vertices]
    items = []
    for _ in range(n):
        sentence, chain, slots = _fragment_sentence(graph, cfg, rng, non_graph)
        traces = [
            draw_trace(
                tok,
                sentence,
                _fragment_values(graph, cfg, sentence, chain, slots, noise, rng),
                cfg.context_range,
                rng,
            )
            for _ in range(k_shots + 1)
        ]
        query = traces[-1]
        first, second = slots[0], slots[1]
        cut = query.pair_pos[first][1] + 2  # after the first fragment value and its comma
        end = query.pair_pos[second][1] + 1
        prompt, gold, start, pos = _assemble(tok, traces[:-1], query, cut, end)
        items.append(
            TestItem(
                prompt_ids=prompt,
                gold_ids=gold,
                gold_pairs=query.pairs[first + 1 : second + 1],
                chain=tuple(chain),
                k=k_shots,
                kind="in_distribution",
                demos="same",
                query_start=start,
                pair_pos=pos,
                te_pos=pos[second][1],
                max_new_tokens=_max_new(len(sentence) - first - 1, cfg),
                target=chain[1],
            )
        )
    return items


CopyKind = Literal["icl", "random", "chain", "chain_noise"]
COPY_KINDS: tuple[str, ...] = ("icl", "random", "chain", "chain_noise")


def _copy_sentence(
    graph: CausalGraph,
    cfg: FTCTConfig,
    kind: str,
    rng: np.random.Generator,
    non_graph: Sequence[str],
) -> tuple[list[str], tuple[str, ...], list[int]]:
    """Letters of one copy-probe sentence; values are drawn per trace by :func:`make_copy_tests`.

    Returns ``(sentence, chain, slots)``: the graph vertices at ``slots`` of the sentence carry
    graph values; ``chain`` is empty for sentences whose values are all noise.
    """
    alphabet = list(LETTERS[: cfg.n_letters])
    if kind == "icl":
        # the official order-copying test: half structure sentences, half fragment sentences
        # whose fragment has at most 2 vertices
        if rng.random() < 0.5:
            length = int(rng.integers(2, cfg.depth + cfg.addlen + 1))
            sentence = [alphabet[i] for i in rng.choice(len(alphabet), size=length, replace=False)]
            return sentence, (), []
        sentence, chain, slots = _fragment_sentence(graph, _with_m(cfg, 2), rng, non_graph)
        return sentence, tuple(chain), list(slots)
    if kind == "random":
        sentence = [alphabet[i] for i in rng.choice(len(alphabet), size=cfg.depth, replace=False)]
        return sentence, (), []
    chains = graph.full_chains()
    chain = tuple(chains[int(rng.integers(len(chains)))])
    if kind == "chain":
        return list(chain), (), []
    # chain_noise: the whole chain at sorted random slots among non-graph noise letters
    length = int(rng.integers(cfg.depth + 1, cfg.depth + max(1, cfg.addlen) + 1))
    slots = sorted(int(s) for s in rng.choice(length, size=len(chain), replace=False))
    fillers = [non_graph[i] for i in rng.choice(len(non_graph), size=length - len(chain), replace=False)]
    sentence, it = [], iter(fillers)
    for i in range(length):
        sentence.append(chain[slots.index(i)] if i in slots else next(it))
    return sentence, chain, slots


def _with_m(cfg: FTCTConfig, m: int) -> FTCTConfig:
    """``cfg`` with fragments of at most ``m`` vertices."""
    return dataclasses.replace(cfg, max_child_len=min(m, cfg.depth - 1))


def make_copy_tests(
    graph: CausalGraph,
    tok: FTCTTokenizer,
    cfg: FTCTConfig,
    k_shots: int,
    n: int,
    rng: np.random.Generator,
    kind: CopyKind = "icl",
) -> list[TestItem]:
    """Order-copying probes: k traces of one sentence, then the query's head; copy the order.

    Every trace of a prompt has the same letters in the same order and fresh values, as in the
    packed training sequences; the gold continuation is the rest of the query trace, and the
    score (``copy`` in :func:`~iclr25.methods.ftct.evaluate.evaluate`) reads only its letters.

    Kinds:
        ``"icl"``: the official ``icl`` test: with probability 1/2 a structure sentence
        (2..n+addlen random letters, noise values), else a fragment sentence whose fragment has
        at most 2 vertices (graph values) among noise letters.
        ``"random"``: n random letters from the whole alphabet, noise values.
        ``"chain"``: the letters of a full chain, in order, with noise values.
        ``"chain_noise"``: a full chain at sorted random positions among n+1..n+addlen
        non-graph letters; the chain's values follow the graph, the others are noise.

    Args:
        graph: the causal graph.
        tok: the vocabulary.
        cfg: the data config.
        k_shots: demonstrations per prompt.
        n: number of prompts.
        rng: source of randomness.
        kind: which sentences to copy (above).

    Returns:
        Items with ``kind == "copy"`` and ``demos == kind``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4 (the in-distribution vertex test).
    """
    _check_k(k_shots, n)
    if kind not in COPY_KINDS:
        raise ValueError(f"kind must be one of {COPY_KINDS}, got {kind!r}")
    noise = noise_values(graph, cfg)
    non_graph = [x for x in LETTERS[: cfg.n_letters] if x not in graph.vertices]
    items = []
    for _ in range(n):
        sentence, chain, slots = _copy_sentence(graph, cfg, kind, rng, non_graph)
        traces = []
        for _ in range(k_shots + 1):
            if chain:
                starts = sorted(graph.admissible_values(chain[0]))
                chain_vals = graph.propagate(list(chain), starts[int(rng.integers(len(starts)))])
            vals = [
                chain_vals[slots.index(i)] if i in slots else noise[int(rng.integers(len(noise)))]
                for i in range(len(sentence))
            ]
            traces.append(draw_trace(tok, sentence, vals, cfg.context_range, rng))
        query = traces[-1]
        j = int(rng.integers(1, len(sentence)))
        items.append(
            _whole_query_item(
                tok, cfg, traces[:-1], query, chain=chain, k=k_shots, kind="copy", demos=kind, te_step=j
            )
        )
    return items
