"""Extended FTCT checks: the λ sweep and the mechanism scores.

Run as a script (never imported by the library)::

    python experiments/ftct_extended.py lambda --seed 1
    python experiments/ftct_extended.py mechanism --seed 1

Each check trains at the claim's full budget (a few minutes on 2 cores) and prints its numbers
and its pass rule (spec "Extended checks"): at n = 8, M = 4 beats M = 2 by >= 0.3; max induction
score >= 0.3, some head with >= 0.3 attention on the parent value, probe parent accuracy >= 2x
grandparent accuracy. The 1-layer/1-head depth check is an arm of the claim itself.
"""

from __future__ import annotations

import argparse
import dataclasses

from iclr25._core.seeding import numpy_rng, seed_everything
from iclr25.methods.ftct import (
    CausalGraph,
    ClaimConfig,
    FTCTTokenizer,
    build_model,
    evaluate,
    forward_internals,
    induction_scores,
    make_compositional_tests,
    make_probe_tests,
    make_training_corpus,
    parent_attention,
    probe_parent_value,
    train_model,
)
from iclr25.methods.ftct.claim import FULL


def train_and_score(
    config: ClaimConfig, seed: int
) -> tuple[dict[int, dict[str, float]], object, object, object]:
    """Train one model at ``config`` and return per-k metrics, the model, graph and tokenizer."""
    seed_everything(seed)
    cfg = config.data
    graph = CausalGraph.random(cfg, numpy_rng(seed, 0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    corpus = make_training_corpus(graph, tok, cfg, numpy_rng(seed, 1))
    model = build_model(config.model, tok, seed=seed)
    train_model(model, corpus, config.train, seed=seed)
    tests = []
    for k in config.shots:
        tests += make_compositional_tests(graph, tok, cfg, k, config.prompts_per_k, numpy_rng(seed, 2, 0, k))
    return evaluate(model, tok, tests), model, graph, tok


def lambda_check(seed: int) -> None:
    """n = 8: M = 4 (λ = 0.5) against M = 2 (λ = 0.25)."""
    out = {}
    for m in (2, 4):
        data = dataclasses.replace(FULL.data, depth=8, max_child_len=m)
        res, *_ = train_and_score(dataclasses.replace(FULL, data=data), seed)
        out[m] = max(res[k]["whole"] for k in res if k >= 1)
        print(f"M = {m}: few-shot whole = {out[m]:.3f}")
    print(f"difference {out[4] - out[2]:.3f} (pass if >= 0.3)")


def mechanism_check(seed: int) -> None:
    """Induction scores, parent-value attention and the parent-value probe on the claim's model."""
    _, model, graph, tok = train_and_score(FULL, seed)
    items = make_compositional_tests(graph, tok, FULL.data, 2, 100, numpy_rng(seed, 4))
    attn, _ = forward_internals(model, items, pad_id=tok.pad_id)
    print(f"max induction score = {induction_scores(attn, items).max():.3f} (pass if >= 0.3)")
    print(f"max parent attention = {parent_attention(attn, items).max():.3f} (pass if >= 0.3)")
    probe_items = make_probe_tests(graph, tok, FULL.data, 2, 400, numpy_rng(seed, 5))
    _, hidden = forward_internals(model, probe_items, pad_id=tok.pad_id)
    print(f"probe {probe_parent_value(hidden, probe_items)} (pass if parent >= 2 x grandparent)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=["lambda", "mechanism"])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    {"lambda": lambda_check, "mechanism": mechanism_check}[args.check](args.seed)
