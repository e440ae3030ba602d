"""The causal graph of FTCT: letters as vertices, each edge an arithmetic operation.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements Section 3.1 (the
knowledge graph): ``width`` chains of ``depth`` distinct letters merged at level
``merge_pos``; an edge ``(u, v)`` carries ``(op, a)`` with ``op`` in {+, -} and ``a`` in 1..9,
and the child's value is ``v = |u op a| mod modulus``.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from iclr25.methods.ftct.config import FTCTConfig

__all__ = ["LETTERS", "CausalGraph", "apply_edge"]

#: The vertex alphabet in id order: A-Z then a-z (52 letters, as in the paper).
LETTERS: tuple[str, ...] = tuple(string.ascii_uppercase + string.ascii_lowercase)


def apply_edge(value: int, op: str, a: int, modulus: int) -> int:
    """One edge: ``|value op a| mod modulus``.

    Args:
        value: the parent's value.
        op: "+" or "-".
        a: the edge's operand (1..9).
        modulus: the value modulus.

    Returns:
        The child's value.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.1.

    Example:
        >>> apply_edge(3, "-", 5, 200)
        2
    """
    if op == "+":
        out = value + a
    elif op == "-":
        out = value - a
    else:
        raise ValueError(f"op must be '+' or '-', got {op!r}")
    return abs(out) % modulus


@dataclass(frozen=True)
class CausalGraph:
    """A layered causal graph of letters (Section 3.1).

    Args:
        levels: vertices per level, e.g. ``(("Q",), ("B", "X"), ...)`` for ``merge_pos = 0``.
        edges: ``(parent, child) -> (op, a)``.
        roots: admissible root values (the values of level-0 vertices).
        modulus: value modulus.


    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.1.

    Example:
        >>> g = CausalGraph.random(FTCTConfig(), np.random.default_rng(0))
        >>> [len(level) for level in g.levels]
        [1, 2, 2, 2, 2]
        >>> len(g.full_chains())
        2
    """

    levels: tuple[tuple[str, ...], ...]
    edges: dict[tuple[str, str], tuple[str, int]]
    roots: tuple[int, ...]
    modulus: int
    _cache: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def random(cls, cfg: FTCTConfig, rng: np.random.Generator) -> CausalGraph:
        """Draw a graph: ``width`` chains of distinct letters merged at ``cfg.merge_pos``.

        Args:
            cfg: the data config (depth, width, merge_pos, n_letters, roots, modulus).
            rng: source of randomness.

        Returns:
            The graph.
        """
        alphabet = list(LETTERS[: cfg.n_letters])
        picked = rng.choice(len(alphabet), size=cfg.width * cfg.depth, replace=False)
        chains = [
            [alphabet[i] for i in picked[c * cfg.depth : (c + 1) * cfg.depth]] for c in range(cfg.width)
        ]  # width x depth letters
        ops = [
            [("+" if rng.random() < 0.5 else "-", int(rng.integers(1, 10))) for _ in range(cfg.depth - 1)]
            for _ in range(cfg.width)
        ]
        # Every chain shares chain 0's letter at the merge level.
        for c in range(1, cfg.width):
            chains[c][cfg.merge_pos] = chains[0][cfg.merge_pos]
        levels = tuple(
            tuple(dict.fromkeys(chains[c][lvl] for c in range(cfg.width))) for lvl in range(cfg.depth)
        )
        edges: dict[tuple[str, str], tuple[str, int]] = {}
        for c in range(cfg.width):
            for lvl in range(cfg.depth - 1):
                edges[(chains[c][lvl], chains[c][lvl + 1])] = ops[c][lvl]
        roots = tuple(range(cfg.root_low, cfg.root_low + cfg.root_count))
        return cls(levels=levels, edges=edges, roots=roots, modulus=cfg.modulus)

    @property
    def vertices(self) -> tuple[str, ...]:
        """All vertices, level by level."""
        if "__vertices__" not in self._cache:
            self._cache["__vertices__"] = tuple(v for level in self.levels for v in level)  # type: ignore[assignment]
        return self._cache["__vertices__"]  # type: ignore[return-value]

    @property
    def depth(self) -> int:
        """Number of levels (n)."""
        return len(self.levels)

    def level_of(self, v: str) -> int:
        """The level of vertex ``v``."""
        for i, level in enumerate(self.levels):
            if v in level:
                return i
        raise KeyError(f"{v!r} is not a vertex")

    def parents(self, v: str) -> tuple[str, ...]:
        """All parents of ``v`` (two or more only below a merge at a level > 0)."""
        return tuple(u for (u, w) in self.edges if w == v)

    def parent(self, v: str) -> str | None:
        """The parent of ``v`` (None for a root); raises if ``v`` has several."""
        ps = self.parents(v)
        if len(ps) > 1:
            raise ValueError(f"{v!r} has several parents {ps}")
        return ps[0] if ps else None

    def children(self, v: str) -> tuple[str, ...]:
        """The children of ``v``."""
        return tuple(w for (u, w) in self.edges if u == v)

    def admissible_values(self, v: str) -> frozenset[int]:
        """Every value ``v`` can take: roots' range pushed through the edges to ``v``.

        Propagation applies the same ``|.| mod`` map as the values themselves, so the set holds
        exactly the reachable values (with the paper's ranges the map is the identity).
        """
        if v in self._cache:
            return self._cache[v]  # type: ignore[return-value]
        if self.level_of(v) == 0:
            result = frozenset(self.roots)
        else:
            out: set[int] = set()
            for u in self.parents(v):
                op, a = self.edges[(u, v)]
                out.update(apply_edge(x, op, a, self.modulus) for x in self.admissible_values(u))
            result = frozenset(out)
        self._cache[v] = result
        return result

    def all_admissible(self) -> frozenset[int]:
        """The union of every vertex's admissible values."""
        out: set[int] = set()
        for v in self.vertices:
            out |= self.admissible_values(v)
        return frozenset(out)

    def child_chains(self, edge_len: int) -> list[tuple[str, ...]]:
        """All directed paths with ``edge_len`` edges (``edge_len + 1`` vertices), any start.

        Args:
            edge_len: number of edges, >= 0.

        Returns:
            The paths, sorted (deterministic order).
        """
        if edge_len < 0:
            raise ValueError(f"edge_len must be >= 0, got {edge_len}")
        paths = [(v,) for v in self.vertices]
        for _ in range(edge_len):
            paths = [(*p, w) for p in paths for w in self.children(p[-1])]
        return sorted(paths)

    def full_chains(self) -> list[tuple[str, ...]]:
        """The root-to-leaf chains (``depth`` vertices each)."""
        return [c for c in self.child_chains(self.depth - 1) if self.level_of(c[0]) == 0]

    def propagate(self, chain: Sequence[str], root_value: int) -> list[int]:
        """Values along ``chain`` starting from ``root_value`` at ``chain[0]``.

        Args:
            chain: a directed path of the graph.
            root_value: the value of its first vertex.

        Returns:
            One value per vertex.

        Example:
            >>> edges = {("A", "B"): ("-", 3)}
            >>> g = CausalGraph(levels=(("A",), ("B",)), edges=edges, roots=(5,), modulus=200)
            >>> g.propagate(["A", "B"], 5)
            [5, 2]
        """
        values = [int(root_value)]
        for u, v in itertools.pairwise(chain):
            if (u, v) not in self.edges:
                raise ValueError(f"({u!r}, {v!r}) is not an edge")
            op, a = self.edges[(u, v)]
            values.append(apply_edge(values[-1], op, a, self.modulus))
        return values

    def consistent(self, u: str, value_u: int, v: str, value_v: int) -> bool:
        """Whether ``(u, value_u) -> (v, value_v)`` is an edge of the graph with admissible values."""
        if (u, v) not in self.edges or value_u not in self.admissible_values(u):
            return False
        op, a = self.edges[(u, v)]
        return apply_edge(value_u, op, a, self.modulus) == value_v
