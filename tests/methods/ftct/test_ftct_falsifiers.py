"""Falsifiers of the FTCT gates that have no control arm in the claim, and of the 1L1H control.

``zero_shot_whole`` (zero-shot whole-chain accuracy <= 0.2) is the paper's contrast; its broken
variant is a model that *does* know the whole chains, as a model trained on leaked full chains
would. A lookup model that writes each prompt's gold chain stands in for it: fed through the
claim's own evaluation and criterion, the gate must fail on it, and hold for an untrained model.
"""

import numpy as np
import torch

from iclr25._core.claims import RunResult
from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    ModelConfig,
    build_model,
    evaluate,
    make_compositional_tests,
)
from iclr25.methods.ftct.claim import CLAIM, _walks


class _WholeChainOracle(torch.nn.Module):
    """Maps ``(input_ids, attention_mask)`` to logits that write each known prompt's gold chain."""

    def __init__(self, tok: FTCTTokenizer, items) -> None:
        super().__init__()
        self.vocab = len(tok)
        self.answers = {it.prompt_ids: (*it.gold_ids, tok.newline_id) for it in items}
        self.lengths = sorted({len(p) for p in self.answers})

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros((*input_ids.shape, self.vocab))
        for i in range(input_ids.shape[0]):
            seq = tuple(input_ids[i][attention_mask[i].bool()].tolist())
            for n in self.lengths:
                answer = self.answers.get(seq[:n])
                if answer is not None and len(seq) - n < len(answer):
                    logits[i, -1, answer[len(seq) - n]] = 1.0
                    break
        return logits


def _zero_shot_stat(model, tok, tests) -> tuple[float, bool]:
    gate = next(c for c in CLAIM.criteria if c.name == "zero_shot_whole")
    metrics = RunResult(metrics={"zero_shot": evaluate(model, tok, tests, batch_size=16)[0]}).metrics
    stat = gate.statistic(metrics)
    return stat, gate.holds(stat)


def test_zero_shot_gate_fails_for_a_model_that_knows_whole_chains():
    cfg = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80)
    graph = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    tests = make_compositional_tests(graph, tok, cfg, 0, 24, np.random.default_rng(1))

    stat, holds = _zero_shot_stat(_WholeChainOracle(tok, tests), tok, tests)
    assert stat == 1.0 and not holds

    untrained = build_model(ModelConfig(n_layer=1, n_head=2, d_model=16), tok, seed=0)
    stat, holds = _zero_shot_stat(untrained, tok, tests)
    assert stat <= 0.2 and holds


def test_shallow_control_fails_for_a_small_model_that_chains():
    """The 1-layer/1-head control misses its bar only if that model cannot chain: fed a model
    that completes every chain (as a 1L1H model would if depth and heads did not matter), the
    control criterion fails; fed an untrained one, it holds."""
    control = next(c for c in CLAIM.criteria if c.name == "shallow_control")
    assert control.gating and control.control
    cfg = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80)
    graph = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    tests = make_compositional_tests(graph, tok, cfg, 1, 16, np.random.default_rng(2))
    for model, holds in (
        (_WholeChainOracle(tok, tests), False),
        (build_model(ModelConfig(n_layer=1, n_head=1, d_model=16), tok, seed=0), True),
    ):
        arm = evaluate(model, tok, tests, batch_size=16)[1]
        metrics = RunResult(metrics={"one_layer_one_head": arm}).metrics
        assert control.holds(control.statistic(metrics)) is holds


def test_walks_tell_the_asked_chain_from_another_edge_path():
    """The zero-shot edge-walk diagnosis: a model that writes the asked chain scores whole; one
    that follows the edges to the other chain from the same root scores an edge walk only."""
    cfg = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80)
    graph = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    items = make_compositional_tests(graph, tok, cfg, 0, 24, np.random.default_rng(1))
    right = _walks(
        model=_WholeChainOracle(tok, items), tok=tok, graph=graph, items=items, batch_size=8, device="cpu"
    )
    assert right == {"whole": 1.0, "edge_walk": 1.0, "other_chain": 0.0, "asked_order": 1.0}
    # a model that walks the edges to the other chain from the same root
    swapped = []
    for it in items:
        other = next(o for o in items if o.chain != it.chain)
        swapped.append((it, other))
    oracle = _WholeChainOracle(tok, items)
    oracle.answers = {it.prompt_ids: (*o.gold_ids, tok.newline_id) for it, o in swapped}
    wrong = _walks(oracle, tok, graph, items, batch_size=8, device="cpu")
    assert wrong == {"whole": 0.0, "edge_walk": 1.0, "other_chain": 1.0, "asked_order": 0.0}
    untrained = build_model(ModelConfig(n_layer=1, n_head=2, d_model=16), tok, seed=0)
    w = _walks(untrained, tok, graph, items, batch_size=8, device="cpu")
    assert 0.0 <= w["other_chain"] <= w["edge_walk"] <= 1.0 and w["whole"] <= w["asked_order"]
