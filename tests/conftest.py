"""Test setup: CPU only (but under ``-m gpu``), offline, 2 threads, fixed seeds; the CLI tests' fake claim."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: pytest.Config) -> None:
    # Tests run on the CPU whatever the machine has; only the GPU suite (``pytest -m gpu``) sees
    # the GPUs. CUDA reads the variable when it first starts, which is later than this.
    if (config.option.markexpr or "").strip() != "gpu":
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


# Imported on purpose by the CLI tests to show a missing extra; doctest collection must skip it.
collect_ignore = ["fake_claim_needs_extra.py"]


@pytest.fixture(autouse=True, scope="session")
def _torch_threads() -> None:
    import torch

    torch.set_num_threads(2)


@pytest.fixture
def one_thread():
    """One torch thread for tiny models (more only spin on a busy machine); restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


_SMOKE: dict[str, tuple] = {}


@pytest.fixture(scope="session")
def smoke_runs():
    """``smoke_runs(name) -> (run_a, run_b)``: a method's smoke claim run twice at seed 0, cached
    for the whole session so the contract suite and the method's own tests share one pair."""
    from iclr25._core.registry import load_claim

    def get(name: str) -> tuple:
        if name not in _SMOKE:
            claim = load_claim(name)
            _SMOKE[name] = (claim.run("smoke", seed=0), claim.run("smoke", seed=0))
        return _SMOKE[name]

    return get


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch):
    """Register the fast fake claims of ``fake_claim.py`` as methods ``fake`` and ``fake_broken``."""
    from iclr25._core import registry

    table = dict(registry.REGISTRY)
    table["fake"] = registry.Entry(
        "fake",
        "fake_claim:CLAIM",
        "A fake paper",
        "fake claim",
        smoke_s=0.1,
        full_s=0.1,
        long_s=0.3,
        demo="fake_claim:demo",
        artefacts=(registry.Artefact("fake", "toy", "fake_claim:pretrain_fake", "a scalar", expected_s=1.0),),
    )
    table["fake_broken"] = registry.Entry(
        "fake_broken", "fake_claim:BROKEN", "A fake paper", "always raises", smoke_s=0.1
    )
    table["fake_interrupt"] = registry.Entry(
        "fake_interrupt", "fake_claim:INTERRUPTED", "A fake paper", "Ctrl-C", smoke_s=0.1
    )
    table["fake_wide"] = registry.Entry(
        "fake_wide", "fake_claim:WIDE", "A fake paper", "two threads", smoke_s=0.1, threads=2
    )
    table["fake_extra"] = registry.Entry(
        "fake_extra", "fake_claim_needs_extra:CLAIM", "A fake paper", "needs an extra", extra="fakeextra"
    )
    monkeypatch.setattr(registry, "REGISTRY", table)
    import iclr25.cli

    monkeypatch.setattr(iclr25.cli, "REGISTRY", table)
    return table
