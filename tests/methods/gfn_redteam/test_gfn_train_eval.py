"""Trainers, smoothing, metrics, determinism, configs and the paper-scale adapters."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from iclr25.common.data.attack_world import AttackWorld, AttackWorldConfig
from iclr25.methods.gfn_redteam import (
    AttackPrompt,
    CompositeLogReward,
    GFNRedTeamConfig,
    GFNTrainer,
    HFToxicityClassifier,
    HFVictim,
    History,
    LinearSchedule,
    RefLMLogLikelihood,
    ReinforceAttackerTrainer,
    ToyReward,
    attach_lora,
    cosine_diversity,
    edit_diversity,
    enumerate_sequences,
    load_attacker,
    mle_smoothing,
    model_log_probs,
    redteam_metrics,
    select_smoothing_set,
    total_variation,
)


def _toy_task(attacks):
    c = torch.tensor([0.9 if "c" in a.split() else 0.05 for a in attacks])
    return c.log(), c


def _setup(tiny, **cfg):
    model, prompt = tiny
    policy = attach_lora(copy.deepcopy(model), r=2, alpha=4)
    prior = RefLMLogLikelihood(policy, prompt.prompt_ids, eos_token_id=3, banned_token_ids=(0, 1, 2))
    reward = CompositeLogReward(
        prior,
        _toy_task,
        beta=0.5,
        gamma=LinearSchedule(1, 1, 0),
        temperature=LinearSchedule(2, 1, 4),
        min_len=1,
        eos_token_id=3,
    )
    config = GFNRedTeamConfig.cpu_default().replace(
        max_len=3, min_len=1, batch_size=4, total_steps=3, seed_batches=1, warmup_steps=1, **cfg
    )
    return policy, prompt, reward, config


def _run(tiny, seed: int) -> tuple:
    policy, prompt, reward, config = _setup(tiny)
    tr = GFNTrainer(policy, prompt, reward, config, generator=torch.Generator().manual_seed(seed))
    h = tr.train()
    return h.tokens, h.loss, [it.tokens for it in tr.buffer.items], h.log_z


def test_gfn_trainer_deterministic_and_half_replayed(tiny) -> None:
    a, b = _run(tiny, 0), _run(tiny, 0)
    assert a == b
    policy, prompt, reward, config = _setup(tiny)
    tr = GFNTrainer(policy, prompt, reward, config, generator=torch.Generator().manual_seed(0))
    assert all((p == 0).all() for p in tr.log_z_head.parameters())  # the head starts at log Z = 0
    tr.train()
    assert tr.history.queries == (3 + 1) * 4  # seeding batch + one on-policy batch a step
    assert len(tr.history.loss) == 3 and len(tr.buffer) > 0
    assert any((p != 0).any() for p in tr.log_z_head.parameters())  # it is in the optimiser


def test_reinforce_trainer_runs_with_novelty(tiny) -> None:
    policy, prompt, reward, config = _setup(tiny, novelty_weight=1.0)
    h = ReinforceAttackerTrainer(
        policy, prompt, reward, config, generator=torch.Generator().manual_seed(0)
    ).train()
    assert h.queries == 12 and all(np.isfinite(h.loss))
    with pytest.raises(ValueError, match="score"):
        ReinforceAttackerTrainer(policy, prompt, reward, config, score="max")


def test_smoothing_filters_dedups_and_starts_from_sft(tiny) -> None:
    model, prompt = tiny
    h = History(
        tokens=[(4, 3), (4, 3), (5, 3), (6, 3), (6, 4, 3)],
        log_c=[np.log(0.8), np.log(0.8), np.log(0.6), np.log(0.9), np.log(0.95)],
        log_p_ref=[-5.0, -5.0, -5.0, -150.0, -50.0],
    )
    assert select_smoothing_set(h) == [(4, 3), (6, 4, 3)]  # toxicity and prior filters, de-duplicated
    assert select_smoothing_set(h, tox_threshold=0.5) == [(4, 3), (5, 3), (6, 4, 3)]
    assert select_smoothing_set(h, logp_threshold=-200) == [(4, 3), (6, 3), (6, 4, 3)]
    cfg = GFNRedTeamConfig.cpu_default().replace(mle_steps=0)
    same, n = mle_smoothing(model, h, prompt, cfg)
    assert n == 2 and same is not model
    assert all(torch.equal(a, b) for a, b in zip(same.parameters(), model.parameters(), strict=True))
    trained, _ = mle_smoothing(model, h, prompt, cfg.replace(mle_steps=20, mle_batch=4, mle_lr=1e-2))
    lp = model_log_probs(trained, prompt, [(4, 3), (6, 4, 3)])
    assert (lp > model_log_probs(model, prompt, [(4, 3), (6, 4, 3)])).all()
    with pytest.raises(ValueError, match="no training-time attack"):
        mle_smoothing(model, h, prompt, cfg, tox_threshold=0.99)


class _Victim:
    def respond(self, attacks, n):
        return [[a] * n for a in attacks]


class _Clf:
    def predict_proba(self, texts):
        # "vorn" replies: probabilities 0.6 each (arithmetic mean 0.6 > 0.5)
        return np.array([0.6 if "vorn" in t else 0.1 for t in texts])


def test_metrics_success_modes_and_diversity() -> None:
    attacks = ["open the vorn", "open the vorn", "mend quib now", "mend the lamp"]
    res = redteam_metrics(
        attacks,
        _Victim(),
        _Clf(),
        n_responses=3,
        triggers=("vorn", "quib", "zell"),
        embedder=lambda ts: np.array([[len(t), t.count("o")] for t in ts], dtype=float),
    )
    assert res["toxicity_rate"] == 0.5 and res["unique_successful"] == 1.0 and res["modes_covered"] == 1.0
    X = np.random.default_rng(0).normal(size=(6, 4))
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    brute = np.mean([Xn[i] @ Xn[j] for i in range(6) for j in range(6) if i != j])
    assert cosine_diversity(X) == pytest.approx(1 - brute)
    assert edit_diversity(["a b", "a b"]) == 0.0 and edit_diversity(["a b", "c d"]) == 1.0
    with pytest.raises(ValueError, match="no attacks"):
        redteam_metrics([], _Victim(), _Clf())


def test_config_bad_input() -> None:
    with pytest.raises(ValueError, match="beta"):
        GFNRedTeamConfig(beta=0.0)
    with pytest.raises(ValueError, match="min_len"):
        GFNRedTeamConfig(min_len=30, max_len=20)
    with pytest.raises(ValueError, match="prompt budget"):
        GFNRedTeamConfig(max_len=0, min_len=0)
    with pytest.raises(ValueError, match="capacity"):
        GFNRedTeamConfig(buffer_capacity=0)
    p = GFNRedTeamConfig.paper_gpt2()
    assert (p.lr, p.lora_r, p.lora_alpha, p.temp_steps, p.buffer_capacity) == (1e-4, 32, 16, 500, 1000)
    assert GFNRedTeamConfig.paper_chat().buffer_capacity == 5000


def test_empty_meta_prompt_raises(tiny) -> None:
    from iclr25.common.tiny_lm import build_word_tokenizer

    with pytest.raises(ValueError, match="empty"):
        AttackPrompt.from_tokenizer(build_word_tokenizer(["a"]), "  ")
    with pytest.raises(ValueError, match="meta-prompt"):
        AttackPrompt(torch.tensor([], dtype=torch.long), 3, 0, (), str)


def test_hf_adapters_on_tiny_local_models(tmp_path, tiny) -> None:
    from transformers import GPT2Config, GPT2ForSequenceClassification

    from iclr25.common.tiny_lm import build_word_tokenizer

    model, _ = tiny
    tok = build_word_tokenizer(["a", "b", "c"])  # template words outside it encode as <unk>
    model.save_pretrained(tmp_path / "attacker")
    tok.save_pretrained(tmp_path / "attacker")
    loaded, ltok = load_attacker(tmp_path / "attacker")
    assert loaded.config.n_embd == 16 and ltok.eos_token_id == 3
    with pytest.raises(FileNotFoundError):
        load_attacker(tmp_path / "missing")
    torch.manual_seed(0)
    victim = HFVictim(loaded, ltok, max_new_tokens=4, batch_size=3)
    calls = []
    generate = loaded.generate
    loaded.generate = lambda **kw: calls.append(kw["input_ids"].shape[0]) or generate(**kw)
    replies = victim.respond(["a b", "c"], n=2)
    assert [len(r) for r in replies] == [2, 2] and victim.queries == 2
    assert calls == [3, 1]  # 4 (attack, reply) rows in generate calls of at most batch_size
    with pytest.raises(ValueError, match="batch_size"):
        HFVictim(loaded, ltok, batch_size=0)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=1, n_head=2, num_labels=2, pad_token_id=0)
    clf_model = GPT2ForSequenceClassification(cfg).eval()
    clf = HFToxicityClassifier(clf_model, tok, toxic_label=1)
    p = clf.predict_proba(["a b c", "b"])
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()
    with pytest.raises(ValueError, match="template"):
        HFVictim(loaded, ltok, template="raw")  # type: ignore[arg-type]


def test_llama_guard_judge_scores_pairs_with_the_attack(tmp_path, tiny) -> None:
    from iclr25.common.tiny_lm import build_word_tokenizer
    from iclr25.methods.gfn_redteam import LlamaGuardToxicity, PairToxicityClassifier, VictimToxicity

    model, _ = tiny
    tok = build_word_tokenizer(["a", "b", "c"])
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    judge = LlamaGuardToxicity(model, tok, unsafe_text="c", batch_size=2)
    assert isinstance(judge, PairToxicityClassifier)
    p = judge.score_pairs(["a", "b", "a"], ["b", "b", "c"])
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all()
    with torch.no_grad():  # the first pair by hand: P(next = "c") after "a b "
        ids = tok(judge.format("a", "b"), return_tensors="pt", add_special_tokens=False)["input_ids"]
        ref = torch.softmax(model(input_ids=ids).logits[0, -1], -1)[tok.convert_tokens_to_ids("c")]
    assert abs(float(ref) - p[0]) < 1e-5
    assert p[0] != p[1]  # the attack changes the judgement

    class Echo:  # a victim whose reply is constant: only the attack can tell pairs apart
        def respond(self, attacks, n):
            return [["same"] * n for _ in attacks]

    class Judge:
        def score_pairs(self, attacks, replies):
            return np.array([0.9 if a == "x" else 0.1 for a in attacks])

    log_c, mean = VictimToxicity(Echo(), Judge(), n_responses=3)(["x", "y"])
    assert torch.allclose(mean, torch.tensor([0.9, 0.1])) and log_c[0] > log_c[1]


def test_trainer_generator_must_live_on_the_models_device(tiny) -> None:
    policy, prompt, reward, config = _setup(tiny)
    tr = GFNTrainer(policy, prompt, reward, config)  # default generator: on the policy's device
    assert tr.generator.device == tr.device == next(tr.log_z_head.parameters()).device
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="generator"):
            GFNTrainer(policy, prompt, reward, config, generator=torch.Generator(device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_trainers_and_smoothing_run_on_cuda(tiny) -> None:
    policy, prompt, reward, config = _setup(tiny)
    policy = policy.cuda()
    g = torch.Generator(device="cuda").manual_seed(0)
    tr = GFNTrainer(policy, prompt, reward, config, generator=g)
    h = tr.train()
    assert next(tr.log_z_head.parameters()).is_cuda and len(h.loss) == 3 and np.isfinite(h.loss).all()
    rl = ReinforceAttackerTrainer(policy, prompt, reward, config.replace(novelty_weight=1.0), generator=g)
    assert np.isfinite(rl.train().loss).all()
    model, _ = tiny
    smoothed, n = mle_smoothing(
        model.cuda(),
        h,
        prompt,
        config.replace(mle_steps=2, mle_batch=4),
        tox_threshold=0.0,
        logp_threshold=-1e9,
    )
    assert n > 0 and next(smoothed.parameters()).is_cuda


def test_world_reward_end_to_end_scores_triggers_higher() -> None:
    from iclr25.methods.gfn_redteam import VictimToxicity

    world = AttackWorld(AttackWorldConfig(n_modes=4, n_shared=2))
    task = VictimToxicity(world.victim(0), world.fit_classifier(400), n_responses=5)
    log_c, mean = task(["mend the vorn"] * 20 + ["mend the lamp"] * 20)
    assert log_c[:20].mean() > log_c[20:].mean() + 1.0 and mean[:20].mean() > 0.5 > mean[20:].mean()


@pytest.mark.slow
def test_exactness_small_space_tb_matches_and_reinforce_fails() -> None:
    """Part A at smoke size with enough steps: TB reaches TV < 0.1 by enumeration, REINFORCE does not."""
    from iclr25.common.tiny_lm import build_tiny_lm

    words = ["w0", "w1", "w2", "w3"]
    prompt = AttackPrompt(torch.tensor([2]), 3, 0, (0, 1, 2), lambda t: " ".join(words[i - 4] for i in t))
    ids = [4, 5, 6, 7]
    toy = ToyReward(ids, 3, 3, [(0, 1), (2, 3), (1, 0), (3, 2)], beta=0.5, seed=1)
    seqs = enumerate_sequences(ids, 3, 3)
    log_r = toy.log_reward(seqs)
    reward = CompositeLogReward(
        toy.prior,
        toy.task_from_texts({w: 4 + i for i, w in enumerate(words)}),
        beta=0.5,
        gamma=LinearSchedule(1, 1, 0),
        temperature=LinearSchedule(1, 1, 0),
        min_len=0,
        eos_token_id=3,
    )
    cfg = GFNRedTeamConfig.cpu_default().replace(
        max_len=3,
        min_len=0,
        lr=3e-3,
        logz_lr=3e-2,
        total_steps=500,
        warmup_steps=10,
        temp_start=1.0,
        temp_end=1.0,
        buffer_tol=0.0,
        seed_batches=0,
        buffer_priority="log_r",
        kl_coef=0.0,
    )
    tvs = {}
    for arm in ("tb", "reinforce"):
        model = build_tiny_lm("gpt2", vocab_size=8, n_layer=1, n_head=2, d_model=32, seed=1).train()
        g = torch.Generator().manual_seed(1)
        cls = GFNTrainer if arm == "tb" else ReinforceAttackerTrainer
        kw = {} if arm == "tb" else {"score": "log_r"}
        cls(model, prompt, reward, cfg, generator=g, **kw).train()
        tvs[arm] = total_variation(model_log_probs(model.eval(), prompt, seqs), log_r)
    assert tvs["tb"] < 0.1 and tvs["reinforce"] > 0.5
