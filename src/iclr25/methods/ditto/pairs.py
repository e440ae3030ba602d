"""The sample cache and DITTO's preference-pair construction (pure Python and NumPy).

DITTO ranks demonstrations above every policy sample, and later policy samples above earlier ones
(D_E ≻ D_t ≻ … ≻ D_0, Sec. 3 of Shaikh et al., "Aligning Language Models with Demonstrated
Feedback", ICLR 2025, arXiv:2406.00888). For a batch of distinct prompts X_B with latest resample
step s*, three pools of comparisons exist:

- expert E = {(x, y_E, y) : y ∈ C_{s*}(x)}, size n per prompt;
- replay R = {(x, y_E, y) : y ∈ C_s(x), s < s*}, size n (t − 1) at iteration t;
- inter-model I = {(x, y_a, y_b) : y_a ∈ C_a(x), y_b ∈ C_b(x), a > b}, size n² t (t − 1) / 2.

From a super-batch of S = rescale_batch · |X_B| pairs, min(|E|, round(f_E S)), min(|R|, round(f_R
S)) and min(|I|, round(f_I S)) are drawn without replacement, uniformly over each whole pool. The
inter-model pool is never materialised: indices are drawn over its size and decoded lazily.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .config import DittoConfig

__all__ = [
    "PairKind",
    "PreferencePair",
    "Sample",
    "SampleCache",
    "build_ditto_pairs",
    "pair_targets",
    "pool_sizes",
    "to_trl_rows",
]

PairKind = Literal["expert", "replay", "intermodel"]
#: The step recorded for a demonstration in a pair (it precedes every sample).
DEMO_STEP = -1


@dataclass(frozen=True)
class Sample:
    """One cached policy sample: its response token ids and whether it hit the length cap.

    A finished sample ends with the EOS id; a truncated one (``truncated=True``) has none.
    """

    token_ids: tuple[int, ...]
    truncated: bool


@dataclass(frozen=True)
class PreferencePair:
    """One comparison ``chosen ≻ rejected`` for a prompt.

    Args:
        prompt_key: which prompt (the demonstration's key).
        chosen_ids: response token ids of the preferred side.
        rejected_ids: response token ids of the other side.
        kind: "expert", "replay" or "intermodel".
        steps: (step of chosen, step of rejected); a demonstration has step -1.
    """

    prompt_key: Hashable
    chosen_ids: tuple[int, ...]
    rejected_ids: tuple[int, ...]
    kind: PairKind
    steps: tuple[int, int]

    def flipped(self) -> PreferencePair:
        """The same comparison with the preference reversed (the negative control)."""
        return PreferencePair(
            self.prompt_key, self.rejected_ids, self.chosen_ids, self.kind, self.steps[::-1]
        )


class SampleCache:
    """Policy samples keyed by (resample step, prompt key). One cache per trainer instance.

    Example:
        >>> c = SampleCache()
        >>> c.add(0, "p", [5, 3], truncated=False)
        >>> c.steps(), len(c.samples(0, "p"))
        ([0], 1)
    """

    def __init__(self) -> None:
        self._data: dict[int, dict[Hashable, list[Sample]]] = {}

    def add(self, step: int, prompt_key: Hashable, token_ids: Sequence[int], truncated: bool) -> None:
        """Store one sample drawn at optimiser step ``step`` for ``prompt_key``."""
        if step < 0:
            raise ValueError(f"step must be non-negative, got {step}")
        self._data.setdefault(step, {}).setdefault(prompt_key, []).append(Sample(tuple(token_ids), truncated))

    def steps(self) -> list[int]:
        """Resample steps present, ascending."""
        return sorted(self._data)

    def samples(self, step: int, prompt_key: Hashable) -> list[Sample]:
        """The samples of ``prompt_key`` drawn at ``step`` (empty if none)."""
        return list(self._data.get(step, {}).get(prompt_key, []))

    def __len__(self) -> int:
        return sum(len(v) for per in self._data.values() for v in per.values())


def pool_sizes(prompt_keys: Sequence[Hashable], cache: SampleCache) -> tuple[int, int, int]:
    """Sizes of the expert, replay and inter-model pools for a batch of prompts."""
    steps = cache.steps()
    if not steps:
        return 0, 0, 0
    e = r = i = 0
    for key in prompt_keys:
        counts = [len(cache.samples(s, key)) for s in steps]
        e += counts[-1]
        r += sum(counts[:-1])
        # pairs (a, b) of steps with a > b: sum over b < a of |C_a| |C_b|
        i += sum(counts[a] * counts[b] for a in range(len(steps)) for b in range(a))
    return e, r, i


def pair_targets(n_prompts: int, cfg: DittoConfig) -> tuple[int, int, int]:
    """round(f · S) pairs of each kind before capping, S = rescale_batch · n_prompts."""
    s = cfg.rescale_batch * n_prompts
    return (
        round(cfg.frac_expert * s),
        round(cfg.frac_replay * s) if cfg.use_replay else 0,
        round(cfg.frac_intermodel * s) if cfg.use_intermodel else 0,
    )


def build_ditto_pairs(
    prompt_keys: Sequence[Hashable],
    demos: Mapping[Hashable, Sequence[int]],
    cache: SampleCache,
    cfg: DittoConfig,
    rng: np.random.Generator,
) -> list[PreferencePair]:
    """Draw one super-batch of preference pairs for ``prompt_keys`` (Sec. 3.3 of the paper).

    Args:
        prompt_keys: distinct prompts of the batch, X_B.
        demos: prompt key -> the demonstration's response token ids y_E.
        cache: the samples drawn so far.
        cfg: fractions, super-batch factor and the replay / inter-model switches.
        rng: the only source of randomness.

    Returns:
        Expert pairs, then replay, then inter-model pairs.

    Raises:
        ValueError: repeated prompt keys, a key without a demonstration, or an empty cache.
    """
    if len(set(prompt_keys)) != len(prompt_keys):
        raise ValueError("prompt_keys must be distinct")
    missing = [k for k in prompt_keys if k not in demos]
    if missing:
        raise ValueError(f"no demonstration for prompt keys {missing[:3]}")
    steps = cache.steps()
    if not steps:
        raise ValueError("the sample cache is empty: resample before building pairs")
    last = steps[-1]
    te, tr, ti = pair_targets(len(prompt_keys), cfg)
    pairs: list[PreferencePair] = []

    # expert: (key, sample) over the latest step, flattened in key order
    expert = [(k, s) for k in prompt_keys for s in cache.samples(last, k)]
    for idx in _choose(len(expert), te, rng):
        k, s = expert[idx]
        pairs.append(PreferencePair(k, tuple(demos[k]), s.token_ids, "expert", (DEMO_STEP, last)))

    # replay: every older step's samples
    replay = [(k, st, s) for k in prompt_keys for st in steps[:-1] for s in cache.samples(st, k)]
    for idx in _choose(len(replay), tr, rng):
        k, st, s = replay[idx]
        pairs.append(PreferencePair(k, tuple(demos[k]), s.token_ids, "replay", (DEMO_STEP, st)))

    # inter-model: blocks (key, a, b) of |C_a| x |C_b| pairs, decoded lazily from a flat index
    blocks: list[tuple[Hashable, int, int, int, int]] = []
    ends: list[int] = []
    total = 0
    for k in prompt_keys:
        for ia, a in enumerate(steps):
            for b in steps[:ia]:
                na, nb = len(cache.samples(a, k)), len(cache.samples(b, k))
                if na * nb:
                    total += na * nb
                    blocks.append((k, a, b, na, nb))
                    ends.append(total)
    for idx in _choose(total, ti, rng):
        j = bisect.bisect_right(ends, idx)
        k, a, b, na, nb = blocks[j]
        r = idx - (ends[j - 1] if j else 0)
        ya, yb = cache.samples(a, k)[r // nb], cache.samples(b, k)[r % nb]
        pairs.append(PreferencePair(k, ya.token_ids, yb.token_ids, "intermodel", (a, b)))
    return pairs


def _choose(pool: int, target: int, rng: np.random.Generator) -> list[int]:
    """min(pool, target) distinct indices drawn uniformly from range(pool), in draw order."""
    k = min(pool, target)
    if k <= 0:
        return []
    return [int(i) for i in rng.choice(pool, size=k, replace=False)]


def to_trl_rows(
    pairs: Sequence[PreferencePair],
    prompts: Mapping[Hashable, str],
    decode: Callable[[Sequence[int]], str],
) -> list[dict[str, str]]:
    """TRL's preference schema: one ``{"prompt", "chosen", "rejected"}`` dict per pair.

    Args:
        pairs: the pairs.
        prompts: prompt key -> the prompt text as the model sees it (chat template applied).
        decode: token ids -> text (e.g. ``tokenizer.decode``).
    """
    return [
        {"prompt": prompts[p.prompt_key], "chosen": decode(p.chosen_ids), "rejected": decode(p.rejected_ids)}
        for p in pairs
    ]
