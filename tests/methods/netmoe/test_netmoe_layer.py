"""The expert-parallel layer on local gloo processes: equivalence, byte counters, edge cases, errors.

Every distributed test runs under ``launch.run`` with a wall-clock timeout, collective timeouts and
a free loopback port; it is skipped when no loopback port can be bound.
"""

from __future__ import annotations

import dataclasses

import netmoe_helpers as hp
import pytest
import torch

from iclr25.methods.netmoe import (
    DenseMoE,
    EquivalenceSpec,
    equivalence_worker,
    global_token_loss,
    placed_labels,
)
from iclr25.methods.netmoe.launch import free_port, run

TIMEOUTS = {"timeout_s": 90.0, "collective_timeout_s": 30.0}


@pytest.fixture(scope="module", autouse=True)
def _loopback() -> None:
    try:
        free_port()
    except OSError:
        pytest.skip("no loopback port can be bound")


def _check(res: dict, moved: bool = True) -> None:
    for name in ("identity", "netmoe"):
        r = res[name]
        assert r["out_err"] <= 1e-6, (name, r)
        assert max(r["grad_expert_err"], r["grad_gate_err"], r["grad_norm_err"]) <= 1e-5, (name, r)
        assert r["loss_err"] <= 1e-6
        assert r["bytes_exact"] == 1.0 and r["placement_agree"] == 1.0
    assert res["netmoe"]["out_err_vs_identity"] <= 1e-6
    if moved:
        assert res["netmoe"]["moved"] > 0
        assert res["stale_labels"]["loss_err"] > 1e-4  # labels left behind: the loss changes


def test_world_size_one_equals_dense() -> None:
    res = run(equivalence_worker, 1, EquivalenceSpec(nodes=1, gpus_per_node=1, samples=4), **TIMEOUTS)[0]
    _check(res, moved=False)
    assert res["identity"]["inter_bytes"] == 0.0


def test_two_ranks_equal_forward_backward_and_bytes() -> None:
    res = run(equivalence_worker, 2, EquivalenceSpec(nodes=2, gpus_per_node=1, samples=8), **TIMEOUTS)
    _check(res[0])
    for name in ("identity", "netmoe"):  # every rank reports the same all-reduced numbers
        a, b = (dict(r[name]) for r in res)
        a.pop("solve_s"), b.pop("solve_s")  # the solver runs on rank 0 only
        assert a == b


@pytest.mark.parametrize("residual", ["expert_side", "migrate"])
def test_four_ranks_two_layer_stack_both_residual_modes(residual: str) -> None:
    spec = EquivalenceSpec(residual=residual, seed=0, layers=2, num_source="predicted")
    res = run(equivalence_worker, 4, spec, **TIMEOUTS)[0]
    _check(res, moved=residual == "expert_side")
    if residual == "expert_side":
        assert res["netmoe"]["inter_bytes"] < res["identity"]["inter_bytes"]


@pytest.mark.parametrize("num_source", ["current", "predicted", "oracle"])
def test_two_rank_stack_every_num_source(num_source: str) -> None:
    spec = EquivalenceSpec(nodes=2, gpus_per_node=1, samples=8, layers=3, num_source=num_source, seed=1)
    _check(run(equivalence_worker, 2, spec, **TIMEOUTS)[0])


def test_stack_prices_next_layer_and_persists_placement() -> None:
    res = run(hp.stack_num_sources, 2, **TIMEOUTS)
    r = res[0]
    # current: the solver sees this layer's counts; predicted: plus the next router on this input;
    # oracle: plus the next layer's true counts. The last layer has no next dispatch.
    assert r["current"]["num_is_routed"] == [True, True]
    assert r["predicted"]["num_minus_routed"][0] == r["predicted"]["next_router_on_input"]
    assert r["predicted"]["num_is_routed"][1]
    assert r["oracle"]["num_minus_routed"][0] == r["oracle"]["next_routed"]
    for src in ("current", "predicted", "oracle"):
        assert r[src]["origin_is_previous_placement"]
    assert all(x["out_err"] <= 1e-6 for x in res)


def test_capacity_drops_by_global_token_id() -> None:
    spec = EquivalenceSpec(nodes=2, gpus_per_node=1, capacity_factor=0.5, seed=2)
    _check(run(equivalence_worker, 2, spec, **TIMEOUTS)[0])


def test_dense_capacity_drops_change_output() -> None:
    g = torch.Generator().manual_seed(0)
    h = torch.randn(4, 8, 16, generator=g)
    full = DenseMoE(16, 16, 4, 2, generator=torch.Generator().manual_seed(1))(h)[0]
    capped = DenseMoE(16, 16, 4, 2, generator=torch.Generator().manual_seed(1), capacity_factor=0.25)(h)[0]
    assert not torch.allclose(full, capped)


@pytest.mark.parametrize("placement", ["identity", "netmoe", "random"])
def test_zero_tokens_on_a_rank_and_idle_experts(placement: str) -> None:
    res = run(hp.skewed_routing, 4, placement, **TIMEOUTS)
    assert res[0]["experts_used"] == [0, 1]
    assert res[2]["received"] == 0 and res[3]["received"] == 0  # no tokens for experts 2 and 3
    assert res[3]["idle_grad_none"] and not res[0]["idle_grad_none"]
    for r in res:
        assert r["out_err"] <= 1e-6 and r["grad_err"] <= 1e-5
        assert r["placement"] == res[0]["placement"]


def test_all_to_all_single_probe() -> None:
    assert run(hp.probe, 3, **TIMEOUTS) == [True, True, True]


