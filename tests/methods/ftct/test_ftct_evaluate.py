"""Tests of FTCT metrics, greedy decoding and checkpoints."""

import dataclasses

import numpy as np
import pytest
import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    LeafStop,
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
    query_leaf_id,
    save_checkpoint,
    score_copy,
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
        "order_depth2": 1.0,
        "order_depth3": 1.0,
        "order_depth4": 1.0,
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


def test_order_depth_ignores_values_and_stops_at_the_first_wrong_vertex():
    out = _score(["B", "=", 6, ",", "C", "=", 1, ",", "E", "=", 9, ",", "D", "=", 9])
    assert (out["order_depth2"], out["order_depth3"], out["order_depth4"]) == (1.0, 1.0, 0.0)
    assert out["depth2"] == 0.0  # the value of B is wrong


def _copy_item(gold=(("B", 5), ("C", 7), ("D", 9))) -> TestItem:
    return dataclasses.replace(_item(), gold_pairs=gold, kind="copy", demos="random")


def test_copy_score_is_the_official_icl_rule():
    def copy(words):
        return score_copy(TOK, _copy_item(), TOK.encode(words))

    right = copy(["B", "=", 1, ",", "C", "=", 2, ",", "D", "=", 3])  # values are ignored
    assert right == {"copy": 1.0, "order_depth2": 1.0, "order_depth3": 1.0, "order_depth4": 1.0}
    assert copy(["B", "=", 1, ",", "C", "=", 2, ",", "D", "=", 3, ",", "E", "=", 4])["copy"] == 1.0
    short = copy(["B", "=", 1, ",", "C", "=", 2, "<nl>", "D", "=", 3])  # reading stops at newline
    assert short["copy"] == 0.0 and short["order_depth3"] == 1.0 and short["order_depth4"] == 0.0
    swapped = copy(["C", "=", 1, ",", "B", "=", 2, ",", "D", "=", 3])
    assert swapped["copy"] == 0.0 and swapped["order_depth2"] == 0.0


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


class _Loop(torch.nn.Module):
    """A plain module that cycles through fixed steps past the leaf and never emits a newline."""

    def __init__(self, tok: FTCTTokenizer, words: list) -> None:
        super().__init__()
        cyc = tok.encode(words)
        n = len(cyc)
        self.succ = {(cyc[i], cyc[(i + 1) % n]): cyc[(i + 2) % n] for i in range(n)}  # by the last two ids
        self.vocab, self.pad = len(tok), tok.pad_id

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        del attention_mask
        nxt = torch.tensor([self.succ.get((int(a), int(b)), self.pad) for a, b in input_ids[:, -2:].tolist()])
        onehot = torch.nn.functional.one_hot(nxt, self.vocab).float()
        return onehot[:, None, :].expand(-1, input_ids.shape[1], -1)


def _truncate_at_leaf(tok, prompt, gen):
    leaf = query_leaf_id(tok, prompt)
    for i in range(2, len(gen)):
        if gen[i - 2] == leaf and gen[i - 1] == tok.eq_id and tok.is_value(gen[i]):
            return gen[: i + 1]
    return gen


def test_query_leaf_is_the_last_question():
    demo = ["C", "=", "?:", "A", "=", 1, ",", "C", "=", 4, "<nl>"]
    prompt = TOK.encode([*demo, "D", "=", "?:", "A", "=", 3, ","])
    assert TOK.letter_of(query_leaf_id(TOK, prompt)) == "D"
    with pytest.raises(ValueError, match="no query question"):
        query_leaf_id(TOK, TOK.encode(["A", "=", 3, ","]))
    kw = dict(max_new_tokens=3, pad_id=TOK.pad_id, stop_ids=(TOK.newline_id,))
    with pytest.raises(TypeError, match="stop_at_leaf"):
        greedy_generate(_Loop(TOK, ["A", "=", 3, ","]), [prompt], stop_at_leaf=True, **kw)


