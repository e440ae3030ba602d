"""Device handling of InvMSAFold: trainers take ``device=``, seeded draws keep their CPU stream.

Without a GPU, the paths a GPU run takes are driven with tensors on the ``meta`` device under
``DeviceGuard`` (``tests/device_guard.py``).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from device_guard import DeviceGuard
from iclr25.methods.invmsafold import (
    IFAR,
    ARPotts,
    DecoderConfig,
    InvMSAFold,
    LatticeEncoder,
    LatticeStructure,
    LatticeWorld,
    PottsParams,
    TrainConfig,
    pad_batch,
    pretrain_ifar,
    subsample_rows,
    train_ifar,
    train_invmsafold,
)
from iclr25.methods.invmsafold.claim import run
from iclr25.methods.invmsafold.metrics import hamming_to, mean_pairwise_hamming

_CFG = DecoderConfig(
    embed_dim=8, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16, rank=2, q=20, dropout=0.0
)


def _square() -> LatticeStructure:
    return LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [1, 1], [1, 0]]))


def _encoder() -> LatticeEncoder:
    return LatticeEncoder(max_len=4, coord_dim=2, d_model=8, n_layers=1, n_heads=2)


def _invmsafold(seed: int = 0) -> InvMSAFold:
    torch.manual_seed(seed)
    return InvMSAFold(_CFG, _encoder())


def _ifar(seed: int = 0) -> IFAR:
    torch.manual_seed(seed)
    return IFAR(_encoder(), q=20, d_model=8, n_layers=1, n_heads=2, dim_feedforward=16)


def _msa() -> torch.Tensor:
    return torch.randint(0, 20, (6, 4), generator=torch.Generator().manual_seed(1))


_TC = TrainConfig(steps=3, lr=1e-2, batch_structures=2, msa_rows=3)


def test_guard_catches_a_cpu_generator_on_another_device() -> None:
    """The falsifier: the pattern the fix removed raises under the guard."""
    g = torch.Generator().manual_seed(0)
    with DeviceGuard(), pytest.raises(AssertionError, match="generator on cpu"):
        torch.rand(3, 1, generator=g, device="meta")
    with DeviceGuard(), pytest.raises(AssertionError, match="tensors on"):
        torch.ones(2, device="meta") + torch.ones(2)


def test_trainers_and_the_claim_take_a_device() -> None:
    for fn in (train_invmsafold, train_ifar, pretrain_ifar, run):
        assert "device" in inspect.signature(fn).parameters, fn.__name__


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_train_invmsafold_on_cpu_equals_the_default(device: str | torch.device) -> None:
    ref, moved = _invmsafold(), _invmsafold()
    a = train_invmsafold(
        ref, [_square()], [_msa()], variant="ar", config=_TC, generator=torch.Generator().manual_seed(0)
    )
    b = train_invmsafold(
        moved,
        [_square()],
        [_msa()],
        variant="ar",
        config=_TC,
        generator=torch.Generator().manual_seed(0),
        device=device,
    )
    assert a == b
    assert {p.device.type for p in moved.parameters()} == {"cpu"}
    for p, q in zip(ref.parameters(), moved.parameters(), strict=True):
        assert torch.equal(p, q)


def test_train_ifar_on_cpu_equals_the_default() -> None:
    ref, moved = _ifar(), _ifar()
    a = train_ifar(ref, [_square()], [_msa()], config=_TC, generator=torch.Generator().manual_seed(0))
    b = train_ifar(
        moved, [_square()], [_msa()], config=_TC, generator=torch.Generator().manual_seed(0), device="cpu"
    )
    assert a == b
    assert next(moved.parameters()).device.type == "cpu"


def test_training_draws_follow_the_data() -> None:
    g = torch.Generator().manual_seed(0)
    msa = _msa().to("meta")
    with DeviceGuard():
        rows = subsample_rows(msa, 5, g)
        x, mask = pad_batch([torch.ones(4, 3, device="meta"), torch.ones(2, 3, device="meta")])
    assert rows.device.type == x.device.type == mask.device.type == "meta"
    assert rows.shape == (5, 4) and mask.shape == (2, 4)


def _params(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(4, 20, generator=g).to(device), torch.randn(2, 4, 20, generator=g).to(device)


def test_potts_samplers_run_on_the_parameters_device() -> None:
    h, V = _params("meta")
    with DeviceGuard():
        ar = ARPotts(h, V, "ACDEFGHIKLMNPQRSTVWY").sample(5, seed=0)
        pw = PottsParams(h, V, "ACDEFGHIKLMNPQRSTVWY").sample_gibbs(5, sweeps=2, burn_in=1, seed=0)
        lp = ARPotts(h, V, "ACDEFGHIKLMNPQRSTVWY").log_prob(torch.zeros(3, 4, dtype=torch.long))
    assert ar.device.type == pw.device.type == lp.device.type == "meta"
    assert ar.shape == pw.shape == (5, 4) and lp.shape == (3,)


def test_potts_sampling_is_the_cpu_stream() -> None:
    """Ancestral sampling uses one uniform per row and site from a CPU generator seeded with ``seed``."""
    h, V = _params("cpu")
    model = ARPotts(h, V, "ACDEFGHIKLMNPQRSTVWY")
    s = model.sample(6, seed=7)
    g = torch.Generator().manual_seed(7)
    r = torch.zeros(6, 2)
    for i in range(4):
        logits = h[i] + (2**-0.5 / max(i, 1)) * (r @ V[:, i])
        p = torch.softmax(logits, -1).cumsum(-1)
        u = torch.rand(6, 1, generator=g) * p[:, -1:]
        assert torch.equal(s[:, i], (p < u).sum(-1).clamp(max=19))
        r += V[:, i, s[:, i]].T


def test_ifar_samples_and_scores_on_its_device() -> None:
    model = _ifar().to("meta").eval()
    with DeviceGuard():
        s = model.sample(_square(), 3, seed=0)
        lp = model.log_prob(_square(), torch.zeros(2, 4, dtype=torch.long))
    assert s.device.type == lp.device.type == "meta"
    assert s.shape == (3, 4) and lp.shape == (2,)


def test_lattice_and_metrics_take_tensors() -> None:
    world = LatticeWorld((3, 3))
    seqs = torch.randint(0, 20, (5, 9), generator=torch.Generator().manual_seed(0))
    assert torch.equal(world.p_nat(seqs, 0), world.p_nat(seqs.numpy(), 0))
    assert mean_pairwise_hamming(seqs) == mean_pairwise_hamming(seqs.numpy())
    assert hamming_to(seqs, seqs[0]) == hamming_to(seqs.numpy(), seqs[0].numpy())
