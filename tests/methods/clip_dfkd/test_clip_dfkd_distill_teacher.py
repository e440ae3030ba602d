"""Unit tests of meta-KD (MLDG), the style split, distillation and the cached tiny teachers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.clip_dfkd import (
    DistillConfig,
    SyntheticSet,
    TeacherConfig,
    TinyResNet,
    build_tiny_clip,
    distill,
    load_or_train_teacher,
    mldg_objective,
    multi_positive_clip_loss,
    split_styles,
    tokenizer_for,
)


def _sq(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - target) ** 2).sum()


@pytest.mark.parametrize("first_order", [False, True])
def test_mldg_gradient_matches_the_closed_form_on_a_linear_student(first_order: bool) -> None:
    g = torch.Generator().manual_seed(0)
    W0 = torch.randn(2, 3, generator=g, dtype=torch.float64)
    a, b = (
        torch.randn(1, 3, generator=g, dtype=torch.float64),
        torch.randn(1, 2, generator=g, dtype=torch.float64),
    )
    c, d = (
        torch.randn(1, 3, generator=g, dtype=torch.float64),
        torch.randn(1, 2, generator=g, dtype=torch.float64),
    )
    alpha, beta = 0.3, 0.7
    model = nn.Linear(3, 2, bias=False).double()
    with torch.no_grad():
        model.weight.copy_(W0)
    obj = mldg_objective(
        model, _sq, (a, b), (c, d), inner_lr=alpha, meta_weight=beta, first_order=first_order
    )
    (grad,) = torch.autograd.grad(obj, [model.weight])
    # closed form: L_tr = 1/2 |W a - b|^2, W' = W - alpha (W a - b) a^T, r = W' c - d
    a1, b1, c1, d1 = a[0], b[0], c[0], d[0]
    g_tr = torch.outer(W0 @ a1 - b1, a1)
    Wp = W0 - alpha * g_tr
    r = Wp @ c1 - d1
    g_te = torch.outer(r, c1)
    if not first_order:  # d(W'c)/dW adds -alpha (a^T c) r a^T (the Hessian term)
        g_te = g_te - alpha * float(a1 @ c1) * torch.outer(r, a1)
    torch.testing.assert_close(grad, g_tr + beta * g_te)
    plain = mldg_objective(model, _sq, (a, b), (c, d), inner_lr=alpha, meta_weight=0.0)
    assert float(plain.detach()) == pytest.approx(float(_sq(model(a), b).detach()))


def test_style_split_is_seeded_and_skips_single_style_batches() -> None:
    ids = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    s1 = split_styles(ids, torch.Generator().manual_seed(5))
    s2 = split_styles(ids, torch.Generator().manual_seed(5))
    assert s1 is not None and s2 is not None
    assert torch.equal(s1[0], s2[0]) and torch.equal(s1[0], ~s1[1])
    assert len(torch.unique(ids[s1[0]])) == 2 and not set(ids[s1[0]].tolist()) & set(ids[s1[1]].tolist())
    assert split_styles(torch.zeros(5, dtype=torch.long)) is None


def test_meta_step_does_not_update_bn_statistics_twice() -> None:
    torch.manual_seed(0)
    net = TinyResNet(2, width=4)
    x = torch.rand(4, 3, 16, 16)
    target = torch.randn(4, 2)
    net.train()
    ref = TinyResNet(2, width=4)
    ref.load_state_dict(net.state_dict())
    ref.train()
    ref(x[:2])  # one plain forward on the meta-train half
    mldg_objective(net, _sq, (x[:2], target[:2]), (x[2:], target[2:]), inner_lr=0.1, meta_weight=1.0)
    for (k, b1), b2 in zip(net.named_buffers(), ref.buffers(), strict=True):
        assert torch.equal(b1, b2), k


def test_distill_runs_plain_and_meta_and_learns_a_separable_teacher() -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(32, 3, 16, 16, generator=g)
    y = (x[:, 0].mean((1, 2)) > 0.5).long()

    class Head(nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            m = z[:, 0].mean((1, 2)) - 0.5
            return torch.stack([-20 * m, 20 * m], 1)

    data = SyntheticSet(x, y, torch.arange(32) % 4, ("a", "b", "c", "d"))
    for meta in (False, True):
        st = distill(
            Head(),
            TinyResNet(2, width=4),
            data,
            config=DistillConfig(epochs=2, warmup_epochs=1, batch_size=16, meta=meta),
            generator=torch.Generator().manual_seed(1),
        )
        assert not st.training
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        distill(Head(), TinyResNet(2), SyntheticSet(x * 3, y, y, ("a",)))


def test_multi_positive_loss_is_clip_loss_on_the_identity() -> None:
    g = torch.Generator().manual_seed(0)
    v, t = (
        F.normalize(torch.randn(4, 8, generator=g), dim=-1),
        F.normalize(torch.randn(4, 8, generator=g), dim=-1),
    )
    logits = 10.0 * v @ t.T
    clip = (F.cross_entropy(logits, torch.arange(4)) + F.cross_entropy(logits.T, torch.arange(4))) / 2
    got = multi_positive_clip_loss(v, t, torch.eye(4, dtype=torch.bool), torch.tensor(10.0))
    assert float(got) == pytest.approx(float(clip), rel=1e-6)


def test_tiny_open_clip_builds_offline_and_tokenizer_works() -> None:
    for arch in ("vit", "resnet"):
        model = build_tiny_clip(TeacherConfig.tiny(arch)).eval()
        assert model.encode_image(torch.zeros(1, 3, 32, 32)).shape == (1, 32)
        has_bn = any(isinstance(m, nn.BatchNorm2d) for m in model.visual.modules())
        assert has_bn == (arch == "resnet")
    tok = tokenizer_for(TeacherConfig())(["a striped red star"])
    assert tok.shape == (1, 12) and int(tok[0, 0]) == 49406


def test_cached_teacher_reloads_bit_identically(tmp_path) -> None:
    cfg = TeacherConfig(n_images=48, epochs=1, batch_size=16, vision_layers=1, text_layers=1)
    a = load_or_train_teacher(cfg, cache_dir=tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".safetensors"
    b = load_or_train_teacher(cfg, cache_dir=tmp_path)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not b.training and not any(p.requires_grad for p in b.parameters())


def test_teacher_config_errors() -> None:
    with pytest.raises(ValueError, match="arch"):
        TeacherConfig(arch="mlp")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="divisible by 32"):
        TeacherConfig(arch="resnet", image_size=48)
    with pytest.raises(ValueError, match="positive"):
        DistillConfig(tau=0.0)


def test_customize_few_shot_runs_end_to_end_and_checks_its_inputs() -> None:
    from iclr25.methods.clip_dfkd import CLIPTeacher, InversionConfig, customize

    torch.manual_seed(0)
    cfg = TeacherConfig(vision_layers=1, text_layers=1)
    teacher = CLIPTeacher(build_tiny_clip(cfg), tokenizer_for(cfg))
    ex = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    kw = {
        "image_size": 32,
        "inversion": InversionConfig(images_per_class=2, steps=1, batch_size=4),
        "distill": DistillConfig(epochs=1, batch_size=2, warmup_epochs=0),
        "generator": torch.Generator().manual_seed(0),
    }
    student = customize(
        teacher, ("star", "circle"), example_images=ex, example_labels=torch.tensor([0, 1, 0, 1]), **kw
    )
    assert student(ex).shape == (4, 2)
    with pytest.raises(ValueError, match="go together"):
        customize(teacher, ("star", "circle"), example_images=ex, **kw)
    assert 50_000 < sum(p.numel() for p in TinyResNet(6).parameters()) < 100_000
