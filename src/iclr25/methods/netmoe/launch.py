"""Process launch for the expert-parallel layer: local multi-process runs, ``torchrun``, groups.

Supports the distributed setting of *NetMoE: Accelerating MoE Training through Dynamic Sample
Placement* (Liu et al., ICLR 2025), Sec. 2 and 5: expert parallelism over ``N`` nodes of ``G``
devices with intra-node (NVLink) and inter-node (InfiniBand) links. :func:`run` starts
``world_size`` local processes on a free loopback port with collective timeouts (gloo on CPU);
:func:`init_from_env` joins a ``torchrun`` job (gloo or NCCL); :func:`build_groups` makes the
intra- and inter-node subgroups; :func:`measure_bandwidth` times All-to-All over each.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import datetime
import os
import queue as queue_mod
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any

from .cost import Topology

__all__ = ["TORCHRUN_HINT", "build_groups", "free_port", "init_from_env", "measure_bandwidth", "run"]

#: How to launch the demo on one CPU machine (4 processes emulate 2 nodes x 2 devices).
TORCHRUN_HINT = "torchrun --nproc-per-node 4 -m iclr25.methods.netmoe.demo --gpus-per-node 2"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (bind to port 0).

    Raises:
        OSError: no loopback port can be bound.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _worker(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    backend: str,
    collective_timeout_s: float,
    threads: int,
    out: Any,
    args: tuple[Any, ...],
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(threads)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=collective_timeout_s),
        )
        try:
            out.put((rank, True, fn(rank, world_size, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:
        out.put((rank, False, traceback.format_exc()))


def run(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout_s: float = 120.0,
    collective_timeout_s: float = 60.0,
    threads: int = 1,
    start_method: str = "forkserver",
    join_retries: int = 2,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes and return their results.

    Each process joins a process group on a free loopback port (``tcp://127.0.0.1``) with a
    collective timeout, so a rank that waits on a peer that never comes raises instead of hanging.
    A port found free can be taken by another program before the ranks bind it, and on a busy
    machine gloo's mesh set-up can drop a connection; when a rank fails while *joining* the group
    (before ``fn`` ran), the run starts again on a new port, up to ``join_retries`` times.

    Args:
        fn: a picklable module-level function; its return value must be picklable.
        world_size: number of processes.
        *args: extra picklable arguments of ``fn``.
        backend: ``"gloo"`` (CPU) or ``"nccl"`` (GPU).
        timeout_s: wall-clock limit of the whole run; processes left are terminated.
        collective_timeout_s: timeout of every collective.
        threads: torch intra-op threads per process.
        start_method: multiprocessing start method (``"forkserver"`` imports torch once).
        join_retries: new attempts after a failure to form the process group.

    Returns:
        ``[fn(0, ...), fn(1, ...), ...]``.

    Raises:
        RuntimeError: a rank raised (its traceback is included).
        TimeoutError: the run exceeded ``timeout_s``.
    """
    import multiprocessing as mp

    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["torch", "torch.distributed", "iclr25.methods.netmoe"])
    for attempt in range(join_retries + 1):
        try:
            return _run_once(ctx, fn, world_size, args, backend, timeout_s, collective_timeout_s, threads)
        except _JoinError:
            if attempt == join_retries:
                raise
    raise AssertionError("unreachable")


class _JoinError(RuntimeError):
    """A rank failed inside ``init_process_group``: the group never formed and ``fn`` never ran."""


