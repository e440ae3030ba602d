"""Shared tiny world of the procedural_influence tests: a small corpus and a briefly trained LM."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    """(corpus, tokenizer, model, encoded documents, influence config) of a 1-layer d=8 Llama."""
    from iclr25.common.tiny_lm import build_word_tokenizer
    from iclr25.methods.procedural_influence import (
        CorpusConfig,
        InfluenceConfig,
        LMConfig,
        build_lm,
        encode_documents,
        make_corpus,
        train_lm,
    )

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    corpus = make_corpus(
        CorpusConfig(n_arithmetic=24, n_slope=12, n_linear=4, n_procedures=4, n_facts=6, docs_per_fact=2,
                     n_filler=8, holdout_problems=4),
        seed=3,
    )  # fmt: skip
    tok = build_word_tokenizer(corpus.vocab)
    lm_cfg = LMConfig(n_layer=1, d_model=8, n_head=2, epochs=4, batch_size=16, lr=1e-2)
    data = encode_documents(corpus.texts, tok, lm_cfg.context)
    model = build_lm(len(tok), lm_cfg, seed=0)
    train_lm(model, data, lm_cfg, seed=0)
    icfg = InfluenceConfig(cache_dir=str(tmp_path_factory.mktemp("influence_cache")), factor_batch_size=16,
                           train_batch_size=16, query_batch_size=8)  # fmt: skip
    yield corpus, tok, model, data, icfg, lm_cfg
    torch.set_num_threads(threads)
