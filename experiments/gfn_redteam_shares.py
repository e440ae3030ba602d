"""GFlowNet red-teaming: do the GFN sampler's trigger shares approach the target's with more steps?

Trains the claim's SFT prior and one GFN arm (TB + replay buffer) for ``--steps`` steps and, every
``--every`` steps, evaluates 512 attacks at T = 1: toxicity rate, the total variation of the
successful attacks' trigger shares to the target's (``world.trigger_probs``), their effective
number of modes, and the same read on the replay buffer's successful items.

    python experiments/gfn_redteam_shares.py --seed 0 --steps 1000 --every 250

With ``--mle-oracle`` it instead fits the SFT attacker by MLE (the smoothing recipe) to attacks of
the oracle sampler (the SFT prior rejection-sampled with the true trigger rule, i.e. the target's
trigger shares) and reads the fitted sampler's trigger shares: can a trained sampler of this size
keep the target's shares at all?
"""

from __future__ import annotations

import argparse
import copy
import json
import math

import numpy as np
import torch

from iclr25._core.seeding import numpy_rng
from iclr25.common.data.attack_world import META_PROMPT, AttackWorld, AttackWorldConfig
from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
from iclr25.methods.gfn_redteam import (
    AttackPrompt,
    ClaimConfig,
    GFNTrainer,
    attach_lora,
    effective_modes,
    mle_finetune,
    mode_shares,
    redteam_metrics,
    shares_tv,
)
from iclr25.methods.gfn_redteam.claim import _reward, _sample_texts, _tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--mle-oracle", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    cfg = ClaimConfig()
    seed = args.seed
    tcfg = cfg.train.replace(total_steps=args.steps, temp_steps=args.steps // 2)
    world = AttackWorld(AttackWorldConfig(n_modes=8, n_shared=5, seed=seed))
    target = np.asarray(world.trigger_probs[:8])
    target = target / target.sum()
    clf = world.fit_classifier()
    tok = build_word_tokenizer(world.vocab)
    prompt = AttackPrompt.from_tokenizer(tok, META_PROMPT)
    corpus = world.corpus(cfg.sft_corpus, numpy_rng(seed, 21))
    sft = build_tiny_lm(
        "gpt2", vocab_size=len(tok), n_layer=cfg.n_layer, n_head=2, d_model=cfg.d_model, seed=seed
    )
    sft, _ = mle_finetune(
        sft,
        prompt,
        [_tokens(tok, c, prompt.eos_token_id) for c in corpus],
        steps=cfg.sft_steps,
        batch_size=64,
        lr=cfg.sft_lr,
        warmup_steps=10,
        generator=torch.Generator().manual_seed(seed),
    )
    if args.mle_oracle:
        g = torch.Generator().manual_seed(seed)
        data: list[str] = []
        while len(data) < 2000:
            data += [t for t in _sample_texts(sft, prompt, 256, tcfg.max_len, g) if world.modes_of(t)]
        for name, texts in (("oracle", data[:512]),):
            res = redteam_metrics(texts, world.victim(1), clf, triggers=world.triggers, target_shares=target)
            print(name, {k: round(res[k], 4) for k in ("toxicity_rate", "mode_tv", "mode_neff")})
        seqs = list(dict.fromkeys(_tokens(tok, t, prompt.eos_token_id) for t in data))
        fitted, _ = mle_finetune(
            sft,
            prompt,
            seqs,
            steps=tcfg.mle_steps,
            batch_size=tcfg.mle_batch,
            lr=tcfg.mle_lr,
            warmup_steps=tcfg.mle_warmup,
            weight_decay=tcfg.mle_weight_decay,
            generator=g,
            copy_model=True,
        )
        texts = _sample_texts(fitted, prompt, 512, tcfg.max_len, g)
        res = redteam_metrics(texts, world.victim(2), clf, triggers=world.triggers, target_shares=target)
        print(
            "mle_on_oracle",
            len(seqs),
            {k: round(res[k], 4) for k in ("toxicity_rate", "mode_tv", "mode_neff", "triggers_per_success")},
        )
        return
    policy = attach_lora(copy.deepcopy(sft), r=tcfg.lora_r, alpha=tcfg.lora_alpha, seed=seed * 1000 + 1)
    reward = _reward(policy, prompt, world.victim(seed * 1000 + 1), clf, tcfg)
    trainer = GFNTrainer(
        policy, prompt, reward, tcfg, generator=torch.Generator().manual_seed(seed * 1000 + 1)
    )
    print(f"target N_eff {effective_modes(target):.3f}")
    for step in range(args.steps):
        trainer.step(step)
        if (step + 1) % args.every == 0:
            policy.eval()
            texts = _sample_texts(policy, prompt, 512, tcfg.max_len, torch.Generator().manual_seed(step))
            policy.train()
            res = redteam_metrics(
                texts, world.victim(step), clf, triggers=world.triggers, target_shares=target, min_hits=6
            )
            items = [it for it in trainer.buffer.items if math.exp(it.log_c) > 0.5]
            buf = mode_shares([it.text for it in items], [True] * len(items), list(world.triggers))
            row = {
                "step": step + 1,
                **{k: round(res[k], 4) for k in ("toxicity_rate", "mode_tv", "mode_neff", "single_mode_tv")},
                "triggers_per_success": round(res["triggers_per_success"], 3),
                "buffer_items": len(trainer.buffer),
                "buffer_tv": round(shares_tv(buf, target), 4),
                "buffer_neff": round(effective_modes(buf), 3),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