def test_split_size_mismatch_raises_on_every_rank() -> None:
    msgs = run(hp.split_mismatch, 2, **TIMEOUTS)
    assert all("disagree" in m for m in msgs), msgs


def test_topology_mismatch_and_uneven_batch_raise() -> None:
    assert all("process group has 2 ranks" in m for m in run(hp.topology_mismatch, 2, **TIMEOUTS))
    assert all("same [I_loc, S]" in m for m in run(hp.uneven_batch, 2, **TIMEOUTS))


def test_callable_placement_and_num_source() -> None:
    res = run(hp.callable_placement, 2, **TIMEOUTS)
    assert res[0]["new_ids"] == [2, 3] and res[1]["new_ids"] == [0, 1]
    assert res[0]["called"] and res[0]["num_rows"] == [[1, 1]] * 4
    assert all(r["out_err"] <= 1e-6 for r in res)


def test_rank_error_is_reported_not_hung() -> None:
    with pytest.raises(RuntimeError, match="not divisible"):
        run(equivalence_worker, 2, EquivalenceSpec(nodes=2, gpus_per_node=1, samples=5), **TIMEOUTS)


def test_labels_and_global_loss_helpers() -> None:
    labels = torch.arange(12).view(4, 3)
    assert placed_labels(labels, torch.tensor([3, 1])).tolist() == [[9, 10, 11], [3, 4, 5]]
    assert float(global_token_loss(torch.tensor(6.0), 3)) == 2.0


@pytest.mark.slow
def test_four_ranks_more_seeds() -> None:
    for seed in range(1, 4):
        spec = dataclasses.replace(EquivalenceSpec(layers=2), seed=seed)
        _check(run(equivalence_worker, 4, spec, **TIMEOUTS)[0])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs >= 2 GPUs")
def test_nccl_two_gpus_equal_forward_backward() -> None:
    spec = EquivalenceSpec(nodes=2, gpus_per_node=1, device="cuda")
    _check(run(equivalence_worker, 2, spec, backend="nccl", **TIMEOUTS)[0])


def _torchrun_demo(*extra: str) -> str:
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    out = subprocess.run(
        [torchrun, "--nproc-per-node", "4", "--master-port", str(free_port()),
         "-m", "iclr25.methods.netmoe.demo", "--gpus-per-node", "2", "--steps", "2", *extra],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
def test_torchrun_demo_on_cpu() -> None:
    """4 gloo processes as 2 nodes x 2 devices: equal outputs, fewer inter-node bytes, balanced plans."""
    import re

    stdout = _torchrun_demo()
    steps = re.findall(
        r"step (\d+): identity: inter ([\d.]+) kB intra ([\d.]+) kB "
        r"netmoe: inter ([\d.]+) kB intra ([\d.]+) kB; moved (\d+)/(\d+) samples; outputs equal: (\w+)",
        stdout,
    )
    assert [int(s[0]) for s in steps] == [0, 1], stdout
    plans = re.findall(r"step (\d+) layer (\d+) placement \(device of samples 0\.\.15\): ([\d ]+)", stdout)
    assert len(plans) == 4, stdout  # 2 steps x 2 layers
    loader = [i // 4 for i in range(16)]  # 4 samples per rank, contiguous ids
    for step, id_inter, id_intra, nm_inter, _nm_intra, moved, total, same in steps:
        assert same == "True" and int(total) == 16
        assert float(id_inter) > 0 and float(id_intra) > 0
        assert float(nm_inter) < float(id_inter)  # NetMoE's objective prices inter-node copies first
        layers = [[int(g) for g in p[2].split()] for p in plans if p[0] == step]
        for where in layers:  # balanced: I / J = 4 samples per device
            assert sorted(where) == sorted(loader), where
        assert int(moved) == sum(a != b for a, b in zip(layers[-1], loader, strict=True))
    # the solve in a background thread gives the same lines, bit for bit
    assert _torchrun_demo("--overlap-solve") == stdout


_TORCHRUN_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def test_init_from_env_outside_torchrun_says_how_to_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr25.methods.netmoe.launch import init_from_env

    for k in _TORCHRUN_VARS:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(RuntimeError, match=r"WORLD_SIZE.*torchrun --nproc-per-node"):
        init_from_env("gloo")


def test_demo_outside_torchrun_exits_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from iclr25.methods.netmoe.demo import main

    for k in _TORCHRUN_VARS:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["--steps", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "torchrun --nproc-per-node 4 -m iclr25.methods.netmoe.demo" in err
    assert "KeyError" not in err


def test_a_failed_join_is_retried_on_a_new_port(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr25.methods.netmoe import launch

    calls: list[int] = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) < 3:
            raise launch._JoinError("distributed run failed\nrank 1: ... in init_process_group ...")
        return ["ok", "ok"]

    monkeypatch.setattr(launch, "_run_once", flaky)
    assert launch.run(equivalence_worker, 2, join_retries=2) == ["ok", "ok"] and len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="init_process_group"):
        launch.run(equivalence_worker, 2, join_retries=1)
    assert len(calls) == 2


def test_overlapped_solve_equals_inline_solve_bit_for_bit() -> None:
    res = run(hp.overlap_vs_inline, 4, **TIMEOUTS)
    for r in res:
        assert r["y_equal"] and r["ids_equal"] and r["input_grad_equal"] and r["grads_equal"], r
        assert r["placements_equal"] and r["links_equal"] and r["wait_recorded"], r
        # a solver error in the background thread reaches every rank, naming the background solve
        assert "placement failed on rank 0" in r["error"], r["error"]
    assert res[0]["moved"] > 0
    assert "background placement solve failed: ValueError: solver exploded" in res[0]["error"]
