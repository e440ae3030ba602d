"""Device handling: a GPU smoke suite and the CPU-side checks of the same code paths.

``pytest -m gpu`` runs every registered method's smoke claim end to end with ``device="cuda"``
(plus a few library paths whose claims keep the work on the CPU); each test skips when no CUDA
device is visible. The unmarked tests run anywhere: they drive the random draws and device moves
that used to break on a GPU with tensors on the ``meta`` device, under :class:`DeviceGuard`, which
fails any op whose tensors sit on two devices or whose generator lives elsewhere than its output.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from device_guard import DeviceGuard
from iclr25._core.registry import REGISTRY, MissingExtraError, load_claim

_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not _CUDA, reason="no CUDA device visible")
gpu = [pytest.mark.gpu, needs_cuda]


# ---------------------------------------------------------------------------------------------
# the guard (device_guard.py)
# ---------------------------------------------------------------------------------------------


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_guard_catches_a_cpu_generator_feeding_another_device() -> None:
    """The falsifier of the guard tests: the patterns the fixes removed raise under it."""
    z0 = torch.zeros(4, 8, device="meta")
    with DeviceGuard(), pytest.raises(AssertionError, match="generator on cpu"):
        torch.rand(z0.shape, generator=_gen(), device=z0.device)  # the old q_sample draw
    with DeviceGuard(), pytest.raises(AssertionError, match="generator on cpu"):
        torch.multinomial(torch.ones(2, 3, device="meta"), 1, generator=_gen())  # the old LM decode
    with DeviceGuard(), pytest.raises(AssertionError, match="tensors on"):
        torch.nn.functional.linear(
            torch.ones(2, 3), torch.ones(4, 3, device="meta")
        )  # CPU input, model off-CPU
    with DeviceGuard():  # what the fixes do instead: draw on the generator's device, then move
        torch.rand(z0.shape, generator=_gen()).to(z0.device)
        torch.ones(3, device="meta")[torch.tensor([0, 2])]  # a CPU index is fine on CUDA


# ---------------------------------------------------------------------------------------------
# CPU-side checks of the fixed paths (meta tensors under the guard)
# ---------------------------------------------------------------------------------------------


def _meta(fn: Callable[[], Any]) -> Any:
    with DeviceGuard():
        return fn()


def test_bigr_draws_follow_the_tensors() -> None:
    from iclr25.common import rng
    from iclr25.methods.bigr.transcoder import q_sample

    z0 = torch.zeros(4, 8, device="meta")
    t = torch.ones(4, dtype=torch.long, device="meta")
    assert _meta(lambda: q_sample(z0, t, 10, generator=_gen())).device.type == "meta"
    assert _meta(lambda: rng.randint(0, 4, (3,), generator=_gen(), device="meta")).device.type == "meta"
    # on the CPU the helpers are the plain draws, bit for bit (Bernoulli and multinomial draws
    # copy their probabilities to the generator's device, which a meta tensor cannot)
    p = torch.rand(3, 5, generator=_gen(1))
    assert torch.equal(rng.rand(3, 4, generator=_gen()), torch.rand(3, 4, generator=_gen()))
    assert torch.equal(rng.randperm(9, generator=_gen()), torch.randperm(9, generator=_gen()))
    assert torch.equal(rng.bernoulli(p, generator=_gen()), torch.bernoulli(p, generator=_gen()))
    assert torch.equal(rng.multinomial(p, 2, generator=_gen()), torch.multinomial(p, 2, generator=_gen()))


def test_clip_dfkd_augment_and_image_init_follow_the_images() -> None:
    from iclr25.methods.clip_dfkd.augment import random_augment
    from iclr25.methods.clip_dfkd.parameterization import PixelParam

    x = torch.rand(2, 3, 8, 8).to("meta")
    assert _meta(lambda: random_augment(x, generator=_gen())).device.type == "meta"
    assert _meta(lambda: PixelParam(2, size=8, base=4, generator=_gen()).to("meta")()).device.type == "meta"


@pytest.mark.parametrize("parameterization", ["dense", "dense_precision", "diagonal", "lowrank"])
def test_vbll_head_initialises_on_its_own_device(parameterization: str) -> None:
    from iclr25.methods.vbll_bo.head import VBLLHead

    rank = 2 if parameterization == "lowrank" else None
    head = VBLLHead(4, parameterization=parameterization, cov_rank=rank).to("meta")
    _meta(lambda: head.reset_parameters(_gen()))
    assert head.mean.device.type == "meta"


def test_wicked_oddities_augmentations_follow_the_images() -> None:
    from iclr25.methods.wicked_oddities.config import SurrogateConfig
    from iclr25.methods.wicked_oddities.surrogate import simclr_views
    from iclr25.methods.wicked_oddities.victim import random_shift

    x = torch.rand(2, 1, 8, 8).to("meta")
    assert _meta(lambda: simclr_views(x, SurrogateConfig(), _gen())).device.type == "meta"
    assert _meta(lambda: random_shift(x, 2, _gen())).device.type == "meta"


def test_rmp_sam_point_sampling_follows_the_logits() -> None:
    from iclr25.methods.rmp_sam.matching import importance_points

    logits = torch.zeros(3, 1, 8, 8, device="meta")
    assert _meta(lambda: importance_points(logits, 16, 3.0, 0.75, _gen())).device.type == "meta"


def test_gense_codebook_init_follows_the_latents() -> None:
    from iclr25.methods.gense.codec import GroupVQ

    vq = GroupVQ(8, 2, 4).to("meta")
    _meta(lambda: vq.init_from(torch.zeros(2, 8, 5, device="meta"), _gen()))


def test_gfn_sampler_names_a_generator_on_the_wrong_device() -> None:
    from iclr25.methods.gfn_redteam.tb import sample_sequences

    with pytest.raises(ValueError, match="generator is on cpu"):
        sample_sequences(
            torch.nn.Linear(2, 2),
            torch.tensor([1, 2], device="meta"),
            2,
            max_len=3,
            eos_token_id=0,
            generator=_gen(),
        )


def test_hessian_distill_data_move_as_one() -> None:
    from iclr25.methods.hessian_distill import LabelledStructures, make_clusters

    ds = LabelledStructures.from_atoms(make_clusters(1, 2, seed=0, warmup_steps=1), cutoff=4.0)
    moved = ds.to("meta")
    assert {moved.energy.device.type, moved.forces.device.type, moved.batch.pos.device.type} == {"meta"}
    assert ds.forces.device.type == "cpu"


def _trainers() -> list[tuple[str, Callable[..., Any]]]:
    from iclr25.methods.comet import COMETClassifier, train_mlp
    from iclr25.methods.ditto import DittoTrainer
    from iclr25.methods.ditto.base import train_base
    from iclr25.methods.gense.codec import train_codec
    from iclr25.methods.gense.lm import train_lm
    from iclr25.methods.gense.pipeline import GenSE
    from iclr25.methods.gense.semantic import train_phone_ctc
    from iclr25.methods.hessian_distill import DistillTrainer, train_teacher
    from iclr25.methods.hessian_distill.teachers import TorchTeacher
    from iclr25.methods.invmsafold import train_ifar, train_invmsafold
    from iclr25.methods.pal import PALEstimator
    from iclr25.methods.pal.baselines import MLPRewardModel, UnconstrainedIdealPoint
    from iclr25.methods.procedural_influence import build_lm
    from iclr25.methods.procedural_influence import train_lm as train_influence_lm
    from iclr25.methods.rmp_sam import co_train
    from iclr25.methods.scope_gen.text import ReportTask
    from iclr25.methods.vie_dm.ar_speaker import train_ar_speaker
    from iclr25.methods.vie_dm.listener import train_listener
    from iclr25.methods.vie_dm.model import train_viedm
    from iclr25.methods.vie_dm.visual import pretrain_encoder
    from iclr25.methods.wicked_oddities.surrogate import train_ood_surrogate, train_simclr_encoder
    from iclr25.methods.wicked_oddities.victim import train_victim

    return [
        ("comet.train_mlp", train_mlp),
        ("comet.COMETClassifier", COMETClassifier.__init__),
        ("ditto.DittoTrainer", DittoTrainer.__init__),
        ("ditto.train_base", train_base),
        ("invmsafold.train_invmsafold", train_invmsafold),
        ("invmsafold.train_ifar", train_ifar),
        ("pal.PALEstimator", PALEstimator.__init__),
        ("pal.MLPRewardModel", MLPRewardModel.__init__),
        ("pal.UnconstrainedIdealPoint", UnconstrainedIdealPoint.__init__),
        ("procedural_influence.build_lm", build_lm),
        ("procedural_influence.train_lm", train_influence_lm),
        ("scope_gen.ReportTask.train_generator", ReportTask.train_generator),
        ("vie_dm.train_viedm", train_viedm),
        ("vie_dm.train_listener", train_listener),
        ("vie_dm.train_ar_speaker", train_ar_speaker),
        ("vie_dm.pretrain_encoder", pretrain_encoder),
        ("hessian_distill.DistillTrainer", DistillTrainer.__init__),
        ("hessian_distill.train_teacher", train_teacher),
        ("hessian_distill.TorchTeacher", TorchTeacher.__init__),
        ("rmp_sam.co_train", co_train),
        ("wicked_oddities.train_victim", train_victim),
        ("wicked_oddities.train_simclr_encoder", train_simclr_encoder),
        ("wicked_oddities.train_ood_surrogate", train_ood_surrogate),
        ("gense.train_lm", train_lm),
        ("gense.train_codec", train_codec),
        ("gense.train_phone_ctc", train_phone_ctc),
        ("gense.GenSE.to", GenSE.to),
    ]


def test_trainers_take_a_device() -> None:
    missing = [name for name, fn in _trainers() if "device" not in inspect.signature(fn).parameters]
    assert not missing, f"no device argument: {missing}"


# ---------------------------------------------------------------------------------------------
# the GPU smoke suite
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.gpu
@needs_cuda
def test_smoke_claim_on_cuda(name: str) -> None:
    """Every method's smoke claim, end to end, with the runner's ``device="cuda"``."""
    try:
        claim = load_claim(name)
    except MissingExtraError as err:
        pytest.skip(str(err))
    result = claim.run("smoke", 0, device="cuda")
    values = [v for arm in result.metrics.values() for v in arm.values()]
    assert values, f"{name}: no metrics"
    assert any(math.isfinite(v) for v in values)


def _vbll_path(device: str) -> None:
    from iclr25.methods.vbll_bo import FitConfig, VBLLModel, thompson_candidates

    g = _gen()
    X = torch.rand(16, 2, dtype=torch.float64, generator=g).to(device)
    model = VBLLModel(X, X.sum(-1, keepdim=True), width=16, depth=1, generator=g, device=device)
    model.fit(FitConfig(max_epochs=5))
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64, device=device)
    x = thompson_candidates(model, bounds, q=2, num_restarts=2, raw_samples=16, generator=g)
    assert x.shape == (2, 2)


def _gense_path(device: str) -> None:
    import numpy as np

    from iclr25.methods.gense.pipeline import GenSE

    model = GenSE.tiny_random(seed=0).to(device)
    wav = 0.05 * np.random.default_rng(0).standard_normal(16000).astype(np.float32)
    out = model.enhance(wav, 16000)
    assert out.shape == wav.shape and np.isfinite(out).all()


def _bigr_path(device: str) -> None:
    from iclr25.methods.bigr import BiGR, BiGRConfig, generate, tiny
    from iclr25.methods.bigr.model import train_bigr

    torch.manual_seed(0)
    cfg = BiGRConfig(**tiny().__dict__)
    model = BiGR(cfg).to(device)
    labels = torch.arange(8, device=device) % cfg.num_classes
    probs = torch.full((8, cfg.grid**2, cfg.code_dim), 0.5)
    g = _gen()

    def bits(idx: torch.Tensor) -> torch.Tensor:
        return torch.bernoulli(probs[idx.cpu()], generator=g).to(device)

    train_bigr(model, bits, labels, steps=2, batch_size=4, generator=g)
    out = generate(model.eval(), labels[:2], num_iter=2, diffusion_steps=2, generator=g)
    assert out.bits.device.type == torch.device(device).type


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(_vbll_path, id="vbll_bo"),  # its claim times the surrogates on the CPU
        pytest.param(_gense_path, id="gense"),
        pytest.param(_bigr_path, id="bigr"),
    ],
)
@pytest.mark.gpu
@needs_cuda
def test_library_path_on_cuda(path: Callable[[str], None]) -> None:
    """Library paths beyond the claims: fit, sample and enhance with everything on the GPU."""
    path("cuda")
