"""RMP-SAM building blocks against brute force and closed forms."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torchvision.ops import DeformConv2d

from iclr25.methods.rmp_sam import (
    RMPSAM,
    KernelUpdate,
    RMPSAMConfig,
    dice_loss,
    dynamic_masks,
    frames_to_tube,
    hard_mask_pool,
    hungarian_match,
    importance_points,
    link_clips,
    match_cost,
    point_sample,
    point_to_box,
    sigmoid_bce,
    tube_to_frames,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hard_mask_pool_is_a_sum_over_the_binarised_mask() -> None:
    g = torch.Generator().manual_seed(0)
    m = torch.randn(2, 3, 4, 5, generator=g, requires_grad=True)
    f = torch.randn(2, 6, 4, 5, generator=g)
    out = hard_mask_pool(m, f)
    ref = torch.zeros(2, 3, 6)
    for b, n, h, w in itertools.product(range(2), range(3), range(4), range(5)):
        if torch.sigmoid(m[b, n, h, w]) > 0.5:
            ref[b, n] += f[b, :, h, w]
    torch.testing.assert_close(out, ref)
    assert not out.requires_grad  # no gradient through the threshold
    empty = hard_mask_pool(torch.full((1, 1, 4, 5), -10.0), f[:1])
    assert torch.equal(empty, torch.zeros(1, 1, 6))


def test_dynamic_masks_are_per_pixel_dot_products() -> None:
    g = torch.Generator().manual_seed(1)
    k, f = torch.randn(1, 2, 3, generator=g), torch.randn(1, 3, 2, 2, generator=g)
    out = dynamic_masks(k, f)
    for n, h, w in itertools.product(range(2), range(2), range(2)):
        assert out[0, n, h, w].item() == pytest.approx(float((k[0, n] * f[0, :, h, w]).sum()), abs=1e-6)


def test_kernel_update_equals_the_gating_formula() -> None:
    torch.manual_seed(0)
    ku = KernelUpdate(4)
    g = torch.Generator().manual_seed(2)
    f, k = torch.randn(1, 3, 4, generator=g), torch.randn(1, 3, 4, generator=g)
    p_in, p_out = ku.feat_proj(f).split(4, -1)
    i_in, i_out = ku.kernel_proj(k).split(4, -1)
    gg = i_in * p_in
    gate_i = torch.sigmoid(ku.norm_input_gate(ku.input_gate(gg)))
    gate_u = torch.sigmoid(ku.norm_update_gate(ku.update_gate(gg)))
    new = gate_u * ku.norm_p_out(p_out) + gate_i * ku.norm_i_out(i_out)
    torch.testing.assert_close(ku(f, k), torch.relu(ku.fc_norm(ku.fc(new))))


def test_point_becomes_a_3px_box_clamped_to_the_image() -> None:
    box = point_to_box(torch.tensor([[1.5, 30.5], [16.0, 16.0]]), 3.0, 32, 32)
    assert box.tolist() == [[0.0, 27.5, 4.5, 32.0], [13.0, 13.0, 19.0, 19.0]]


@pytest.mark.parametrize("isolation", [True, False])
def test_prompt_isolation_keeps_other_prompts_bit_identical(isolation: bool) -> None:
    torch.manual_seed(0)
    model = RMPSAM(RMPSAMConfig(prompt_isolation=isolation)).eval()
    img = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    pts = torch.tensor([[[5.5, 5.5], [20.5, 10.5], [12.5, 25.5]]])
    moved = pts.clone()
    moved[0, 1] = torch.tensor([28.5, 28.5])
    with torch.no_grad():
        a = model(img, task="interactive", prompts={"points": pts})
        b = model(img, task="interactive", prompts={"points": moved})
    same = torch.equal(a["masks"][0, [0, 2]], b["masks"][0, [0, 2]]) and torch.equal(
        a["iou"][0, [0, 2]], b["iou"][0, [0, 2]]
    )
    assert same is isolation  # isolated: bit-identical; without isolation the others change


def test_hungarian_equals_brute_force() -> None:
    g = torch.Generator().manual_seed(4)
    for n, m in [(5, 4), (4, 4), (3, 2), (5, 1)]:
        cost = torch.rand(n, m, generator=g)
        rows, cols = hungarian_match(cost)
        best = min(sum(float(cost[p[j], j]) for j in range(m)) for p in itertools.permutations(range(n), m))
        assert float(cost[rows, cols].sum()) == pytest.approx(best)


def test_match_cost_prefers_the_right_mask() -> None:
    gt = torch.zeros(2, 8, 8, dtype=torch.bool)
    gt[0, :4], gt[1, 4:] = True, True
    masks = torch.where(gt.flip(0), 10.0, -10.0)  # query 0 predicts target 1 and vice versa
    logits = torch.zeros(2, 3)
    cost = match_cost(
        logits, masks, torch.tensor([0, 1]), gt, torch.rand(64, 2, generator=torch.Generator().manual_seed(0))
    )
    assert hungarian_match(cost)[1].tolist() == [1, 0]


def test_point_sample_at_pixel_centres_returns_pixel_values() -> None:
    m = torch.arange(12.0).view(1, 1, 3, 4)
    pts = torch.tensor([[[(c + 0.5) / 4, (r + 0.5) / 3] for r in range(3) for c in range(4)]])
    torch.testing.assert_close(point_sample(m, pts).flatten(), torch.arange(12.0), atol=1e-5, rtol=0)


def test_importance_sampling_returns_the_requested_count() -> None:
    pts = importance_points(torch.randn(3, 1, 8, 8), 100, 3.0, 0.75, torch.Generator().manual_seed(0))
    assert pts.shape == (3, 100, 2) and float(pts.min()) >= 0 and float(pts.max()) <= 1


def test_dice_and_bce_closed_forms() -> None:
    # s = sigmoid(0) = 0.5 on 2 points, t = (1, 0): dice = 1 - (2 * 0.5 + 1) / (1 + 1 + 1) = 1/3
    assert dice_loss(torch.zeros(1, 2), torch.tensor([[1.0, 0.0]])).item() == pytest.approx(1 / 3)
    assert sigmoid_bce(torch.zeros(1, 2), torch.tensor([[1.0, 0.0]])).item() == pytest.approx(
        0.6931472, abs=1e-6
    )
    t = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    assert dice_loss(torch.where(t > 0, 60.0, -60.0), t).item() == pytest.approx(0.0, abs=1e-6)


def test_deform_conv_with_zero_offsets_and_unit_mask_is_a_plain_conv() -> None:
    torch.manual_seed(0)
    dcn = DeformConv2d(3, 4, 3, padding=1, bias=False)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
    conv.weight.data.copy_(dcn.weight.data)
    x = torch.randn(2, 3, 6, 7)
    out = dcn(x, torch.zeros(2, 18, 6, 7), torch.ones(2, 9, 6, 7))
    torch.testing.assert_close(out, conv(x), atol=1e-5, rtol=1e-5)


def test_tube_layout_round_trips_and_splits_per_frame() -> None:
    x = torch.randn(2, 3, 5, 4, 6)  # (B, T, C, H, W)
    tube = frames_to_tube(x)
    assert tube.shape == (2, 5, 12, 6)
    torch.testing.assert_close(tube[:, :, 4:8], x[:, 1])  # frame 1 sits at rows H..2H
    torch.testing.assert_close(tube_to_frames(tube, 3), x)
    with pytest.raises(ValueError, match="multiple"):
        tube_to_frames(tube, 5)


def test_clip_linking_recovers_a_known_permutation() -> None:
    q = torch.randn(6, 8, generator=torch.Generator().manual_seed(5))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    cur = q[perm] + 0.01 * torch.randn(6, 8, generator=torch.Generator().manual_seed(6))
    back = link_clips(q, cur)
    torch.testing.assert_close(cur[back], q, atol=0.1, rtol=0)
    assert perm[back].tolist() == list(range(6))


def test_prompt_encoder_sine_encodes_the_normalised_box() -> None:
    """The released encoding: the (cx, cy, w, h) box over the image size, sine-encoded as it is (no
    inverse sigmoid), then the linear layer, the type embedding and the mask token."""
    from iclr25.methods.rmp_sam import PromptEncoder
    from iclr25.methods.rmp_sam.prompts import sine_encoding

    torch.manual_seed(0)
    enc = PromptEncoder(16)
    boxes = torch.tensor([[[2.0, 4.0, 10.0, 12.0]]])  # XYXY on a 32 (w) x 16 (h) image
    kinds = torch.zeros(1, 1, dtype=torch.long)
    cxcywh = torch.tensor([[[6.0 / 32, 8.0 / 16, 8.0 / 32, 8.0 / 16]]])
    want = enc.proj(sine_encoding(cxcywh, 128)) + enc.type_embed(kinds) + enc.mask_token
    torch.testing.assert_close(enc(boxes, kinds, 16, 32), want)
    # the first code of cx is sin(2 pi cx) at the lowest frequency
    assert float(sine_encoding(cxcywh, 128)[0, 0, 0]) == pytest.approx(
        math.sin(2 * math.pi * 6.0 / 32), abs=1e-6
    )
