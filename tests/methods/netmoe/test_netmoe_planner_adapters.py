"""The background-thread planner and the Megatron-core adapter (tested against fake dispatchers).

No timing assertions: a solve that "is not ready" is held back by a ``threading.Event``.
"""

from __future__ import annotations

import importlib.util
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from iclr25.methods.netmoe import (
    AsyncPlanner,
    Placement,
    Topology,
    assignment_counts,
    identity_placement,
    solve_joint,
    solve_two_stage,
)
from iclr25.methods.netmoe.adapters import (
    ExpertParallelLayout,
    load_megatron_dispatcher_class,
    plan_expert_parallel,
    plan_from_routing_maps,
    register_megatron_hook,
    routing_to_counts,
)
from iclr25.methods.netmoe.routing_data import synthetic_trace

TOPO = Topology(2, 4, bytes_per_token=2048)


def _num(seed: int, n: int = 32) -> np.ndarray:
    ids = synthetic_trace(n, 64, 16, 2, beta=0.1, seed=seed)
    return assignment_counts(ids, np.arange(16) // 2, 8)


class _Gated:
    """A fake solver that signals when it starts and returns only once ``gate`` is set."""

    def __init__(self, result: Placement | Exception) -> None:
        self.started, self.gate, self.result = threading.Event(), threading.Event(), result
        self.seen: np.ndarray | None = None

    def __call__(self, num: np.ndarray, topo: Topology) -> Placement:
        self.started.set()
        assert self.gate.wait(timeout=30.0), "test gate never opened"
        self.seen = num.copy()
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


# -- AsyncPlanner ----------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", [solve_two_stage, solve_joint])
def test_async_result_equals_synchronous_solve_bit_for_bit(solver) -> None:
    with AsyncPlanner(TOPO, solver) as planner:
        for seed in range(4):
            num = _num(seed)
            planner.submit(num)
            got = planner.wait().device_of_sample
            want = solver(num, TOPO).device_of_sample
            assert got.dtype == want.dtype and np.array_equal(got, want)
        assert planner.applied == 4 and not planner.pending


def test_unready_solve_leaves_placement_unchanged_until_the_boundary_after_it_finishes() -> None:
    initial = identity_placement(8, Topology(1, 2))
    target = Placement(np.array([1, 1, 1, 1, 0, 0, 0, 0]))
    fake = _Gated(target)
    with AsyncPlanner(Topology(1, 2), fake, initial=initial) as planner:
        fut = planner.submit(np.zeros((8, 2), dtype=np.int64))
        assert fake.started.wait(timeout=30.0)
        for _ in range(3):  # boundaries while the solve is still running
            assert planner.poll() is False
            assert planner.current is initial and planner.pending and not planner.ready
        with pytest.raises(TimeoutError):
            planner.wait(timeout=0.0)
        assert planner.pending  # a wait that timed out keeps the solve
        fake.gate.set()
        fut.result(timeout=30.0)  # the thread finished; the result is applied only at a boundary
        assert planner.current is initial and planner.ready
        assert planner.poll() is True
        assert np.array_equal(planner.current.device_of_sample, target.device_of_sample)
        assert planner.applied == 1 and not planner.pending and planner.poll() is False


def test_submitted_counts_are_a_snapshot() -> None:
    num = _num(1, 8)
    want = num.copy()
    fake = _Gated(identity_placement(8, TOPO))
    with AsyncPlanner(TOPO, fake) as planner:
        planner.submit(num)
        num[:] = 0  # the caller reuses its buffer while the thread runs
        fake.gate.set()
        planner.wait()
    assert np.array_equal(fake.seen, want)


@pytest.mark.parametrize(
    ("result", "match"),
    [
        (ValueError("no feasible placement"), r"background placement solve failed: ValueError: no feasible"),
        (
            Placement(np.zeros(8, dtype=np.int64)),
            r"background placement solve failed: ValueError: .*not balanced",
        ),
    ],
)
def test_worker_errors_surface_at_the_boundary(result, match: str) -> None:
    fake = _Gated(result)
    fake.gate.set()
    with AsyncPlanner(Topology(1, 2), fake) as planner:
        fut = planner.submit(np.zeros((8, 2), dtype=np.int64))
        fut.exception(timeout=30.0)  # the error stays in the thread until the boundary
        with pytest.raises(RuntimeError, match=match) as info:
            planner.poll()
        assert isinstance(info.value.__cause__, ValueError)
        assert not planner.pending and planner.current is None
        planner.submit(np.zeros((8, 2), dtype=np.int64))  # the planner is usable again
        with pytest.raises(RuntimeError, match=match):
            planner.wait()


def test_planner_misuse_raises_clear_errors() -> None:
    fake = _Gated(identity_placement(4, Topology(1, 2)))
    planner = AsyncPlanner(Topology(1, 2), fake)
    with pytest.raises(RuntimeError, match="call submit"):
        planner.wait()
    planner.submit(np.zeros((4, 2), dtype=np.int64))
    with pytest.raises(RuntimeError, match="still pending"):
        planner.submit(np.zeros((4, 2), dtype=np.int64))
    planner.discard()
    assert not planner.pending
    fake.gate.set()
    planner.close()
    with pytest.raises(RuntimeError, match="closed"):
        planner.submit(np.zeros((4, 2), dtype=np.int64))
    with pytest.raises(TypeError, match="Topology"):
        AsyncPlanner((1, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        AsyncPlanner(Topology(1, 2)).submit(np.zeros(4))


# -- Megatron-core adapter -------------------------------------------------------------------------


def test_routing_to_counts_by_hand() -> None:
    lay = ExpertParallelLayout(ep_size=2, ranks_per_node=1, num_experts=4)  # experts 0,1 on rank 0
    # S = 2, B = 2, sequence-first: tokens (s0 b0), (s0 b1), (s1 b0), (s1 b1)
    rm = torch.tensor(
        [[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 0, 0, 1]],
        dtype=torch.bool,
    )
    # sample 0: tokens 0 and 2 -> rank 0: 2 + 1, rank 1: 0 + 1; sample 1: tokens 1 and 3 -> 0, 2 + 1
    assert routing_to_counts(rm, lay, micro_batch=2).tolist() == [[3, 1], [0, 3]]
    # batch-first reading of the same rows: sample 0 = tokens 0, 1; sample 1 = tokens 2, 3
    assert routing_to_counts(rm, lay, micro_batch=2, sequence_first=False).tolist() == [[2, 2], [1, 2]]
    probs = rm.float() * 0.5
    assert routing_to_counts(None, lay, micro_batch=2, probs=probs).tolist() == [[3, 1], [0, 3]]
    with pytest.raises(ValueError, match="micro_batch"):
        routing_to_counts(rm, lay, micro_batch=3)
    with pytest.raises(ValueError, match="tokens, 4"):
        routing_to_counts(rm[:, :3], lay, micro_batch=2)
    with pytest.raises(ValueError, match="routing_map or probs"):
        routing_to_counts(None, lay, micro_batch=2)


def test_layout_validation() -> None:
    lay = ExpertParallelLayout(8, 4, 16)
    assert lay.expert_to_rank().tolist() == [r for r in range(8) for _ in range(2)]
    assert (lay.topology().nodes, lay.topology().gpus_per_node) == (2, 4)
    with pytest.raises(ValueError, match="multiple of ranks_per_node"):
        ExpertParallelLayout(6, 4, 12)
    with pytest.raises(ValueError, match="not divisible by ep_size"):
        ExpertParallelLayout(4, 2, 6)
    with pytest.raises(ValueError, match="positive integer"):
        ExpertParallelLayout(0, 1, 4)


def _maps(seed: int, ep: int = 4, seq: int = 16, batch: int = 4, experts: int = 8) -> list[torch.Tensor]:
    """Per-rank routing maps with per-sample locality: each sample prefers two experts."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(ep):
        fav = torch.randint(0, experts, (batch, 2), generator=g)
        logits = torch.randn(seq, batch, experts, generator=g)
        logits.scatter_add_(2, fav[None].expand(seq, -1, -1), torch.full((seq, batch, 2), 3.0))
        top = logits.topk(2, dim=-1).indices.view(seq * batch, 2)  # [S*B, k], sequence-first
        out.append(torch.zeros(seq * batch, experts, dtype=torch.bool).scatter_(1, top, True))
    return out


def test_plan_from_routing_maps_is_netmoe_on_the_gathered_counts() -> None:
    lay = ExpertParallelLayout(4, 2, 8)
    maps, nxt = _maps(0), _maps(1)
    plan = plan_from_routing_maps(maps, lay, micro_batch=4)
    counts = np.concatenate([routing_to_counts(m, lay, micro_batch=4) for m in maps])  # [I, J]
    assert np.array_equal(plan.num, counts)
    want = solve_two_stage(counts, lay.topology())
    assert np.array_equal(plan.placement.device_of_sample, want.device_of_sample)
    assert plan.expert_to_rank.tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and plan.moved() > 0
    # the next layer's dispatch priced too (Eq. 5/6/10): the counts add
    both = plan_from_routing_maps(maps, lay, micro_batch=4, next_routing_maps=nxt)
    assert np.array_equal(
        both.num, counts + np.concatenate([routing_to_counts(m, lay, micro_batch=4) for m in nxt])
    )
    # token destinations follow the samples: token s * B + b of rank r goes where sample r * B + b goes
    dest = plan.token_destinations(1, 16)
    assert dest.shape == (64,)
    assert dest.view(16, 4)[0].tolist() == plan.placement.device_of_sample[4:8].tolist()
    assert (dest.view(16, 4) == dest.view(16, 4)[0]).all()
    assert sorted(np.concatenate([plan.samples_on(r) for r in range(4)]).tolist()) == list(range(16))
    assert (
        plan.sample_permutation().tolist()
        == np.argsort(plan.placement.device_of_sample, kind="stable").tolist()
    )
    with pytest.raises(ValueError, match="one per rank"):
        plan_from_routing_maps(maps[:3], lay, micro_batch=4)
    with pytest.raises(ValueError, match="counts must be"):
        plan_expert_parallel(np.zeros((6, 3)), lay)


class _OldApiDispatcher:
    """Megatron-core's older All-to-All dispatcher surface: token_permutation / token_unpermutation."""

    def __init__(self, ep_size: int = 4, experts: int = 8) -> None:
        self.ep_size, self.tp_size, self.ep_group = ep_size, 1, None
        self.config = SimpleNamespace(num_moe_experts=experts, moe_router_topk=2)
        self.num_experts = experts
        self.num_local_experts = experts // ep_size
        self.local_expert_indices = list(range(self.num_local_experts))  # rank 0's block
        self.calls: list[tuple] = []

    def token_permutation(self, hidden_states, probs, routing_map):
        self.calls.append(("dispatch", hidden_states.shape))
        return hidden_states.view(-1, hidden_states.shape[-1]), routing_map.sum(0), probs

    def token_unpermutation(self, expert_output, bias=None):
        self.calls.append(("combine",))
        return expert_output, bias


class _NewApiDispatcher(_OldApiDispatcher):
    """The newer split surface: dispatch_preprocess stores routing_map and hidden_shape."""

    token_permutation = None  # type: ignore[assignment]
    token_unpermutation = None  # type: ignore[assignment]

    def dispatch_preprocess(self, hidden_states, routing_map, probs):
        self.hidden_shape, self.routing_map, self.probs = hidden_states.shape, routing_map, probs
        return hidden_states.view(-1, hidden_states.shape[-1]), probs

    def token_dispatch(self, tokens, probs):
        self.calls.append(("dispatch", tokens.shape))
        return tokens, probs

    def token_combine(self, hidden_states):
        self.calls.append(("combine",))
        return hidden_states


def _other_ranks(maps: list[torch.Tensor], lay: ExpertParallelLayout):
    """A gather that plays ranks 1..J-1 and checks rank 0's own counts."""
    counts = [routing_to_counts(m, lay, micro_batch=4) for m in maps]

    def gather(local: np.ndarray) -> np.ndarray:
        assert np.array_equal(local, counts[0])
        return np.stack(counts)

    return gather


def test_hook_on_old_api_dispatcher_plans_and_passes_the_call_through() -> None:
    d = _OldApiDispatcher()
    lay = ExpertParallelLayout(4, 2, 8)
    maps = _maps(2)
    seen = []
    hook = register_megatron_hook(d, ranks_per_node=2, gather=_other_ranks(maps, lay), on_plan=seen.append)
    hidden = torch.randn(16, 4, 6)  # [S, B, H]
    out = d.token_permutation(hidden, maps[0].float(), routing_map=maps[0])
    assert torch.equal(out[0], hidden.view(-1, 6)) and d.calls == [("dispatch", (16, 4, 6))]
    want = plan_from_routing_maps(maps, lay, micro_batch=4)
    assert len(seen) == 1 and seen[0] is hook.last
    assert np.array_equal(hook.last.placement.device_of_sample, want.placement.device_of_sample)
    assert hook.dispatch_name == "token_permutation" and hook.combine_name == "token_unpermutation"
    hook.remove()
    assert "token_permutation" not in vars(d)
    d.token_permutation(hidden, maps[0].float(), maps[0])
    assert len(hook.plans) == 1  # no longer hooked


def test_hook_on_new_api_overlaps_the_solve_until_the_combine() -> None:
    lay = ExpertParallelLayout(4, 2, 8)
    maps = _maps(3)
    want = plan_from_routing_maps(maps, lay, micro_batch=4)
    gate = _Gated(want.placement)
    d = _NewApiDispatcher()
    hook = register_megatron_hook(
        d, ranks_per_node=2, gather=_other_ranks(maps, lay), overlap=True, solver=gate
    )
    assert hook.dispatch_name == "token_dispatch" and hook.combine_name == "token_combine"
    hidden = torch.randn(16, 4, 6)
    tokens, probs = d.dispatch_preprocess(hidden, maps[0], maps[0].float())
    d.token_dispatch(tokens, probs)
    assert gate.started.wait(timeout=30.0)
    assert hook.plans == []  # solving in the background while the experts would run
    gate.gate.set()
    d.token_combine(tokens)
    assert np.array_equal(gate.seen, want.num)
    assert np.array_equal(hook.last.placement.device_of_sample, want.placement.device_of_sample)
    assert d.calls == [("dispatch", (64, 6)), ("combine",)]
    hook.remove()
    assert "token_dispatch" not in vars(d) and "token_combine" not in vars(d)


def test_hook_errors_are_clear() -> None:
    with pytest.raises(TypeError, match="neither token_permutation nor token_dispatch"):
        register_megatron_hook(SimpleNamespace(ep_size=1, num_experts=2), ranks_per_node=1)
    with pytest.raises(TypeError, match="ep_size"):
        register_megatron_hook(object(), ranks_per_node=1)
    d = _OldApiDispatcher()
    d.tp_size = 2
    with pytest.raises(ValueError, match="tensor parallelism"):
        register_megatron_hook(d, ranks_per_node=2)
    d = _OldApiDispatcher()
    d.local_expert_indices = [0, 2]
    with pytest.raises(ValueError, match="contiguous"):
        register_megatron_hook(d, ranks_per_node=2)
    d = _OldApiDispatcher()
    hook = register_megatron_hook(d, ranks_per_node=2)  # ep_size 4, no process group, no gather
    with pytest.raises(ValueError, match="pass gather="):
        d.token_permutation(torch.zeros(16, 4, 6), None, _maps(0)[0])
    hook.remove()
    lay = ExpertParallelLayout(4, 2, 8)

    def broken(num: np.ndarray, topo: Topology) -> Placement:
        return Placement(np.zeros(num.shape[0], dtype=np.int64))  # unbalanced

    register_megatron_hook(d, ranks_per_node=2, gather=_other_ranks(_maps(4), lay), solver=broken)
    with pytest.raises(RuntimeError, match=r"placement failed.*not balanced"):
        d.token_permutation(torch.zeros(16, 4, 6), None, _maps(4)[0])


@pytest.mark.skipif(importlib.util.find_spec("megatron") is not None, reason="megatron-core is installed")
def test_megatron_import_is_lazy_with_a_clear_message() -> None:
    with pytest.raises(ImportError, match="pip install megatron-core"):
        load_megatron_dispatcher_class()


def test_readme_paper_scale_planner_snippet_runs(tmp_path) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    import iclr25.methods.netmoe as pkg

    text = (Path(pkg.__file__).parent / "README.md").read_text()
    usage = text.split("## Usage", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", usage, flags=re.S) if "AsyncPlanner(" in b]
    assert len(blocks) == 1
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True True"


def test_hook_gathers_and_broadcasts_on_gloo() -> None:
    """4 gloo ranks as 2 nodes x 2, each with its own dispatcher; no gather= given."""
    import netmoe_helpers as hp

    from iclr25.methods.netmoe.launch import free_port, run

    try:
        free_port()
    except OSError:
        pytest.skip("no loopback port can be bound")
    res = run(hp.megatron_hook_distributed, 4, timeout_s=90.0, collective_timeout_s=30.0)
    for r in res:
        assert r[False] == r["want"] and r[True] == r["want"], r
