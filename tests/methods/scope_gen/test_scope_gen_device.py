"""Devices: the report task's tiny LM trains where it is told, and the claim passes its device on."""

import dataclasses

import numpy as np
import pytest

from iclr25.methods.scope_gen import ReportTask
from iclr25.methods.scope_gen import claim as claim_mod
from iclr25.methods.scope_gen.config import ScopeGenCheckConfig

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("rouge_score")

#: A small LM and few steps: the point is where things live, not what the model learns.
TINY = dict(steps=3, batch_size=8, n_train=64, n_layer=1, d_model=16, seed=0)


def _weights(generator) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in generator.model.parameters()])


def test_train_generator_on_cpu_matches_the_default():
    task = ReportTask(n_prompts=4, seed=0)
    default = task.train_generator(**TINY)
    cpu = task.train_generator(**TINY, device="cpu")
    as_device = task.train_generator(**TINY, device=torch.device("cpu"))
    for gen in (default, cpu, as_device):
        assert gen.device == "cpu"
        assert all(p.device.type == "cpu" for p in gen.model.parameters())
    # The batch order comes from a CPU generator whatever the device: the same weights bit for bit.
    assert torch.equal(_weights(default), _weights(cpu))
    assert torch.equal(_weights(default), _weights(as_device))
    items = cpu.sample_batch(task.prompts, 2, np.random.default_rng(0))
    assert items == default.sample_batch(task.prompts, 2, np.random.default_rng(0))


def test_train_generator_on_meta_mixes_no_devices():
    # Meta tensors carry no data, so any CPU tensor fed to the meta model would raise.
    task = ReportTask(n_prompts=4, seed=0)
    state = torch.get_rng_state()
    gen = task.train_generator(**TINY, device="meta")
    assert torch.equal(state, torch.get_rng_state())  # the CPU stream is forked and restored
    assert gen.device == "meta"
    assert all(p.device.type == "meta" for p in gen.model.parameters())


def test_claim_passes_its_device_to_the_report_task(monkeypatch):
    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    class FakeReportTask:
        def __init__(self, **kwargs):
            pass

        def train_generator(self, *, steps, seed, device="cpu"):
            seen["train_generator"] = device
            return "generator"

        def to_arrays(self, generator, m, rng):
            raise Stop

    cfg = dataclasses.replace(ScopeGenCheckConfig(), tasks=("reports",))
    monkeypatch.setattr(claim_mod, "ReportTask", FakeReportTask)
    with pytest.raises(Stop):
        claim_mod.run(cfg, seed=0, device="meta")
    assert seen["train_generator"] == "meta"
