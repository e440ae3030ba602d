"""The trainers' ``device=`` keyword: a CPU device gives the default's numbers, the models end on
that device, and seeded draws come from the CPU generator whatever device the tensors live on."""

from __future__ import annotations

import pytest
import torch

from iclr25.methods.vie_dm import (
    VIEDM,
    ARSpeaker,
    DiffusionConfig,
    ExpressionTokenizer,
    GaussianSequenceDiffusion,
    ImageEncoder,
    Listener,
    ListenerConfig,
    RefDataset,
    UniformSampler,
    VIEDMConfig,
    generate_for_targets,
    pretrain_encoder,
    train_ar_speaker,
    train_listener,
    train_viedm,
)

TOK = ExpressionTokenizer(["the", "red", "blue", "circle", "square", "left", "of"])
DEVICES = [None, "cpu", torch.device("cpu")]


def _config() -> VIEDMConfig:
    return VIEDMConfig.tiny(len(TOK)).replace(diffusion=DiffusionConfig(steps=20, sampling_steps=4))


def _rows() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    images = torch.rand(3, 3, 48, 48, generator=torch.Generator().manual_seed(0))
    boxes = torch.tensor([[2.0, 2, 20, 20], [10, 12, 30, 40], [0, 0, 48, 48]])
    return images, boxes, TOK.encode(["the red circle", "square", "blue square left of"], length=12)


def _params_on(model: torch.nn.Module, device: str) -> bool:
    return all(p.device == torch.device(device) for p in model.parameters())


@pytest.mark.parametrize("device", DEVICES[1:])
def test_train_viedm_on_cpu_device_matches_the_default(one_thread, device) -> None:
    images, boxes, ids = _rows()
    runs = []
    for dev in (None, device):
        torch.manual_seed(0)
        model = VIEDM(_config(), grid_tokens=36, decode=TOK.decode)
        ema, losses = train_viedm(
            model, images, boxes, ids, steps=3, batch_size=4, lr=1e-3, ema=0.9,
            generator=torch.Generator().manual_seed(1), progress_every=1, device=dev,
        )  # fmt: skip
        assert _params_on(ema, "cpu") and _params_on(model, "cpu")
        runs.append((losses, ema.state_dict()))
    assert runs[0][0] == runs[1][0]  # bit-identical losses
    for key, value in runs[0][1].items():
        assert torch.equal(value, runs[1][1][key]), key


def test_ar_speaker_and_listener_trainers_on_cpu_device_match_the_default(one_thread) -> None:
    images, boxes, ids = _rows()
    curves = []
    for dev in DEVICES:
        torch.manual_seed(0)
        sp = ARSpeaker(_config(), decode=TOK.decode)
        loss = train_ar_speaker(
            sp, images, boxes, ids, steps=3, batch_size=4, lr=1e-3,
            generator=torch.Generator().manual_seed(1), progress_every=1, device=dev,
        )  # fmt: skip
        samples = sp.generate(
            images, boxes, mode="sample", num_return=2, generator=torch.Generator().manual_seed(2)
        )
        assert _params_on(sp, "cpu") and samples.device == torch.device("cpu")
        curves.append((loss, samples))
    for loss, samples in curves[1:]:
        assert loss == curves[0][0] and torch.equal(samples, curves[0][1])

    scene_boxes = torch.tensor([[[2.0, 2, 20, 20], [10, 12, 30, 40]]]).repeat(3, 1, 1)
    box_mask = torch.ones(3, 2, dtype=torch.bool)
    rows = torch.tensor([[0, 0], [1, 1], [2, 0]])
    results = []
    for dev in DEVICES:
        torch.manual_seed(0)
        lis = Listener(ListenerConfig.tiny(len(TOK)))
        feats = lis.candidate_features(images, scene_boxes, box_mask)

        @torch.no_grad()
        def evaluate(lis: Listener = lis, feats: torch.Tensor = feats) -> float:
            return float(lis.score(images, scene_boxes, ids, box_mask=box_mask, feats=feats).sum())

        curve = train_listener(
            lis, feats, images, scene_boxes, box_mask, rows, ids, steps=3, batch_size=4, lr=1e-3,
            generator=torch.Generator().manual_seed(1), evaluate=evaluate, eval_every=1, device=dev,
        )  # fmt: skip
        assert _params_on(lis, "cpu")
        results.append(curve)
    assert results[0] == results[1] == results[2]


def test_pretrain_encoder_on_cpu_device_matches_the_default(one_thread) -> None:
    images, boxes, _ = _rows()
    labels = torch.tensor([[0, 1], [1, 0], [1, 1]])
    out = []
    for dev in DEVICES:
        torch.manual_seed(0)
        enc = ImageEncoder((4, 8, 8))
        losses = pretrain_encoder(
            enc, images, torch.arange(3), boxes, labels, n_classes=(2, 2), epochs=2, batch_size=2,
            generator=torch.Generator().manual_seed(1), device=dev,
        )  # fmt: skip
        assert _params_on(enc, "cpu")
        out.append((losses, enc.state_dict()))
    for losses, state in out[1:]:
        assert losses == out[0][0]
        assert all(torch.equal(v, state[k]) for k, v in out[0][1].items())


def test_generate_for_targets_on_cpu_device_matches_the_default(one_thread) -> None:
    images, boxes, _ = _rows()
    data = RefDataset(
        images=images, boxes=boxes[:2][None].repeat(3, 1, 1), box_mask=torch.ones(3, 2, dtype=torch.bool),
        refs=[(0, 0, "red circle"), (1, 1, "square"), (2, 0, "blue square")], object_ids=[[0, 1]] * 3,
    )  # fmt: skip
    torch.manual_seed(0)
    model = VIEDM(_config(), grid_tokens=36, decode=TOK.decode)
    ref = generate_for_targets(model, data, n_per_object=2, seed=3)
    for dev in DEVICES[1:]:
        assert generate_for_targets(model, data, n_per_object=2, seed=3, device=dev) == ref


def test_diffusion_draws_stay_on_the_cpu_generator_for_meta_tensors() -> None:
    """With the model's tensors on the ``meta`` device, the loss and the sampler still draw their
    timesteps and noise from the CPU generator (exactly the draws a CPU run makes) and return
    tensors on the model's device: nothing asks a CPU generator to draw on another device."""
    diffusion = GaussianSequenceDiffusion.from_schedule("sqrt", 10)
    meta = torch.device("meta")
    emb = torch.empty(7, 4, device=meta)
    ids = torch.zeros(2, 3, dtype=torch.long, device=meta)
    model_fn = lambda x, t: x * 0.5  # noqa: E731
    gen, replay = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)

    t, weight = UniformSampler(10).sample(2, generator=gen)
    assert t.device == weight.device == torch.device("cpu")
    terms = diffusion.training_losses(model_fn, emb, ids, t.to(meta), generator=gen)
    assert all(v.device == meta and v.shape == (2,) for v in terms.values())
    torch.multinomial(torch.full((10,), 0.1, dtype=torch.float64), 2, replacement=True, generator=replay)
    torch.randn(2, 3, 4, generator=replay), torch.randn(2, 3, 4, generator=replay)
    assert torch.equal(gen.get_state(), replay.get_state())

    x0 = diffusion.spaced(4).sample(model_fn, (2, 3, 4), emb, clamp=False, generator=gen)
    assert x0.device == meta and x0.shape == (2, 3, 4)
    for _ in range(4):  # the start noise and one draw per step but the last
        torch.randn(2, 3, 4, generator=replay)
    assert torch.equal(gen.get_state(), replay.get_state())
