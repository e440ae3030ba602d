"""The placement solver in a background thread, overlapped with the step and applied at a boundary.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025,
Sec. 4) keeps the solver off the critical path: a layer's placement only acts in that layer's
combine All-to-All, so the solve can run while the dispatch All-to-All and the expert compute
proceed, and its result is applied when it is ready. :class:`AsyncPlanner` does that with a
``concurrent.futures.ThreadPoolExecutor``: :meth:`AsyncPlanner.submit` starts a solve on a
snapshot of the counts and returns at once; at the next step boundary :meth:`AsyncPlanner.poll`
applies the result if the solve has finished and otherwise leaves the current placement as it
is, while :meth:`AsyncPlanner.wait` blocks until the result is there (what a combine that needs
the placement does). A solver error is raised at the boundary, as a ``RuntimeError`` that names
the background solve and chains the original exception.

The thread pays off because SciPy's assignment solver and torch's compute and collectives run in
native code; no speed-up is claimed or measured here (the solver time is reported separately).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any

import numpy as np

from .cost import Topology
from .solve import Placement, solve_two_stage

__all__ = ["AsyncPlanner"]

Solver = Callable[[np.ndarray, Topology], Placement]


class AsyncPlanner:
    """Solve the next placement in a background thread; apply it at a step boundary when ready.

    One solve is in flight at a time. The counts are copied when submitted, so the caller may
    reuse its buffer while the thread runs. Every result is validated (balanced, devices in
    range) in the thread, so an invalid placement surfaces like any other solver error.

    Args:
        topology: the cluster the placements are for.
        solver: ``(num [I, J], topology) -> Placement``; NetMoE's two-stage KM by default.
        initial: the placement in force before any result is applied (e.g. the loader's).
        executor: a ``ThreadPoolExecutor`` to run on; by default the planner owns a one-thread
            pool, shut down by :meth:`close` (or on leaving a ``with`` block).

    Attributes:
        current: the placement in force (``None`` until one is applied when no ``initial``).
        applied: how many results have been applied.
        last_solve_s: wall-clock seconds the last applied solve ran in its thread.

    Example:
        >>> num = np.array([[0, 6], [6, 0], [5, 1], [1, 5]])
        >>> with AsyncPlanner(Topology(1, 2)) as planner:
        ...     _ = planner.submit(num)  # runs while the step computes
        ...     planner.wait().device_of_sample.tolist()  # the boundary that needs it
        [1, 0, 0, 1]
    """

    def __init__(
        self,
        topology: Topology,
        solver: Solver = solve_two_stage,
        *,
        initial: Placement | None = None,
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        if not isinstance(topology, Topology):
            raise TypeError(f"topology must be a Topology, got {type(topology).__name__}")
        if not callable(solver):
            raise TypeError(f"solver must be callable, got {solver!r}")
        if initial is not None:
            initial.validate(topology)
        self.topology, self.solver = topology, solver
        self.current: Placement | None = initial
        self.applied = 0
        self.last_solve_s = 0.0
        self._own = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="netmoe-solve")
        self._future: Future[tuple[Placement, float]] | None = None
        self._closed = False

    # -- state ---------------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        """A solve was submitted and its result (or error) not yet collected."""
        return self._future is not None

    @property
    def ready(self) -> bool:
        """The submitted solve has finished (its result waits for the next boundary)."""
        return self._future is not None and self._future.done()

    # -- submit / boundary ---------------------------------------------------------------------
    def submit(self, num: np.ndarray, *, solver: Solver | None = None) -> Future[tuple[Placement, float]]:
        """Start solving the placement for ``num [I, J]`` in the background; returns at once.

        Args:
            num: assignment counts the solver prices (copied now).
            solver: overrides the planner's solver for this solve.

        Returns:
            The future of ``(placement, solve seconds)``; :meth:`poll` or :meth:`wait` applies it.

        Raises:
            RuntimeError: the planner is closed, or the previous result was not collected yet
                (call :meth:`poll` or :meth:`wait` first: results are applied in order).
        """
        if self._closed:
            raise RuntimeError("AsyncPlanner is closed")
        if self._future is not None:
            raise RuntimeError(
                "a placement solve is still pending; collect it with poll() or wait() before submitting"
            )
        snapshot = np.array(num, copy=True)
        if snapshot.ndim != 2:
            raise ValueError(f"num must have shape [I, J], got {snapshot.shape}")
        fn = self.solver if solver is None else solver
        self._future = self._executor.submit(self._solve, fn, snapshot)
        return self._future

    def _solve(self, fn: Solver, num: np.ndarray) -> tuple[Placement, float]:
        t0 = time.perf_counter()
        placement = fn(num, self.topology)
        if not isinstance(placement, Placement):
            raise TypeError(f"the solver returned {type(placement).__name__}, not a Placement")
        placement.validate(self.topology)
        return placement, time.perf_counter() - t0

    def poll(self) -> bool:
        """Step boundary: apply the result if the solve has finished, else keep the current placement.

        Returns:
            True when a new placement was applied (it is now :attr:`current`).

        Raises:
            RuntimeError: the background solve raised (the original error is chained).
        """
        if self._future is None or not self._future.done():
            return False
        self._collect(None)
        return True

    def wait(self, timeout: float | None = None) -> Placement:
        """Block until the pending solve finishes, apply it and return it.

        Args:
            timeout: seconds to wait at most (None: no limit).

        Returns:
            The applied placement (:attr:`current`).

        Raises:
            RuntimeError: nothing was submitted, or the background solve raised (chained).
            TimeoutError: the solve did not finish within ``timeout``; it stays pending.
        """
        if self._future is None:
            raise RuntimeError("no placement solve was submitted; call submit() first")
        self._collect(timeout)
        assert self.current is not None
        return self.current

    def _collect(self, timeout: float | None) -> None:
        fut = self._future
        assert fut is not None
        done, _ = futures_wait([fut], timeout=timeout)
        if not done:  # still running: it stays pending
            raise TimeoutError(f"the placement solve did not finish within {timeout} s")
        self._future = None
        err = fut.exception()
        if err is not None:
            raise RuntimeError(f"the background placement solve failed: {type(err).__name__}: {err}") from err
        placement, seconds = fut.result()
        self.current = placement
        self.applied += 1
        self.last_solve_s = seconds

    def discard(self) -> None:
        """Drop the pending solve, if any, without applying it (e.g. after a step that failed)."""
        if self._future is not None:
            self._future.cancel()  # a solve already running finishes in its thread, unused
            self._future = None

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Shut the planner's own thread pool down (a pending solve is waited for, its result dropped)."""
        if not self._closed and self._own:
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._closed = True

    def __enter__(self) -> AsyncPlanner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
