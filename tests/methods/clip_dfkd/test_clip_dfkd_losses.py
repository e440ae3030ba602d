"""Unit tests of the CLIP-DFKD losses, zero-shot head, parameterisation and DeepInversion."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.clip_dfkd import (
    BNStatsHook,
    CLIPTeacher,
    InversionConfig,
    PixelParam,
    TeacherConfig,
    ZeroShotClassifier,
    build_tiny_clip,
    ccm_loss,
    class_prototypes,
    deep_inversion,
    invert_dataset,
    kd_loss,
    match_loss,
    random_augment,
    sdd_loss,
    tokenizer_for,
)


@pytest.fixture(scope="module")
def teacher() -> CLIPTeacher:
    torch.manual_seed(0)
    return CLIPTeacher(build_tiny_clip(TeacherConfig()), tokenizer_for(TeacherConfig()))


@pytest.fixture(scope="module")
def bn_teacher() -> CLIPTeacher:
    torch.manual_seed(0)
    cfg = TeacherConfig.tiny("resnet")
    return CLIPTeacher(build_tiny_clip(cfg), tokenizer_for(cfg))


def test_zero_shot_logits_are_scale_times_cosine_of_renormalised_template_mean(teacher: CLIPTeacher) -> None:
    names, templates = ("star", "circle", "square"), ("a {}", "a drawing of a {}")
    head = ZeroShotClassifier(teacher, names, templates)
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    t = torch.stack(
        [F.normalize(teacher.encode_text([tp.format(n) for tp in templates]), dim=-1).mean(0) for n in names]
    )
    t = F.normalize(t, dim=-1)  # class order as given
    v = F.normalize(teacher.encode_image(x), dim=-1)
    torch.testing.assert_close(head(x), teacher.logit_scale * v @ t.T)


def test_sdd_loss_equals_brute_force_with_duplicates_as_positives() -> None:
    g = torch.Generator().manual_seed(0)
    v = F.normalize(torch.randn(5, 4, generator=g), dim=-1)
    t = F.normalize(torch.randn(5, 4, generator=g), dim=-1)
    ids = torch.tensor([0, 1, 0, 2, 1])
    t = t.clone()
    t[2], t[4] = t[0], t[1]  # rows with the same prompt id share the prompt embedding
    tau = 0.3
    total = 0.0
    for i in range(5):
        num = math.exp(float(v[i] @ t[i]) / tau)
        den = sum(math.exp(float(v[i] @ t[j]) / tau) for j in range(5) if j == i or ids[j] != ids[i])
        total += -math.log(num / den)
    assert float(sdd_loss(v, t, ids, tau)) == pytest.approx(total / 5, rel=1e-5)
    # without the mask the duplicates would be negatives: a larger loss
    assert float(sdd_loss(v, t, torch.arange(5), tau)) > float(sdd_loss(v, t, ids, tau))


def test_ccm_is_a_manual_cross_entropy_and_match_is_cosine_distance() -> None:
    g = torch.Generator().manual_seed(0)
    v = F.normalize(torch.randn(3, 4, generator=g), dim=-1)
    c = F.normalize(torch.randn(2, 4, generator=g), dim=-1)
    y = torch.tensor([0, 1, 1])
    logits = 7.0 * v @ c.T
    manual = -(logits.log_softmax(-1)[torch.arange(3), y]).mean()
    assert float(ccm_loss(v, c, y, 7.0)) == pytest.approx(float(manual), rel=1e-6)
    assert float(match_loss(v, v)) == pytest.approx(0.0, abs=1e-6)
    assert float(match_loss(v, -v)) == pytest.approx(2.0, abs=1e-6)


def test_kd_loss_zero_for_equal_logits_scaled_by_tau_squared_and_gradcheck() -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 3, generator=g, dtype=torch.float64)
    assert float(kd_loss(z, z, 2.0)) == pytest.approx(0.0, abs=1e-12)
    s = torch.randn(4, 3, generator=g, dtype=torch.float64)
    p_t = (z / 3.0).softmax(-1)
    kl = (p_t * (p_t.log() - (s / 3.0).log_softmax(-1))).sum(-1).mean()
    assert float(kd_loss(s, z, 3.0)) == pytest.approx(9.0 * float(kl), rel=1e-10)
    assert torch.autograd.gradcheck(lambda a: kd_loss(a, z, 2.0), (s.clone().requires_grad_(),))
    with pytest.raises(ValueError, match="tau"):
        kd_loss(s, z, 0.0)


def test_prototypes_are_renormalised_means_of_normalised_embeddings(teacher: CLIPTeacher) -> None:
    x = torch.rand(5, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 0, 1, 1])
    p = class_prototypes(teacher, x, y, 2)
    v = F.normalize(teacher.encode_image(x), dim=-1)
    torch.testing.assert_close(p[1], F.normalize(v[[1, 3, 4]].mean(0), dim=0))
    with pytest.raises(ValueError, match="missing classes"):
        class_prototypes(teacher, x, torch.zeros(5, dtype=torch.long), 2)


def test_pixel_param_range_shape_and_gradients() -> None:
    p = PixelParam(3, size=16, base=8, init_std=3.0, generator=torch.Generator().manual_seed(0))
    x = p()
    assert x.shape == (3, 3, 16, 16) and float(x.min()) >= 0 and float(x.max()) <= 1
    x.sum().backward()
    assert p.z.grad is not None and float(p.z.grad.abs().sum()) > 0
    with pytest.raises(ValueError):
        PixelParam(1, size=8, base=16)


def test_augment_is_seeded_differentiable_and_identity_without_randomness() -> None:
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    a = random_augment(x, generator=torch.Generator().manual_seed(1))
    b = random_augment(x, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    a.sum().backward()
    assert x.grad is not None
    same = random_augment(
        x, generator=torch.Generator().manual_seed(1), scale=(1.0, 1.0), shift=0.0, flip=False, jitter=0.0
    )
    torch.testing.assert_close(same, x.detach(), atol=1e-5, rtol=0)


def test_inversion_leaves_teacher_unchanged_and_lowers_its_loss(teacher: CLIPTeacher) -> None:
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    cfg = InversionConfig(images_per_class=2, steps=3, batch_size=4)
    s = invert_dataset(
        teacher,
        ("star", "circle"),
        image_size=32,
        styles=("solid", "striped"),
        config=cfg,
        generator=torch.Generator().manual_seed(0),
    )
    assert (
        s.images.shape == (4, 3, 32, 32)
        and s.labels.tolist() == [0, 1, 0, 1]
        and s.style_ids.tolist() == [0, 0, 1, 1]
    )
    assert all(torch.equal(before[k], v) for k, v in teacher.state_dict().items())
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    zero = invert_dataset(
        teacher,
        ("star", "circle"),
        image_size=32,
        styles=("solid",),
        config=cfg.replace(steps=0),
        generator=torch.Generator().manual_seed(0),
    )
    assert zero.images.shape == (4, 3, 32, 32)


def test_input_errors(teacher: CLIPTeacher) -> None:
    with pytest.raises(ValueError, match="distinct"):
        ZeroShotClassifier(teacher, ("star", "star"))
    with pytest.raises(ValueError, match="empty"):
        ZeroShotClassifier(teacher, ())
    with pytest.raises(ValueError, match="distinct"):
        invert_dataset(teacher, ("star",), image_size=32, styles=("solid", "solid"))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        class_prototypes(teacher, 2 * torch.ones(2, 3, 32, 32), torch.tensor([0, 0]), 1)
    with pytest.raises(ValueError, match="mode"):
        InversionConfig(mode="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="style_template"):
        InversionConfig(style_template="a {name}")


def test_bn_loss_is_zero_at_the_running_statistics() -> None:
    bn = nn.BatchNorm2d(3)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 4, 4, generator=g) * 2 + 1
    bn.running_mean.copy_(x.mean(dim=(0, 2, 3)))
    bn.running_var.copy_(x.var(dim=(0, 2, 3), unbiased=False))
    bn.eval()
    hook = BNStatsHook(nn.Sequential(bn))
    bn(x)
    assert float(hook.loss) == pytest.approx(0.0, abs=1e-5)
    bn(x + 1.0)  # a shifted batch: mean off by 1 in each of 3 channels
    assert float(hook.loss) == pytest.approx(math.sqrt(3.0), rel=1e-4)
    hook.remove()


def test_deep_inversion_is_inapplicable_without_bn_and_runs_with_it(
    teacher: CLIPTeacher, bn_teacher: CLIPTeacher
) -> None:
    with pytest.raises(ValueError, match="inapplicable"):
        deep_inversion(teacher, ("star", "circle"), image_size=32, images_per_class=1, steps=1)
    s = deep_inversion(
        bn_teacher,
        ("star", "circle"),
        image_size=32,
        images_per_class=2,
        steps=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert s.images.shape == (4, 3, 32, 32) and float(s.images.max()) <= 1
    assert not any(isinstance(m, nn.BatchNorm2d) for m in teacher.model.visual.modules())
