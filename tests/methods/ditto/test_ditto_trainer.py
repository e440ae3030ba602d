"""DittoTrainer: reference handling, schedule, sampling, SFT stop, determinism, errors, save/load."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from iclr25.common.data.style_world import StyleWorld, build_style_tokenizer
from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
from iclr25.methods.ditto import Demonstration, DittoConfig, DittoTrainer

WORLD = StyleWorld()
DEMOS = [
    Demonstration(
        [{"role": "user", "content": "write a note about garden to mom"}], "dear mom , flowers lovely ! bye"
    ),
    Demonstration(
        [{"role": "user", "content": "write a note about pets to boss"}],
        "dear boss , dog lovely ! cat fine ! bye",
    ),
    Demonstration(
        [{"role": "user", "content": "write a note about music to coach"}], "yo coach , drums lovely ~ bye"
    ),
]


def _cfg(**kw) -> DittoConfig:
    base = dict(
        max_steps=4,
        resample_every=2,
        samples_per_prompt=2,
        sft_max_steps=3,
        max_new_tokens=6,
        lr=1e-2,
        sft_loss_threshold=0.0,
        batch_prompts=3,
    )
    return dataclasses.replace(DittoConfig.cpu_default(), **{**base, **kw})


def _trainer(arch: str = "gpt2", callbacks=(), **kw) -> DittoTrainer:
    tok = build_style_tokenizer(WORLD)
    lm = build_tiny_lm(arch, vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    if arch == "llama":
        kw.setdefault("target_modules", ("q_proj", "v_proj"))
    return DittoTrainer(lm, tok, DEMOS, _cfg(**kw), callbacks=callbacks)


def test_first_dpo_loss_is_log2_and_sft_never_changes(one_thread) -> None:
    tr = _trainer().train_sft()
    sft_before = tr.adapter_state("sft")
    tr.train_ditto()
    assert math.isclose(tr.logs.ditto[0]["loss"], math.log(2.0), abs_tol=1e-6)
    after = tr.adapter_state("sft")
    assert all(torch.equal(sft_before[k], after[k]) for k in sft_before)
    ditto = tr.adapter_state("ditto")
    assert any(not torch.equal(ditto[k], after[k]) for k in ditto)  # the policy moved


def test_dpo_logits_not_identically_zero_with_frozen_reference(one_thread) -> None:
    """With pi_0 frozen the DPO logits move off zero; a broken variant whose reference is the
    current policy keeps them at zero (loss exactly log 2 at every step), and this test tells them apart."""
    tr = _trainer().train_sft()
    tr.train_ditto()
    assert any(abs(r["loss"] - math.log(2.0)) > 1e-4 for r in tr.logs.ditto[1:])
    assert any(abs(r["margin"]) > 1e-6 for r in tr.logs.ditto[1:])
    import numpy as np

    from iclr25.methods.ditto import build_ditto_pairs

    demos = {k: tr._encoded[k].response_ids for k in tr.keys}
    pairs = build_ditto_pairs(tr.keys, demos, tr.cache, tr.config, np.random.default_rng(0))
    tr.model.set_adapter("ditto")
    broken, _, _ = tr.dpo_loss(pairs, reference="ditto")  # reference = the current policy
    fixed, _, _ = tr.dpo_loss(pairs, reference="sft")
    assert math.isclose(broken.item(), math.log(2.0), abs_tol=1e-6)
    assert abs(fixed.item() - math.log(2.0)) > 1e-4


def test_resampling_schedule_and_iteration_hooks(one_thread) -> None:
    seen: list[tuple[str, int]] = []

    class Hook:
        def on_resample(self, trainer, step):
            seen.append(("resample", step))

        def on_iteration_end(self, trainer, iteration, step):
            seen.append(("iteration", step))

    tr = _trainer(callbacks=[Hook()], max_steps=40, resample_every=10, samples_per_prompt=1, max_new_tokens=3)
    tr.train_sft().train_ditto()
    assert tr.cache.steps() == [0, 10, 20, 30]
    assert [s for k, s in seen if k == "resample"] == [0, 10, 20, 30]
    assert [s for k, s in seen if k == "iteration"] == [10, 20, 30, 40]
    kinds = [(r["n_expert"], r["n_replay"], r["n_intermodel"]) for r in tr.logs.ditto]
    assert kinds[0][1] == kinds[0][2] == 0  # iteration 1: expert pairs only
    assert tr.logs.ditto[-1]["iteration"] == 4.0


def test_truncated_samples_have_no_eos_and_finished_ones_exactly_one(one_thread) -> None:
    tr = _trainer(max_new_tokens=3)
    eos = tr.tokenizer.eos_token_id
    samples = tr.sample_ids(tr._encoded[0].prompt_ids, 30, seed=0)
    assert any(t for _, t in samples)
    for ids, truncated in samples:
        if truncated:
            assert eos not in ids and len(ids) == 3
        else:
            assert ids.count(eos) == 1 and ids[-1] == eos


def test_sampling_is_in_eval_mode_dropout_does_not_change_tokens(one_thread) -> None:
    tok = build_style_tokenizer(WORLD)
    plain = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0)
    noisy = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0, dropout=0.5)
    a = DittoTrainer(plain, tok, DEMOS, _cfg(max_new_tokens=8))
    b = DittoTrainer(noisy, tok, DEMOS, _cfg(max_new_tokens=8))
    b.model.train()
    assert a.sample_ids(a._encoded[0].prompt_ids, 4, seed=3) == b.sample_ids(
        b._encoded[0].prompt_ids, 4, seed=3
    )
    assert b.model.training  # restored


def test_sft_stops_at_the_first_loss_below_threshold_and_respects_max_steps(one_thread) -> None:
    tr = _trainer(sft_loss_threshold=1e9, sft_max_steps=10).train_sft()
    assert tr.sft_steps_ == 1
    tr = _trainer(sft_loss_threshold=0.0, sft_max_steps=5).train_sft()
    assert tr.sft_steps_ == 5 and len(tr.logs.sft) == 5
    losses = [r["loss"] for r in tr.logs.sft]
    bar = sorted(losses)[2]  # a threshold crossed for the first time somewhere in the run
    tr = _trainer(sft_loss_threshold=bar, sft_max_steps=5).train_sft()
    first = next(i for i, v in enumerate(losses) if v < bar)
    assert tr.sft_steps_ == first + 1


def test_same_seed_same_pairs_losses_and_weights(one_thread) -> None:
    a = _trainer().train()
    b = _trainer().train()
    assert [r["loss"] for r in a.logs.ditto] == [r["loss"] for r in b.logs.ditto]
    wa, wb = a.adapter_state("ditto"), b.adapter_state("ditto")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a.generate(["write a note about garden to mom"], 2, seed=1) == b.generate(
        ["write a note about garden to mom"], 2, seed=1
    )


def test_spin_reference_moves_and_flipped_swaps(one_thread) -> None:
    tr = _trainer(
        **{
            "reference": "previous_iteration",
            "use_replay": False,
            "use_intermodel": False,
            "frac_expert": 1.0,
            "frac_replay": 0.0,
            "frac_intermodel": 0.0,
        }
    )
    tr.train()
    assert tr.reference_adapter == "ref"
    ref, sft = tr.adapter_state("ref"), tr.adapter_state("sft")
    assert any(not torch.equal(ref[k], sft[k]) for k in ref)  # replaced at the second resample
    fl = _trainer(flip_preferences=True).train()
    assert fl.logs.ditto[0]["n_expert"] > 0


def test_trl_rows_and_llama_with_chat_template(one_thread) -> None:
    tr = _trainer("llama").train()
    import numpy as np

    from iclr25.methods.ditto import build_ditto_pairs

    demos = {k: tr._encoded[k].response_ids for k in tr.keys}
    rows = tr.trl_rows(build_ditto_pairs(tr.keys, demos, tr.cache, tr.config, np.random.default_rng(0)))
    assert (
        rows and rows[0]["prompt"].startswith("user :") and rows[0]["prompt"].rstrip().endswith("assistant :")
    )


@pytest.mark.parametrize(
    "demos, kw, match",
    [
        ([], {}, "no demonstrations"),
        ([Demonstration(3, "hi")], {}, "string or a list"),  # type: ignore[arg-type]
        (
            [Demonstration("write a note about garden to mom", "hi mom , " + "flowers good . " * 30 + "bye")],
            {"max_length": 40},
            "max_length",
        ),
        (DEMOS, {"frac_expert": 0.5}, "sum to 1"),
        (DEMOS, {"resample_every": 0}, "resample_every"),
        (DEMOS, {"samples_per_prompt": 0}, "samples_per_prompt"),
    ],
)
def test_bad_input_raises(demos, kw, match) -> None:
    tok = build_style_tokenizer(WORLD)
    lm = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0)
    with pytest.raises(ValueError, match=match):
        DittoTrainer(lm, tok, demos, _cfg(**kw))


def test_chat_prompts_without_a_chat_template_raise() -> None:
    tok = build_word_tokenizer(WORLD.vocab)  # no chat template set
    lm = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0)
    with pytest.raises(ValueError, match="chat template"):
        DittoTrainer(lm, tok, DEMOS, _cfg())
    DittoTrainer(lm, tok, [("write a note about garden to mom", "hi mom , soil good . bye")], _cfg())


def test_adapter_save_and_reload_gives_identical_logits(tmp_path, one_thread) -> None:
    from peft import PeftModel

    tr = _trainer().train()
    tr.save_pretrained(tmp_path / "adapters")
    tok = build_style_tokenizer(WORLD)
    tok.save_pretrained(tmp_path / "tok")
    base = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    base.save_pretrained(tmp_path / "base")
    from iclr25.common.tiny_lm import load_tiny_lm

    fresh = PeftModel.from_pretrained(
        load_tiny_lm(tmp_path / "base"), tmp_path / "adapters" / "ditto", adapter_name="ditto"
    )
    ids = torch.tensor([tr._encoded[0].prompt_ids + tr._encoded[0].response_ids])
    tr.model.set_adapter("ditto")
    with torch.no_grad():
        a, b = tr.model(ids).logits, fresh(ids).logits
    assert torch.allclose(a, b, atol=1e-6, rtol=0)  # the same weights; only summation order may differ
    assert not torch.allclose(a, base(ids).logits, atol=1e-4)  # and the adapter is really applied


def _paper_trainer(**kw) -> DittoTrainer:
    """paper() (LoRA dropout 0.05 on q,k,v,o) on a tiny Llama whose own dropout is on too."""
    tok = build_style_tokenizer(WORLD)
    lm = build_tiny_lm("llama", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0, dropout=0.3)
    quick = dict(
        max_steps=2, resample_every=2, samples_per_prompt=2, max_new_tokens=6, sft_max_steps=2, lr=1e-2
    )
    cfg = dataclasses.replace(DittoConfig.paper(), **{**quick, **kw})
    return DittoTrainer(lm, tok, DEMOS, cfg)


def test_first_dpo_loss_is_log2_under_the_paper_preset(one_thread) -> None:
    """Policy and reference are scored with dropout off, as the official trainer does, so at
    ditto = sft every log-ratio is equal and the first loss is exactly log 2."""
    assert DittoConfig.paper().lora_dropout == 0.05 and DittoConfig.paper().disable_dropout
    first = _paper_trainer().train().logs.ditto[0]
    assert first["chosen_reward"] == 0.0 and first["rejected_reward"] == 0.0  # log pi = log pi_0
    assert math.isclose(first["loss"], math.log(2.0), abs_tol=1e-6)


def test_scoring_the_policy_with_dropout_on_gives_nonzero_first_rewards(one_thread) -> None:
    """The broken variant (policy in train mode, reference in eval mode) fails the check above:
    dropout noise enters the policy's log-probs, so the implicit rewards are not zero."""
    first = _paper_trainer(disable_dropout=False).train().logs.ditto[0]
    assert first["chosen_reward"] != 0.0 and first["rejected_reward"] != 0.0
