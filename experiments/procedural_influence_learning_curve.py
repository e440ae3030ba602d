"""Diagnostic for the procedural_influence claim: does the reasoning/factual correlation gap appear
with more training? EK-FAC correlations by pair type for a fresh model and after 5, 10 and 20
epochs (each its own cosine schedule), on the pilot seed 100 (outside the claim's seeds).

Run: python experiments/procedural_influence_learning_curve.py [--seed 100] [--epochs 0 5 10 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time

import numpy as np
import torch

from iclr25.common.tiny_lm import build_word_tokenizer
from iclr25.methods.procedural_influence import (
    TASKS,
    ClaimConfig,
    build_lm,
    completion_token_nll,
    compute_influence,
    encode_documents,
    encode_queries,
    group_correlations,
    make_corpus,
    make_queries,
    query_correlation_matrix,
    train_lm,
)
from iclr25.methods.procedural_influence.claim import _pair_key


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--epochs", type=int, nargs="+", default=[0, 5, 10, 20])
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ClaimConfig()
    corpus = make_corpus(cfg.corpus, args.seed)
    tok = build_word_tokenizer(corpus.vocab)
    data = encode_documents(corpus.texts, tok, cfg.lm.context)
    icfg = dataclasses.replace(cfg.influence, cache_dir=tempfile.mkdtemp())
    # the queries of the fully trained model, scored under every checkpoint
    rows = []
    models = {}
    for epochs in sorted(args.epochs, reverse=True):
        model = build_lm(len(tok), cfg.lm, seed=args.seed)
        t = time.time()
        if epochs:
            train_lm(model, data, dataclasses.replace(cfg.lm, epochs=epochs), seed=args.seed)
        models[epochs] = model
        print(f"trained {epochs} epochs in {time.time() - t:.0f} s", flush=True)
    final = models[max(args.epochs)]
    queries = make_queries(corpus, final, tok, n_factual=cfg.n_factual, n_reasoning=cfg.n_reasoning,
                           n_control=cfg.n_control, context=cfg.lm.context, seed=args.seed)  # fmt: skip
    qb = encode_queries([q.prompt for q in queries], [q.completion for q in queries], tok, cfg.lm.context)
    groups = [q.group for q in queries]
    key = _pair_key(groups, [q.template for q in queries])
    reas = np.flatnonzero(np.isin(groups, TASKS[:2]))
    targets = qb["input_ids"][reas, 1:]
    numeric = torch.tensor([[tok.convert_ids_to_tokens(int(t)).isdigit() for t in r] for r in targets])
    for epochs in sorted(args.epochs):
        model = models[epochs]
        t = time.time()
        res = compute_influence(model, data, qb, icfg)
        corr = group_correlations(query_correlation_matrix(res.scores), key)
        nll = completion_token_nll(model, {k: v[reas] for k, v in qb.items()}).double()
        row = {
            "epochs": epochs,
            **{f"r_{k}": round(v, 3) for k, v in corr.items()},
            "reasoning_nats": round(float(nll.sum(1).mean()), 3),
            "number_nats_share": round(float(nll[numeric].sum() / nll.sum()), 3),
            "factual_nats": round(float(res.query_nats[np.array(groups) == "factual"].mean()), 3),
            "seconds": round(time.time() - t),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