def _looping_model(kind: str) -> torch.nn.Module:
    steps = ["B", "=", 5, ",", "C", "=", 7, ",", "D", "=", 9, ",", "E", "=", 1, ",", "A", "=", 3, ","]
    loop = _Loop(TOK, steps)
    if kind == "plain":
        return loop.eval()
    # a Hugging Face model whose logits are the loop's: decoded by generate() with the stop criterion
    model = build_model(ModelConfig(n_layer=1, n_head=1, d_model=8), TOK, seed=0)
    model.generation_config.use_cache = False  # every step sees the whole sequence

    def forward(input_ids=None, attention_mask=None, **kwargs):
        return CausalLMOutputWithPast(logits=loop(input_ids, attention_mask))

    model.forward = forward
    return model


@pytest.mark.parametrize("kind", ["plain", "hf"])
def test_generation_stops_at_the_leaf_instead_of_looping(kind):
    model = _looping_model(kind)
    prompts = [
        _item().prompt_ids,
        tuple(TOK.encode(["C", "=", "?:", "A", "=", 3, ","])),
        tuple(TOK.encode(["E", "=", "?:", "A~1", "A", "=", 3, ","])),  # longer: left-padded batch
    ]
    kw = dict(max_new_tokens=40, pad_id=TOK.pad_id, stop_ids=(TOK.newline_id, TOK.eos_id))
    looping = greedy_generate(model, prompts, **kw)
    assert [len(g) for g in looping] == [40, 40, 40]  # without the rule it runs to the budget
    stopped = greedy_generate(model, prompts, stop_at_leaf=TOK, **kw)
    assert TOK.decode(stopped[0]) == ["B", "=", "5", ",", "C", "=", "7", ",", "D", "=", "9"]
    assert TOK.decode(stopped[1]) == ["B", "=", "5", ",", "C", "=", "7"]
    assert TOK.decode(stopped[2]) == [*TOK.decode(stopped[0]), ",", "E", "=", "1"]
    assert score_output(TOK, _item(), stopped[0])["whole"] == 1.0
    assert stopped == [greedy_generate(model, [p], stop_at_leaf=TOK, **kw)[0] for p in prompts]


def test_hf_generation_with_leaf_stop_is_the_plain_output_cut_at_the_leaf(trained):
    model, tok, tests, _ = trained
    prompts = [it.prompt_ids for it in tests]
    kw = dict(max_new_tokens=30, pad_id=tok.pad_id, stop_ids=(tok.newline_id, tok.eos_id), batch_size=4)
    plain = greedy_generate(model, prompts, **kw)
    stopped = greedy_generate(model, prompts, stop_at_leaf=tok, **kw)
    assert stopped == [_truncate_at_leaf(tok, p, g) for p, g in zip(prompts, plain, strict=True)]


def test_leaf_stop_ignores_a_leaf_step_inside_the_prompt():
    stop = LeafStop(TOK, [TOK.letter_id("D")], prompt_len=4)
    ids = torch.tensor([TOK.encode(["A", "D", "=", 9])])
    assert stop(ids, None).tolist() == [False]  # the value is part of the prompt
    assert stop(torch.cat([ids, torch.tensor([[TOK.comma_id]])], 1), None).tolist() == [False]


def test_evaluate_scores_each_item_at_its_own_budget(trained):
    model, tok, tests, _ = trained
    short = [dataclasses.replace(it, max_new_tokens=5) for it in tests]
    alone = evaluate(model, tok, short, batch_size=4)
    mixed = evaluate(model, tok, short + [dataclasses.replace(it, k=7) for it in tests], batch_size=4)
    assert mixed[1] == alone[1]


def test_training_checkpoints_see_the_model_in_eval_mode():
    cfg = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=10, n_fragment=20)
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    g = CausalGraph.random(cfg, np.random.default_rng(0))
    corpus = make_training_corpus(g, tok, cfg, np.random.default_rng(1))
    fresh = build_model(ModelConfig(n_layer=1, n_head=1, d_model=16), tok, seed=0)
    seen = []
    train_model(
        fresh,
        corpus,
        TrainConfig(steps=6, batch_size=4, warmup_steps=1),
        seed=0,
        checkpoints=(2, 6),
        on_checkpoint=lambda step, m: seen.append((step, m.training)),
    )
    assert seen == [(2, False), (6, False)]
    with pytest.raises(ValueError, match="checkpoints"):
        train_model(
            fresh, corpus, TrainConfig(steps=6, batch_size=4, warmup_steps=1), seed=0, checkpoints=(7,)
        )
