"""Tests of FTCT metrics, greedy decoding and checkpoints."""

import numpy as np
import pytest
import torch

from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    ModelConfig,
    TestItem,
    TrainConfig,
    WindowedMLP,
    build_model,
    evaluate,
    greedy_generate,
    load_checkpoint,
    make_compositional_tests,
    make_training_corpus,
    parse_pairs,
    save_checkpoint,
    score_output,
    train_model,
)

TOK = FTCTTokenizer(n_letters=6, modulus=20, context_div=2)
GOLD = (("B", 5), ("C", 7), ("D", 9))


def _item() -> TestItem:
    return TestItem(
        prompt_ids=tuple(TOK.encode(["D", "=", "?:", "A", "=", 3, ","])),
        gold_ids=tuple(TOK.encode(["B", "=", 5, ",", "C", "=", 7, ",", "D", "=", 9])),
        gold_pairs=GOLD,
        chain=("A", "B", "C", "D"),
        k=0,
        kind="compositional",
        demos="same",
        query_start=0,
        pair_pos=((3, 5), (7, 9), (11, 13), (15, 17)),
        te_pos=9,
        max_new_tokens=20,
    )


def _score(words):
    return score_output(TOK, _item(), TOK.encode(words))


def test_parse_pairs_reads_ids_and_skips_context():
    ids = TOK.encode(["B~1", "B", "=", 5, ",", "C~0", "C~1", "C", "=", 7, "<nl>", "D", "=", 9])
    assert parse_pairs(TOK, ids) == [("B", 5), ("C", 7)]
    assert parse_pairs(TOK, TOK.encode(["B", "=", "C", "=", 4])) == [("C", 4)]


def test_exact_output_scores_one_everywhere():
    out = _score(["B~0", "B", "=", 5, ",", "C", "=", 7, ",", "D~1", "D", "=", 9, "<nl>"])
    assert out == {
        "whole": 1.0,
        "whole_lenient": 1.0,
        "final": 1.0,
        "vertex_order": 1.0,
        "depth2": 1.0,
        "depth3": 1.0,
        "depth4": 1.0,
    }


def test_extra_pair_passes_lenient_fails_strict():
    out = _score(["B", "=", 5, ",", "E", "=", 2, ",", "C", "=", 7, ",", "D", "=", 9])
    assert out["whole"] == 0.0 and out["whole_lenient"] == 1.0
    assert out["final"] == 1.0 and out["vertex_order"] == 0.0
    assert (out["depth2"], out["depth3"]) == (1.0, 0.0)


def test_wrong_value_keeps_order_breaks_whole_and_final():
    out = _score(["B", "=", 5, ",", "C", "=", 8, ",", "D", "=", 10])
    assert out["whole"] == 0.0 and out["whole_lenient"] == 0.0
    assert out["vertex_order"] == 1.0 and out["final"] == 0.0 and out["depth2"] == 1.0


def test_steps_after_the_queried_vertex_are_cut():
    out = _score(["B", "=", 5, ",", "C", "=", 7, ",", "D", "=", 9, ",", "E", "=", 1])
    assert out["whole"] == 1.0


@pytest.mark.parametrize("words", [[], ["<nl>"], ["=", "?:", ",", "B~1", "A~0"], ["B", "B", "=", "="]])
def test_empty_or_garbled_output_scores_zero(words):
    out = _score(words)
    assert out["whole"] == out["whole_lenient"] == out["final"] == out["vertex_order"] == 0.0


@pytest.fixture(scope="module")
def trained():
    cfg = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80)
    g = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    corpus = make_training_corpus(g, tok, cfg, np.random.default_rng(1))
    model = build_model(ModelConfig(n_layer=2, n_head=2, d_model=32), tok, seed=0)
    losses = train_model(model, corpus, TrainConfig(steps=15, batch_size=8, warmup_steps=2), seed=0)
    tests = make_compositional_tests(g, tok, cfg, 1, 6, np.random.default_rng(2))
    return model, tok, tests, losses


def test_batched_left_padded_greedy_equals_unbatched(trained):
    model, tok, tests, _ = trained
    prompts = [it.prompt_ids for it in tests] + [tests[0].prompt_ids[-9:]]  # different lengths
    assert len({len(p) for p in prompts}) > 1
    kw = dict(max_new_tokens=12, pad_id=tok.pad_id, stop_ids=(tok.newline_id, tok.eos_id))
    batched = greedy_generate(model, prompts, batch_size=len(prompts), **kw)
    single = [greedy_generate(model, [p], batch_size=1, **kw)[0] for p in prompts]
    assert batched == single


def test_greedy_loop_for_plain_modules_matches_batching():
    mlp = WindowedMLP(vocab_size=len(TOK), window=3, hidden=16, n_blocks=2, seed=0).eval()
    prompts = [TOK.encode(["A", "=", 3, ","]), TOK.encode(["B", "=", 5])]
    kw = dict(max_new_tokens=5, pad_id=TOK.pad_id, stop_ids=(TOK.newline_id,))
    assert greedy_generate(mlp, prompts, **kw) == [greedy_generate(mlp, [p], **kw)[0] for p in prompts]


def test_evaluate_returns_metrics_in_range(trained):
    model, tok, tests, _ = trained
    res = evaluate(model, tok, tests, batch_size=4)
    assert set(res) == {1}
    assert all(0.0 <= v <= 1.0 for v in res[1].values())
    assert {"whole", "whole_lenient", "final", "vertex_order", "te_val", "depth2"} <= set(res[1])


def test_checkpoint_round_trip_from_a_local_folder(trained, tmp_path):
    model, tok, tests, _ = trained
    save_checkpoint(model, tok, tmp_path)
    back, tok2 = load_checkpoint(tmp_path)
    ids = torch.tensor([tests[0].prompt_ids])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, back(ids).logits, atol=1e-5)
    assert tok2.encode(["A", "=", 3]) == tok.encode(["A", "=", 3])
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing")


def test_training_lowers_the_loss(trained):
    losses = trained[3]
    assert len(losses) == 15 and sum(losses[-3:]) < sum(losses[:3])
