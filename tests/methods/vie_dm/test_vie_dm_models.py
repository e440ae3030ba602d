"""Tokenizer, visual features, token selection, VTC masking, VIEDM / AR speaker / listener plumbing."""

from __future__ import annotations

import pytest
import torch

from iclr25.methods.vie_dm import (
    VIEDM,
    ARSpeaker,
    ExpressionTokenizer,
    ImageEncoder,
    Listener,
    ListenerConfig,
    VIEDMConfig,
    VisionTextCondition,
    roi_features,
    select_tokens,
    train_viedm,
)

WORDS = ["the", "red", "blue", "circle", "square", "left", "of"]


def _tok() -> ExpressionTokenizer:
    return ExpressionTokenizer(WORDS)


def test_tokenizer_round_trip_unknown_and_truncation(one_thread) -> None:
    tok = _tok()
    ids = tok.encode(["the red circle", "the green circle"], length=6)
    assert tok.decode(ids) == ["the red circle", "the <unk> circle"]
    assert ids[0].tolist() == [4, 5, 7, 2, 0, 0]
    long = tok.encode(["the red circle left of the blue square"], length=4)
    assert long[0].tolist() == [4, 5, 7, 2]  # first words kept, eos last
    assert tok.encode(["red"], length=4, bos=True)[0].tolist() == [1, 5, 2, 0]
    with pytest.raises(ValueError):
        tok.encode(["red"], length=1)


def test_roi_align_of_the_whole_image_approximates_global_pooling(one_thread) -> None:
    fmap = torch.randn(2, 5, 6, 6, generator=torch.Generator().manual_seed(0))
    fmap = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(fmap, (1, 1, 1, 1), mode="replicate"), 3, 1)
    whole = torch.tensor([[0.0, 0.0, 48.0, 48.0]] * 2)
    roi = roi_features(fmap, whole, stride=8, output_size=3).mean(1)  # (2, 5)
    assert torch.allclose(roi, fmap.mean((2, 3)), atol=0.05)


def test_token_selection_returns_exactly_the_top_k_and_checks_k(one_thread) -> None:
    gen = torch.Generator().manual_seed(0)
    tokens, target = torch.randn(3, 10, 4, generator=gen), torch.randn(3, 4, generator=gen)
    sel, idx, _ = select_tokens(tokens, target, 4)
    want = torch.nn.functional.cosine_similarity(tokens, target[:, None], dim=-1).topk(4, dim=1).indices
    assert torch.equal(idx, want) and sel.shape == (3, 4, 4)
    assert torch.equal(sel[1, 2], tokens[1, idx[1, 2]])
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[:, want[:, 0]] = True
    assert not bool((select_tokens(tokens, target, 4, mask=mask)[1] == want[:, :1]).any())
    with pytest.raises(ValueError, match="top-k"):
        select_tokens(tokens, target, 11)


def test_padded_visual_tokens_do_not_change_the_vtc_output(one_thread) -> None:
    torch.manual_seed(0)
    vtc = VisionTextCondition(16, 4, 2).eval()
    text, memory = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    mask = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
    a = vtc(text, memory, mask)
    memory2 = memory.clone()
    memory2[0, 4:] = 100.0
    assert torch.allclose(a, vtc(text, memory2, mask), atol=1e-6)
    memory3 = memory.clone()
    memory3[0, 0] += 1.0
    assert not torch.allclose(a, vtc(text, memory3, mask))  # a real token does matter


def _model(**kw: object) -> VIEDM:
    torch.manual_seed(0)
    return VIEDM(VIEDMConfig.tiny(len(_tok())).replace(**kw), grid_tokens=36, decode=_tok().decode)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(3, 3, 48, 48, generator=torch.Generator().manual_seed(0))
    return images, torch.tensor([[2.0, 2, 20, 20], [10, 12, 30, 40], [0, 0, 48, 48]])


def test_same_generator_same_expressions_and_seeds_differ(one_thread) -> None:
    model = _model()
    images, boxes = _batch()
    g = lambda s: torch.Generator().manual_seed(s)  # noqa: E731
    a = model.generate_ids(images, boxes, num_samples=3, steps=5, generator=g(1))
    b = model.generate_ids(images, boxes, num_samples=3, steps=5, generator=g(1))
    assert torch.equal(a, b) and a.shape == (3, 3, 12)
    # the reverse process itself: the same generator repeats, another seed differs
    proc = model.diffusion.spaced(5)
    fn = lambda x, t: 0.5 * x  # noqa: E731
    emb = model.embedding.weight
    x1 = proc.sample(fn, (2, 12, 32), emb, clamp=False, generator=g(1))
    assert torch.equal(x1, proc.sample(fn, (2, 12, 32), emb, clamp=False, generator=g(1)))
    assert not torch.allclose(x1, proc.sample(fn, (2, 12, 32), emb, clamp=False, generator=g(2)))
    shared = model.generate_ids(
        images, boxes, num_samples=3, steps=5, generator=g(1), shared_noise=True, ddim_eta=0.0
    )
    assert torch.equal(shared[:, 0], shared[:, 1]) and torch.equal(shared[:, 0], shared[:, 2])


