"""Routing data for NetMoE: synthetic locality traces and a memmap corpus read by global sample id.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025)
builds on the observation (Sec. 3, Fig. 2) that tokens of one training sample show locality in
expert routing. Provided here:

* :func:`synthetic_trace`: per-sample expert preferences ``p_i ~ Dirichlet(beta 1_E)`` mixed as
  ``lam p_i + (1 - lam) q`` with a global ``q`` (uniform); every token draws k distinct experts
  (Gumbel top-k). Small ``beta`` and ``lam = 1``: strong locality; ``lam = 0``: uniform routing.
* :class:`MemmapCorpus`: the paper-scale data path, a tokenised local corpus (NumPy memmap) with
  a deterministic global batch, so every rank can read any sample (and its labels) by global id.

Real routing comes from :mod:`~iclr25.methods.netmoe.text_lm` (a byte-level MoE LM trained on
text that ships with Python packages).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MemmapCorpus", "routing_entropy", "synthetic_trace"]


def synthetic_trace(
    n_samples: int,
    seq_len: int,
    num_experts: int,
    top_k: int = 2,
    *,
    beta: float,
    lam: float = 1.0,
    seed: int | np.random.Generator,
) -> np.ndarray:
    """Routing with tunable per-sample locality.

    Args:
        n_samples: I.
        seq_len: S.
        num_experts: E.
        top_k: k distinct experts per token.
        beta: Dirichlet concentration of a sample's preference (small: concentrated).
        lam: weight of the per-sample preference against the uniform global ``q``.
        seed: an int or a NumPy generator.

    Returns:
        ``expert_ids`` int64 ``[I, S, k]``.

    Example:
        >>> synthetic_trace(2, 3, 8, 2, beta=0.1, seed=0).shape
        (2, 3, 2)
    """
    if beta <= 0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"need beta > 0 and 0 <= lam <= 1, got beta={beta}, lam={lam}")
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k must lie in [1, {num_experts}], got {top_k}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    p = rng.dirichlet(np.full(num_experts, beta), size=n_samples)  # [I, E]
    mix = lam * p + (1.0 - lam) / num_experts  # [I, E]
    gumbel = rng.gumbel(size=(n_samples, seq_len, num_experts))
    keys = np.log(np.maximum(mix, 1e-300))[:, None, :] + gumbel  # [I, S, E]
    return np.argsort(-keys, axis=-1, kind="stable")[..., :top_k].astype(np.int64)


def routing_entropy(expert_ids: np.ndarray, num_experts: int) -> float:
    """Mean over samples of the entropy (nats) of the sample's empirical expert distribution."""
    ids = np.asarray(expert_ids)
    counts = np.stack([np.bincount(r.ravel(), minlength=num_experts) for r in ids]).astype(np.float64)
    prob = counts / counts.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(prob > 0, prob * np.log(prob), 0.0).sum(1)
    return float(ent.mean())


class MemmapCorpus:
    """A tokenised corpus in a flat NumPy memmap, read as a deterministic global batch.

    Sample ``i`` of step ``t`` is the window of ``seq_len + 1`` tokens starting at an offset drawn
    from ``(seed, t)``, so any rank can read any global sample id (inputs and next-token labels),
    which is what a re-placed sample needs on its new device.

    Args:
        path: a raw token file (e.g. written by ``np.ndarray.tofile``).
        seq_len: S.
        dtype: token dtype of the file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the corpus is shorter than one window.

    Example:
        >>> import tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "tok.bin")
        >>> np.arange(100, dtype=np.uint16).tofile(f)
        >>> MemmapCorpus(f, seq_len=4).rows(step=0, sample_ids=np.array([0, 1]), global_batch=8, seed=0).shape
        (2, 5)
    """

    def __init__(self, path: str, seq_len: int, dtype: str = "uint16") -> None:
        import os

        if not os.path.exists(path):
            raise FileNotFoundError(f"corpus file {path!r} does not exist")
        self.tokens = np.memmap(path, dtype=np.dtype(dtype), mode="r")
        if len(self.tokens) < seq_len + 1:
            raise ValueError(f"corpus has {len(self.tokens)} tokens, fewer than one window of {seq_len + 1}")
        self.seq_len = seq_len

    def offsets(self, step: int, global_batch: int, seed: int) -> np.ndarray:
        """Start offsets ``[I]`` of the global batch of ``step``."""
        rng = np.random.default_rng([seed, step])
        return rng.integers(0, len(self.tokens) - self.seq_len, size=global_batch)

    def rows(self, step: int, sample_ids: np.ndarray, global_batch: int, seed: int) -> np.ndarray:
        """Token windows ``[len(sample_ids), S + 1]`` (int64) of the given global sample ids."""
        off = self.offsets(step, global_batch, seed)[np.asarray(sample_ids)]
        idx = off[:, None] + np.arange(self.seq_len + 1)[None, :]  # [n, S+1]
        return np.asarray(self.tokens[idx], dtype=np.int64)
