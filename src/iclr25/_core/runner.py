"""Run claim checks over seeds: timing, error capture, progress, and a JSON per finished claim.

Each (claim, seed) task runs in this process (``jobs=1``) or in worker processes; a claim's
JSON is written the moment its last seed finishes, so an interrupted run keeps every claim
that finished. An exception inside a claim is recorded as ERROR and the run goes on.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iclr25._core.claims import Claim, Judgement, ProgressFn, RunResult, judge
from iclr25._core.registry import load_claim

__all__ = ["ClaimRun", "SeedRun", "resolve_device", "run_checks", "run_one"]


@dataclass
class SeedRun:
    """One seed of one claim: its result or error, and its wall time."""

    seed: int
    result: RunResult | None
    error: str | None
    seconds: float


@dataclass
class ClaimRun:
    """All seeds of one claim at one budget, with the judgement."""

    claim: Claim
    budget: str
    overrides: dict[str, str]
    device: str
    seeds: list[SeedRun] = field(default_factory=list)
    judgement: Judgement | None = None

    @property
    def seconds(self) -> float:
        """Total wall time over seeds."""
        return sum(s.seconds for s in self.seeds)


def resolve_device(device: str) -> str:
    """Map "auto" to "cuda" when available, else "cpu"; reject unknown names."""
    if device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"--device must be cpu, cuda or auto, got {device!r}")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise ValueError("--device cuda was asked for, but no CUDA device is available")
    return "cpu"


def run_one(
    claim: Claim,
    budget: str,
    seed: int,
    overrides: Mapping[str, str],
    device: str,
    progress: ProgressFn | None = None,
) -> SeedRun:
    """Run one seed, catching any exception into ``SeedRun.error`` (Ctrl-C propagates).

    The thread count is the claim's own (:attr:`Claim.threads`), whatever the number of
    workers, so a seed's numbers do not depend on how the run was split.
    """
    start = time.perf_counter()
    try:
        result = claim.run(budget, seed, overrides, device=device, progress=progress)
        error = None
    except Exception:
        result, error = None, traceback.format_exc()
    return SeedRun(seed=seed, result=result, error=error, seconds=time.perf_counter() - start)


def _worker(
    name: str, budget: str, seed: int, overrides: dict[str, str], device: str, messages: Any
) -> SeedRun:
    def progress(stage: str, done: int, total: int) -> None:
        messages.put((name, seed, stage, done, total))

    return run_one(load_claim(name), budget, seed, overrides, device, progress)


def run_checks(
    claims: Sequence[Claim],
    *,
    budget: str,
    seeds: Mapping[str, Sequence[int]],
    overrides: Mapping[str, str],
    device: str,
    jobs: int = 1,
    on_claim_done: Callable[[ClaimRun], Any] | None = None,
    on_seed_done: Callable[[ClaimRun, SeedRun], Any] | None = None,
    on_progress: Callable[[str, int, str, int, int], Any] | None = None,
) -> list[ClaimRun]:
    """Run every claim over every seed and judge each claim.

    Args:
        claims: the claims to run (configs and overrides are validated before this).
        budget: "smoke", "full" or "long".
        seeds: claim name -> the seeds it runs.
        overrides: ``--set`` overrides shared by all claims.
        device: "cpu" or "cuda".
        jobs: cores to use: seeds run side by side as long as their claims' ``threads`` add up
            to at most ``jobs`` (a claim on 2 threads takes two). Each claim runs on its own
            ``threads`` whatever this is, so the numbers do not depend on it.
        on_claim_done: called with each claim's judged run as soon as its seeds finish
            (the CLI writes that claim's JSON here).
        on_seed_done: called after every seed (the CLI advances its progress bar here).
        on_progress: ``on_progress(claim, seed, stage, done, total)``, relayed from inside long
            claims (from worker processes too).

    Returns:
        One :class:`ClaimRun` per claim, in the order given. On KeyboardInterrupt the claims
        that finished have already been passed to ``on_claim_done``; the interrupt propagates.
    """
    runs = {c.name: ClaimRun(c, budget, dict(overrides), device) for c in claims}

    def record(name: str, seed_run: SeedRun) -> None:
        run = runs[name]
        run.seeds.append(seed_run)
        if on_seed_done:
            on_seed_done(run, seed_run)
        if len(run.seeds) == len(seeds[name]):
            run.seeds.sort(key=lambda s: s.seed)
            run.judgement = judge(
                run.claim, budget, [s.result for s in run.seeds], [s.error for s in run.seeds]
            )
            if on_claim_done:
                on_claim_done(run)

    if jobs <= 1:
        for claim in claims:
            for seed in seeds[claim.name]:

                def progress(stage: str, done: int, total: int, _c=claim.name, _s=seed) -> None:
                    if on_progress:
                        on_progress(_c, _s, stage, done, total)

                record(claim.name, run_one(claim, budget, seed, overrides, device, progress))
        return list(runs.values())

    # ``jobs`` is a number of cores: a seed of a claim that runs on ``threads`` threads takes that
    # many of them, so side-by-side seeds never ask for more threads than there are cores. Seeds
    # start in order; one that does not fit waits while later ones that fit go first.
    todo = [(c, s, min(c.threads, jobs)) for c in claims for s in seeds[c.name]]
    free = jobs
    with mp.Manager() as manager, cf.ProcessPoolExecutor(max_workers=jobs) as pool:
        messages = manager.Queue()

        def drain() -> None:
            while True:
                try:
                    message = messages.get_nowait()
                except queue.Empty:
                    return
                if on_progress:
                    on_progress(*message)

        running: dict[cf.Future[SeedRun], tuple[str, int]] = {}
        try:
            while todo or running:
                for task in list(todo):
                    claim, seed, cores = task
                    if cores <= free:
                        fut = pool.submit(
                            _worker, claim.name, budget, seed, dict(overrides), device, messages
                        )
                        running[fut] = (claim.name, cores)
                        free -= cores
                        todo.remove(task)
                done, _ = cf.wait(running, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                drain()
                for fut in done:
                    name, cores = running.pop(fut)
                    free += cores
                    record(name, fut.result())
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return list(runs.values())