def test_generation_and_loss_errors(one_thread) -> None:
    model = _model()
    images, boxes = _batch()
    with pytest.raises(ValueError, match="num_samples"):
        model.generate_ids(images, boxes, num_samples=0)
    with pytest.raises(ValueError, match="steps"):
        model.generate_ids(images, boxes, steps=201)
    with pytest.raises(ValueError, match="empty box"):
        model.generate_ids(images, torch.tensor([[5.0, 5, 5, 9]] * 3), steps=2)
    with pytest.raises(ValueError, match="outside"):
        model.generate_ids(images, torch.tensor([[5.0, 5, 60, 9]] * 3), steps=2)
    with pytest.raises(ValueError, match="length"):
        model.loss(images, boxes, torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="top_k"):
        VIEDMConfig.tiny().replace(top_k=0)
    with pytest.raises(ValueError, match="sampling_steps"):
        from iclr25.methods.vie_dm import DiffusionConfig

        DiffusionConfig(steps=10, sampling_steps=20)
    big = _model(top_k=40)
    with pytest.raises(ValueError, match="top-k"):
        big.loss(images, boxes, torch.zeros(3, 12, dtype=torch.long))


def test_viedm_learns_one_expression_per_box(one_thread) -> None:
    """Fit two boxes with two fixed expressions; the EMA model must write them back."""
    tok = _tok()
    model = _model(diffusion=VIEDMConfig.tiny().diffusion.__class__(steps=50, sampling_steps=10))
    images = torch.zeros(2, 3, 48, 48)
    images[0, 0, 4:20, 4:20] = 1.0
    images[1, 2, 24:44, 24:44] = 1.0
    boxes = torch.tensor([[4.0, 4, 20, 20], [24, 24, 44, 44]])
    ids = tok.encode(["the red square", "the blue circle"], length=12)
    ema, losses = train_viedm(
        model, images.repeat(16, 1, 1, 1), boxes.repeat(16, 1), ids.repeat(16, 1), steps=150, batch_size=16,
        lr=3e-3, ema=0.9, generator=torch.Generator().manual_seed(0), progress_every=50,
    )  # fmt: skip
    assert losses[-1] < losses[0]
    out = ema.generate_expressions(images, boxes, num_samples=2, generator=torch.Generator().manual_seed(0))
    assert out[0] == ["the red square"] * 2 and out[1] == ["the blue circle"] * 2


def test_no_vtc_ablation_ignores_unselected_context_and_runs(one_thread) -> None:
    model = _model(use_vtc=False)
    images, boxes = _batch()
    ids = _tok().encode(["the red circle"] * 3, length=12)
    out = model.loss(images, boxes, ids, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(out["loss"])


def test_ar_speaker_decoding_modes_and_errors(one_thread) -> None:
    torch.manual_seed(0)
    sp = ARSpeaker(VIEDMConfig.tiny(len(_tok())), decode=_tok().decode)
    images, boxes = _batch()
    beams = sp.generate(images, boxes, mode="beam", beam=4, num_return=4)
    assert beams.shape == (3, 4, 12)
    assert all(len({tuple(r) for r in b.tolist()}) == 4 for b in beams)  # distinct beams
    greedy = sp.generate(images, boxes, mode="greedy")
    assert torch.equal(beams[:, 0, :3], greedy[:, 0, :3]) or greedy.shape == (3, 1, 12)
    s1 = sp.generate(images, boxes, mode="sample", num_return=2, generator=torch.Generator().manual_seed(3))
    s2 = sp.generate(images, boxes, mode="sample", num_return=2, generator=torch.Generator().manual_seed(3))
    assert torch.equal(s1, s2)
    with pytest.raises(ValueError, match="mode"):
        sp.generate(images, boxes, mode="nucleus")
    with pytest.raises(ValueError, match="num_return"):
        sp.generate(images, boxes, mode="beam", beam=2, num_return=3)
    assert len(sp.generate_expressions(images, boxes, num_samples=2)) == 3


def test_listener_masks_padded_candidates_and_checks_boxes(one_thread) -> None:
    torch.manual_seed(0)
    lis = Listener(ListenerConfig.tiny(len(_tok()))).eval()
    images = torch.rand(2, 3, 48, 48)
    boxes = torch.tensor(
        [[[2.0, 2, 9, 9], [5, 5, 30, 30], [0, 0, 0, 0]], [[1.0, 1, 5, 5], [6, 6, 40, 40], [0, 0, 9, 9]]]
    )
    mask = torch.tensor([[True, True, False], [True, True, True]])
    ids = _tok().encode(["the red circle", "blue square"], length=12)
    logits = lis.score(images, boxes, ids, box_mask=mask)
    assert logits.shape == (2, 3) and torch.isinf(logits[0, 2]) and torch.isfinite(logits[1]).all()
    boxes2 = boxes.clone()
    boxes2[0, 2] = torch.tensor([3.0, 3, 7, 7])  # a different padded box changes nothing
    assert torch.allclose(logits[0, :2], lis.score(images, boxes2, ids, box_mask=mask)[0, :2], atol=1e-6)
    with pytest.raises(ValueError, match="empty box"):
        lis.score(images, boxes, ids)  # the zero padded box is real without a mask


def test_image_encoder_stride_and_grid(one_thread) -> None:
    enc = ImageEncoder((8, 16, 16))
    assert enc(torch.zeros(1, 3, 48, 48)).shape == (1, 16, 6, 6) and enc.stride == 8
    with pytest.raises(ValueError):
        ImageEncoder(())
