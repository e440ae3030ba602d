"""REINFORCE + KL with several KL weights on the claim's attack world (one seed), to see whether
plain RL collapses onto few trigger modes when its KL anchor to the prior is weaker.

    python experiments/gfn_redteam_kl_sweep.py --seed 100 --kl 0.1 0.01 0.0
"""

from __future__ import annotations

import argparse
import copy
import math
import time

import numpy as np
import torch

from iclr25._core.seeding import numpy_rng
from iclr25.common.data.attack_world import META_PROMPT, AttackWorld, AttackWorldConfig
from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
from iclr25.methods.gfn_redteam import (
    AttackPrompt,
    ClaimConfig,
    ReinforceAttackerTrainer,
    attach_lora,
    mle_finetune,
    redteam_metrics,
)
from iclr25.methods.gfn_redteam.claim import _reward, _sample_texts, _tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--kl", type=float, nargs="+", default=[0.1, 0.01, 0.0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg, seed = ClaimConfig(), args.seed
    tcfg = cfg.train
    world = AttackWorld(AttackWorldConfig(n_modes=cfg.n_modes, n_shared=5, seed=seed))
    clf = world.fit_classifier()
    tok = build_word_tokenizer(world.vocab)
    prompt = AttackPrompt.from_tokenizer(tok, META_PROMPT)
    corpus = world.corpus(cfg.sft_corpus, numpy_rng(seed, 21))
    sft = build_tiny_lm(
        "gpt2", vocab_size=len(tok), n_layer=cfg.n_layer, n_head=2, d_model=cfg.d_model, seed=seed
    )
    seqs = [_tokens(tok, c, prompt.eos_token_id) for c in corpus]
    sft, _ = mle_finetune(
        sft,
        prompt,
        seqs,
        steps=cfg.sft_steps,
        batch_size=64,
        lr=cfg.sft_lr,
        warmup_steps=10,
        generator=torch.Generator().manual_seed(seed),
    )
    steps = tcfg.total_steps + tcfg.seed_batches
    min_hits = math.ceil(cfg.mode_min_share * cfg.eval_samples)
    for kl in args.kl:
        t0 = time.perf_counter()
        arm_cfg = tcfg.replace(total_steps=steps, kl_coef=kl)
        policy = attach_lora(copy.deepcopy(sft), r=arm_cfg.lora_r, alpha=arm_cfg.lora_alpha, seed=seed)
        reward = _reward(policy, prompt, world.victim(seed), clf, arm_cfg)
        h = ReinforceAttackerTrainer(
            policy, prompt, reward, arm_cfg, generator=torch.Generator().manual_seed(seed)
        )
        h = h.train()
        texts = _sample_texts(
            policy, prompt, cfg.eval_samples, tcfg.max_len, torch.Generator().manual_seed(seed)
        )
        res = redteam_metrics(texts, world.victim(seed + 1), clf, triggers=world.triggers, min_hits=min_hits)
        succ = np.array(h.mean_tox) > 0.5
        last = float(succ[-10 * tcfg.batch_size :].mean())
        share = {t: sum(t in a.split() for a in texts) / len(texts) for t in world.triggers}
        print(
            f"kl={kl}: toxicity {res['toxicity_rate']:.3f} modes {res['modes_covered']:.0f} "
            f"unique {res['unique_successful']:.0f} diversity {res['diversity']:.3f} "
            f"train success (last 10 steps) {last:.2f} top trigger share {max(share.values()):.2f} "
            f"({time.perf_counter() - t0:.0f} s)"
        )


if __name__ == "__main__":
    main()
