"""Pair construction: pool sizes, counts, kinds, lazy uniform sampling, determinism."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from iclr25.methods.ditto import (
    DittoConfig,
    SampleCache,
    build_ditto_pairs,
    pair_targets,
    pool_sizes,
    to_trl_rows,
)


def _cache(n_prompts: int, n: int, steps: list[int]) -> SampleCache:
    c = SampleCache()
    for s in steps:
        for k in range(n_prompts):
            for j in range(n):
                c.add(s, k, [100 + s, k, j], truncated=False)  # unique ids encode (step, prompt, j)
    return c


DEMOS = {k: (1, k) for k in range(8)}


@pytest.mark.parametrize("t", [1, 2, 4])
def test_pool_sizes(t: int) -> None:
    n = 10
    c = _cache(1, n, [10 * s for s in range(t)])
    assert pool_sizes([0], c) == (n, n * (t - 1), n * n * t * (t - 1) // 2)
    if t == 4:
        assert pool_sizes([0], c)[2] == 600


def test_counts_are_rounded_fractions_capped_by_pool() -> None:
    cfg = DittoConfig.paper()
    assert pair_targets(8, cfg) == (17, 5, 2)
    c = _cache(8, 10, [0, 10, 20])
    pairs = build_ditto_pairs(list(range(8)), DEMOS, c, cfg, np.random.default_rng(0))
    assert Counter(p.kind for p in pairs) == {"expert": 17, "replay": 5, "intermodel": 2}
    small = _cache(1, 2, [0, 10])  # |E| = 2, |R| = 2, |I| = 4; targets 2, 1, 0 for one prompt
    got = Counter(p.kind for p in build_ditto_pairs([0], DEMOS, small, cfg, np.random.default_rng(0)))
    assert got == {"expert": 2, "replay": 1}
    big = dataclasses.replace(cfg, rescale_batch=10)  # targets 7, 2, 1 -> capped at 2, 2, 1
    got = Counter(p.kind for p in build_ditto_pairs([0], DEMOS, small, big, np.random.default_rng(0)))
    assert got == {"expert": 2, "replay": 2, "intermodel": 1}


def test_iteration_one_has_expert_pairs_only() -> None:
    pairs = build_ditto_pairs(
        list(range(8)), DEMOS, _cache(8, 10, [0]), DittoConfig.paper(), np.random.default_rng(0)
    )
    assert {p.kind for p in pairs} == {"expert"} and len(pairs) == 17


def test_demo_is_chosen_and_later_beats_earlier() -> None:
    c = _cache(8, 10, [0, 10, 20, 30])
    cfg = dataclasses.replace(DittoConfig.paper(), rescale_batch=20)
    pairs = build_ditto_pairs(list(range(8)), DEMOS, c, cfg, np.random.default_rng(1))
    for p in pairs:
        if p.kind in ("expert", "replay"):
            assert p.chosen_ids == DEMOS[p.prompt_key] and p.steps[0] == -1
            assert p.rejected_ids[0] - 100 == p.steps[1]
            assert (p.steps[1] == 30) == (p.kind == "expert")
        else:
            assert p.steps[0] > p.steps[1]
            assert p.chosen_ids[0] - 100 == p.steps[0] and p.rejected_ids[0] - 100 == p.steps[1]
        assert p.chosen_ids[1] == p.prompt_key or p.kind != "intermodel"
    keys = [(p.kind, p.chosen_ids, p.rejected_ids) for p in pairs]
    assert len(keys) == len(set(keys))  # no duplicates


def test_lazy_intermodel_sampling_is_uniform_over_the_pool() -> None:
    """Pools of unequal blocks (steps with 1, 2 and 3 samples): chi-square against uniform."""
    c = SampleCache()
    for s, n in ((0, 1), (10, 2), (20, 3)):
        for j in range(n):
            c.add(s, 0, [s, j], truncated=False)
    # pool: (10,0): 2, (20,0): 3, (20,10): 6 -> 11 pairs
    assert pool_sizes([0], c)[2] == 11
    cfg = dataclasses.replace(
        DittoConfig.paper(), frac_expert=0.0, frac_replay=0.0, frac_intermodel=1.0, rescale_batch=1
    )
    rng = np.random.default_rng(0)
    counts: Counter = Counter()
    for _ in range(4400):
        (p,) = build_ditto_pairs([0], DEMOS, c, cfg, rng)
        counts[(p.chosen_ids, p.rejected_ids)] += 1
    assert len(counts) == 11
    assert chisquare(list(counts.values())).pvalue > 0.001


def test_same_seed_same_pairs_and_trl_rows() -> None:
    c = _cache(8, 10, [0, 10, 20])
    a = build_ditto_pairs(list(range(8)), DEMOS, c, DittoConfig.paper(), np.random.default_rng(5))
    b = build_ditto_pairs(list(range(8)), DEMOS, c, DittoConfig.paper(), np.random.default_rng(5))
    assert a == b
    rows = to_trl_rows(a[:2], {k: f"prompt {k}" for k in range(8)}, lambda ids: " ".join(map(str, ids)))
    assert set(rows[0]) == {"prompt", "chosen", "rejected"} and rows[0]["prompt"].startswith("prompt")


def test_flipped_pair_swaps_sides() -> None:
    (p, *_) = build_ditto_pairs([0], DEMOS, _cache(1, 3, [0]), DittoConfig.paper(), np.random.default_rng(0))
    f = p.flipped()
    assert (f.chosen_ids, f.rejected_ids, f.steps) == (p.rejected_ids, p.chosen_ids, p.steps[::-1])


def test_bad_input() -> None:
    c = _cache(2, 2, [0])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        build_ditto_pairs([0, 0], DEMOS, c, DittoConfig.paper(), rng)
    with pytest.raises(ValueError):
        build_ditto_pairs([0], {}, c, DittoConfig.paper(), rng)
    with pytest.raises(ValueError):
        build_ditto_pairs([0], DEMOS, SampleCache(), DittoConfig.paper(), rng)


@pytest.mark.parametrize(
    "change",
    [
        {"frac_expert": 0.5},  # sums to 0.8
        {"frac_expert": 1.1, "frac_replay": -0.1, "frac_intermodel": 0.0},
        {"resample_every": 0},
        {"samples_per_prompt": 0},
        {"beta": 0.0},
    ],
)
def test_config_validation(change: dict) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(DittoConfig.paper(), **change).validate()


def test_presets() -> None:
    p = DittoConfig.paper()
    p.validate()
    for cfg in (DittoConfig.cpu_default(), p.spin(), p.offline_dpo(), p.sft_only(), p.flipped()):
        cfg.validate()
    assert p.offline_dpo().resample_every >= p.max_steps and not p.offline_dpo().use_replay
    assert p.spin().reference == "previous_iteration" and p.sft_only().max_steps == 0
