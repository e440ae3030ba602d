"""Triggers, the poisoned and triggered data sets, ASR and CA, NT-Xent, surrogates, victims."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.methods.wicked_oddities import (
    BadNetsTrigger,
    BlendTrigger,
    PoisonedDataset,
    SIGTrigger,
    SurrogateConfig,
    TensorImageDataset,
    TriggeredTestSet,
    VictimConfig,
    attack_success_rate,
    clean_accuracy,
    digits_pools,
    load_trigger,
    nt_xent,
    ood_letters,
    random_shift,
    train_ood_surrogate,
    train_simclr_encoder,
    train_victim,
)


@pytest.mark.parametrize(
    "trigger", [BadNetsTrigger(3, 1), BlendTrigger.noise((1, 8, 8), 0.2), SIGTrigger(0.3, 2)]
)
def test_triggers_stay_in_unit_range_and_keep_shape(trigger) -> None:
    x = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    out = trigger.apply(x)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert torch.equal(
        x, torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    )  # input unchanged


def test_badnets_touches_only_the_patch() -> None:
    x = torch.full((2, 3, 8, 8), 0.5)
    out = BadNetsTrigger(3, 1).apply(x)
    changed = (out != x).any(0).any(0)
    rows, cols = torch.where(changed)
    assert rows.min() >= 4 and rows.max() <= 6 and cols.min() >= 4 and cols.max() <= 6
    assert set(out[..., 4:7, 4:7].unique().tolist()) == {0.0, 1.0}


def test_blend_and_sig_closed_forms_on_constant_images() -> None:
    p = torch.rand(1, 8, 8, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        BlendTrigger(p, 0.2).apply(torch.full((1, 1, 8, 8), 0.5))[0], 0.8 * 0.5 + 0.2 * p
    )
    out = SIGTrigger(0.1, 2).apply(torch.full((1, 1, 8, 8), 0.5))
    j = torch.arange(8.0)
    expected = (0.5 + 0.1 * torch.sin(2 * math.pi * j * 2 / 8)).expand(8, 8)
    torch.testing.assert_close(out[0, 0], expected, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="aliases"):
        SIGTrigger(0.1, 6).apply(torch.zeros(1, 1, 16, 16))


def test_triggers_survive_save_load(tmp_path) -> None:
    for t in (BadNetsTrigger(2, 1), BlendTrigger.noise((1, 6, 6), 0.15, seed=3), SIGTrigger(0.1, 1)):
        t.save(tmp_path / f"{t.kind}.pt")
        back = load_trigger(tmp_path / f"{t.kind}.pt")
        x = torch.rand(2, 1, 6, 6)
        assert type(back) is type(t) and torch.equal(back.apply(x), t.apply(x))


def test_poisoned_dataset_invariants() -> None:
    gen = torch.Generator().manual_seed(0)
    base = TensorImageDataset(torch.rand(10, 1, 8, 8, generator=gen) * 0.5, torch.arange(10) % 3)
    trig = BadNetsTrigger(2, 1)

    def shift(x: torch.Tensor) -> torch.Tensor:  # deterministic 1-px shift right and down
        return torch.roll(x, (1, 1), dims=(-2, -1))

    ds = PoisonedDataset(base, [3, 6], trig, transform=shift)
    for i in range(10):
        x, y = ds[i]
        assert y == int(base.labels[i])  # labels untouched
        if i not in (3, 6):
            assert torch.equal(x, shift(base.images[i]))  # unselected: byte-identical (after the transform)
    x3, _ = ds[3]
    assert torch.equal(x3[0, 6:8, 6:8], trig.pattern)  # the patch (rows/cols 5-6) moved by one pixel
    assert ds.poison_rates(0) == {"of_target": 2 / 4, "of_train": 0.2, "count": 2.0}
    with pytest.raises(ValueError, match="target class"):
        PoisonedDataset(base, [1], trig).poison_rates(0)
    with pytest.raises(ValueError):
        PoisonedDataset(base, [10], trig)


def _const(k: int, c: int):
    return lambda x: torch.nn.functional.one_hot(torch.full((len(x),), k), c).float()


def test_asr_stubs_and_denominator() -> None:
    base = TensorImageDataset(torch.zeros(9, 1, 8, 8), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2]))
    trig = SIGTrigger(0.1, 1)
    assert attack_success_rate(_const(1, 3), base, trig, target=1) == 1.0
    assert len(TriggeredTestSet(base, trig, target=1)) == 6
    assert attack_success_rate(_const(1, 3), base, trig, target=1, exclude_target=False) == 1.0

    def true_label(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(base.labels[: len(x)], 3).float()

    ts = TriggeredTestSet(base, trig, target=1)
    assert [ts[j][1] for j in range(len(ts))] == [0, 2, 0, 2, 0, 2]
    assert (
        attack_success_rate(
            lambda x: torch.nn.functional.one_hot(torch.tensor([0, 2] * 3), 3).float(), base, trig, target=1
        )
        == 0.0
    )
    assert clean_accuracy(true_label, base) == 1.0


def _brute_nt_xent(z1: torch.Tensor, z2: torch.Tensor, t: float) -> float:
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=1, keepdim=True)
    n2 = len(z)
    total = 0.0
    for i in range(n2):
        j = (i + n2 // 2) % n2
        num = math.exp(float(z[i] @ z[j]) / t)
        den = sum(math.exp(float(z[i] @ z[k]) / t) for k in range(n2) if k != i)
        total += -math.log(num / den)
    return total / n2


def test_nt_xent_matches_brute_force_on_four_pairs() -> None:
    gen = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
    assert nt_xent(z1, z2, 0.5).item() == pytest.approx(_brute_nt_xent(z1, z2, 0.5), abs=1e-5)


def test_random_shift_moves_the_patch_with_the_image() -> None:
    x = BadNetsTrigger(2, 2).apply(torch.zeros(4, 1, 8, 8))
    out = random_shift(x, 1, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and torch.allclose(out.sum((1, 2, 3)), x.sum((1, 2, 3)))
    assert torch.equal(random_shift(x, 0, torch.Generator()), x)


def test_pools_are_disjoint_stratified_and_seeded() -> None:
    p = digits_pools(0)
    assert len(p.public) + len(p.train) + len(p.test) == 1797
    flat = {tuple(r.flatten().tolist()) for r in p.train.images[:50]}
    assert not flat & {tuple(r.flatten().tolist()) for r in p.test.images}
    counts = torch.bincount(p.train.labels)
    assert counts.min() >= 85 and counts.max() <= 95
    assert torch.equal(digits_pools(0).train.images, p.train.images)
    letters = ood_letters(3, 16, seed=0)
    assert letters.images.shape == (30, 1, 16, 16) and float(letters.images.max()) <= 1.0


def test_surrogates_and_victim_are_deterministic_and_see_given_images_only(one_thread) -> None:
    gen = torch.Generator().manual_seed(0)
    imgs = torch.rand(16, 1, 8, 8, generator=gen)
    cfg = SurrogateConfig(epochs=1, batch_size=8, ood_epochs=1)
    a = train_simclr_encoder(imgs, cfg, seed=0).encode(imgs)
    b = train_simclr_encoder(imgs, cfg, seed=0).encode(imgs)
    assert a.shape == (16, 64) and torch.equal(a, b)
    ood = train_ood_surrogate(imgs[:4], imgs[4:], torch.arange(12) % 3, cfg, seed=0)
    assert ood.encode(imgs[:4]).shape == (4, 4)
    ds = TensorImageDataset(imgs, torch.arange(16) % 2)
    m1 = train_victim(ds, VictimConfig(epochs=1), seed=0)
    m2 = train_victim(ds, VictimConfig(epochs=1), seed=0)
    assert torch.equal(m1(imgs), m2(imgs)) and not m1.training
