"""Protocols of SCOPE-Gen: generators, similarities and lazy, memoised admissibility oracles.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660), Sec. 2: the black-box interfaces the method needs — a sampler
``y ~ p(y | x)``, a quality ``q(y)``, a similarity ``s(y, y')`` and a costly admissibility
function ``A(x, y) ∈ {0, 1}`` whose number of evaluations is the method's cost (Sec. 5,
"admissibility checks").

The oracles are lazy (queried only when a stage asks) and memoised under a canonical key, so
duplicates of one item share one label and one evaluation. ``calls`` counts every query,
``unique_calls`` every evaluation of the underlying function.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "AdmissibilityOracle",
    "ArrayOracle",
    "Generator",
    "OracleBudgetError",
    "Similarity",
    "canonical_key",
]

#: ``similarity(items) -> (k, k)`` array in [0, 1]; 1 means duplicate.
Similarity = Callable[[Sequence[Any]], np.ndarray]


@runtime_checkable
class Generator(Protocol):
    """A black-box conditional generator with a quality function."""

    def sample(self, prompt: Any, n: int, rng: np.random.Generator) -> Sequence[Any]:
        """Draw ``n`` i.i.d. samples for ``prompt`` using ``rng``."""
        ...

    def quality(self, prompt: Any, items: Sequence[Any]) -> np.ndarray:
        """Quality ``q(y)`` of each item, shape ``(len(items),)``."""
        ...


class OracleBudgetError(RuntimeError):
    """The oracle was asked for more evaluations than its budget allows."""


def canonical_key(item: Any) -> Hashable:
    """The default memo key: whitespace-normalised lower-case text, tuples for arrays.

    Example:
        >>> canonical_key("  The  Answer ")
        'the answer'
    """
    if isinstance(item, str):
        return " ".join(item.split()).lower()
    if isinstance(item, np.ndarray):
        return (item.shape, tuple(item.ravel().tolist()))
    if isinstance(item, (list, tuple)):
        return tuple(canonical_key(x) for x in item)
    return item


def _as_label(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"the admissibility function must return a bool, got {type(value).__name__} {value!r}")


class AdmissibilityOracle:
    """A lazy, memoised, counting wrapper around an admissibility function ``A(x, y)``.

    Args:
        fn: ``fn(prompt, item) -> bool``.
        key: canonical item key (default :func:`canonical_key`); items with equal keys share
            one label (e.g. canonical SMILES, normalised strings).
        prompt_key: canonical prompt key (default :func:`canonical_key`).
        budget: maximum number of evaluations of ``fn``; exceeding it raises
            :class:`OracleBudgetError`. ``None`` means unlimited.

    Attributes:
        calls: every query, memo hits included.
        unique_calls: evaluations of ``fn`` (memo misses).

    Example:
        >>> oracle = AdmissibilityOracle(lambda x, y: y == "4")
        >>> oracle("2+2", "4"), oracle("2+2", " 4 "), oracle("2+2", "5")
        (True, True, False)
        >>> oracle.calls, oracle.unique_calls
        (3, 2)
    """

    def __init__(
        self,
        fn: Callable[[Any, Any], bool],
        key: Callable[[Any], Hashable] | None = None,
        prompt_key: Callable[[Any], Hashable] | None = None,
        budget: int | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        if budget is not None and budget < 0:
            raise ValueError(f"budget must be non-negative, got {budget}")
        self.fn = fn
        self.key = key or canonical_key
        self.prompt_key = prompt_key or canonical_key
        self.budget = budget
        self.reset()

    def reset(self) -> None:
        """Forget every label and zero the counters."""
        self._memo: dict[tuple[Hashable, Hashable], bool] = {}
        self.calls = 0
        self.unique_calls = 0

    def __call__(self, prompt: Any, item: Any) -> bool:
        """``A(prompt, item)``, evaluated at most once per canonical (prompt, item) pair."""
        self.calls += 1
        k = (self.prompt_key(prompt), self.key(item))
        if k in self._memo:
            return self._memo[k]
        if self.budget is not None and self.unique_calls >= self.budget:
            raise OracleBudgetError(f"admissibility budget of {self.budget} evaluations exhausted")
        label = _as_label(self.fn(prompt, item))
        self.unique_calls += 1
        self._memo[k] = label
        return label


class ArrayOracle:
    """Stored labels behind the counting, memoised oracle interface (offline data).

    Item ``(i, j)`` is sample ``j`` of instance ``i``; with ``keys``, samples of one instance
    that share a key count as one evaluation.

    Args:
        labels: admissibility labels, boolean (or 0/1).
        keys: optional integer item keys per sample (duplicates share a key).
        budget: maximum number of unique evaluations; ``None`` means unlimited.

    Shape:
        labels: (n, m); keys: (n, m).

    Example:
        >>> oracle = ArrayOracle(np.array([[False, True, True]]), keys=np.array([[0, 1, 1]]))
        >>> oracle.query(np.array([0, 0, 0]), np.array([0, 1, 2])).tolist()
        [False, True, True]
        >>> oracle.calls, oracle.unique_calls
        (3, 2)
    """

    def __init__(self, labels: np.ndarray, keys: np.ndarray | None = None, budget: int | None = None) -> None:
        lab = np.asarray(labels)
        if lab.ndim != 2:
            raise ValueError(f"labels must be (n, m), got shape {lab.shape}")
        if lab.dtype != bool:
            if not np.issubdtype(lab.dtype, np.number) or not np.isin(lab, (0, 1)).all():
                raise TypeError("labels must be boolean (or only 0 and 1)")
            lab = lab.astype(bool)
        self.labels = lab
        n, m = lab.shape
        if keys is None:
            rep = np.broadcast_to(np.arange(m), (n, m))
        else:
            k = np.asarray(keys)
            if k.shape != lab.shape:
                raise ValueError(f"keys shape {k.shape} does not match labels shape {lab.shape}")
            # rep[i, j]: the first position of instance i holding the same key as (i, j).
            eq = k[:, :, None] == k[:, None, :]  # (n, m, m)
            rep = np.argmax(eq, axis=2)
            if not (lab[np.arange(n)[:, None], rep] == lab).all():
                raise ValueError("samples with the same key have different labels")
        self._rep = np.ascontiguousarray(rep)
        if budget is not None and budget < 0:
            raise ValueError(f"budget must be non-negative, got {budget}")
        self.budget = budget
        self.reset()

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, m)`` of the stored labels."""
        return self.labels.shape

    def reset(self) -> None:
        """Forget every label and zero the counters."""
        self._seen = np.zeros(self.labels.shape, dtype=bool)
        self.calls = 0
        self.unique_calls = 0

    def subset(self, rows: np.ndarray) -> ArrayOracle:
        """A fresh oracle (zero counts) over the instances ``rows``."""
        out = ArrayOracle.__new__(ArrayOracle)
        out.labels = self.labels[rows]
        out._rep = self._rep[rows]
        out.budget = self.budget
        out.reset()
        return out

    def query(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Labels of samples ``(rows[t], cols[t])``, counting each query and each new key.

        Shape:
            rows, cols: (T,) -> (T,) bool.
        """
        rows = np.asarray(rows, dtype=int).ravel()
        cols = np.asarray(cols, dtype=int).ravel()
        if rows.shape != cols.shape:
            raise ValueError(f"rows {rows.shape} and cols {cols.shape} differ in shape")
        reps = self._rep[rows, cols]
        new = np.unique(rows * self.labels.shape[1] + reps)
        new = new[~self._seen.ravel()[new]]
        if self.budget is not None and self.unique_calls + new.size > self.budget:
            raise OracleBudgetError(f"admissibility budget of {self.budget} evaluations exhausted")
        self._seen.ravel()[new] = True
        self.calls += int(rows.size)
        self.unique_calls += int(new.size)
        return self.labels[rows, cols]

    def __call__(self, row: int, col: int) -> bool:
        """The label of sample ``col`` of instance ``row``."""
        return bool(self.query(np.array([row]), np.array([col]))[0])