def _run_once(
    ctx: Any,
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...],
    backend: str,
    timeout_s: float,
    collective_timeout_s: float,
    threads: int,
) -> list[Any]:
    port = free_port()
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=(fn, r, world_size, port, backend, collective_timeout_s, threads, out, args),
            daemon=True,
        )
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(results) + len(errors) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"distributed run exceeded {timeout_s:.0f} s")
            try:
                rank, ok, payload = out.get(timeout=min(left, 1.0))
            except queue_mod.Empty:
                if any(p.exitcode not in (None, 0) for p in procs) and out.empty():
                    time.sleep(0.5)
                    if out.empty():
                        codes = [p.exitcode for p in procs]
                        raise RuntimeError(f"a rank died without a result (exit codes {codes})") from None
                continue
            if ok:
                results[rank] = payload
            else:
                errors.append(f"rank {rank}:\n{payload}")
    finally:
        for p in procs:
            p.join(timeout=5.0 if not errors else 0.5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5.0)
    if errors:
        joining = all("in init_process_group" in e for e in errors)
        raise (_JoinError if joining else RuntimeError)("distributed run failed\n" + "\n".join(errors))
    return [results[r] for r in range(world_size)]


def init_from_env(
    backend: str | None = None, timeout_s: float = 300.0, gpus_per_node: int | None = None
) -> Topology:
    """Join the ``torchrun`` job described by the environment and return its topology.

    ``nodes = WORLD_SIZE / gpus_per_node`` with ``gpus_per_node`` defaulting to
    ``LOCAL_WORLD_SIZE`` (on one machine, pass e.g. 2 to emulate 2 nodes x 2 devices).

    Args:
        backend: ``"gloo"``/``"nccl"``; default NCCL when CUDA is available, else gloo.
        timeout_s: collective timeout.
        gpus_per_node: devices per (emulated) node.

    Returns:
        The :class:`Topology`.

    Raises:
        RuntimeError: the process was not started by ``torchrun`` (``WORLD_SIZE``, ``RANK``,
            ``MASTER_ADDR`` or ``MASTER_PORT`` is unset).
        ValueError: the world size is not a multiple of ``gpus_per_node``.
    """
    import torch
    import torch.distributed as dist

    missing = [k for k in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(
            f"not inside a torchrun job ({', '.join(missing)} unset); launch with: {TORCHRUN_HINT}"
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    g = gpus_per_node or local
    if world % g:
        raise ValueError(f"WORLD_SIZE={world} is not a multiple of gpus_per_node={g}")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    topo = Topology(world // g, g)
    topo.check_world(dist.get_world_size())
    return topo


def build_groups(topo: Topology) -> tuple[Any, Any]:
    """The intra-node group of this rank's node and the inter-node group of its local index.

    Every rank must call it (``dist.new_group`` is collective).

    Returns:
        ``(intra_group, inter_group)``.
    """
    import torch.distributed as dist

    topo.check_world(dist.get_world_size())
    rank = dist.get_rank()
    intra, inter = None, None
    for n in range(topo.nodes):
        grp = dist.new_group(topo.devices_of_node(n))
        if topo.node_of(rank) == n:
            intra = grp
    for g in range(topo.gpus_per_node):
        grp = dist.new_group([n * topo.gpus_per_node + g for n in range(topo.nodes)])
        if rank % topo.gpus_per_node == g:
            inter = grp
    return intra, inter


def measure_bandwidth(
    topo: Topology, groups: tuple[Any, Any], *, nbytes: int = 1 << 22, repeats: int = 3, device: str = "cpu"
) -> tuple[float, float]:
    """Time an even ``all_to_all_single`` over each subgroup: ``(bw_intra, bw_inter)`` in bytes/s per device.

    Every rank must call it. A group of size 1 reports ``inf``.
    """
    import torch
    import torch.distributed as dist

    def once(group: Any) -> float:
        size = dist.get_world_size(group)
        if size == 1:
            return float("inf")
        n = max(size, nbytes // 4 // size * size)
        x, y = torch.ones(n, device=device), torch.empty(n, device=device)
        dist.all_to_all_single(y, x, group=group)  # warm-up
        t0 = time.perf_counter()
        for _ in range(repeats):
            dist.all_to_all_single(y, x, group=group)
        if device != "cpu":
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / repeats
        return (n * 4 * (size - 1) / size) / dt

    return once(groups[0]), once(groups[1])
