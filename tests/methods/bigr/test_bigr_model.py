"""Tokenizer, backbone, BiGR model, AR baseline, sampler, pipeline and checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.methods.bigr import (
    BernoulliQuantizer,
    BiGR,
    BiGRConfig,
    BiGRPipeline,
    BinaryAEConfig,
    BinaryAutoencoder,
    CausalAR,
    FeatureNet,
    PerceptualLoss,
    SamplerConfig,
    TranscoderConfig,
    apply_rope,
    generate,
    l_d24,
    load_state,
    masked_count,
    outpaint_mask,
    pack_bits,
    rope_2d,
    save_checkpoint,
    tiny,
    train_feature_net,
    train_tokenizer,
    unmask_schedule,
    unpack_bits,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**kw: object) -> BiGR:
    torch.manual_seed(0)
    return BiGR(BiGRConfig(**{**tiny().__dict__, **kw})).eval()  # type: ignore[arg-type]


def _bits(b: int = 2, n: int = 16, k: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 2, (b, n, k), generator=torch.Generator().manual_seed(seed)).float()


def _randomise(model: torch.nn.Module) -> None:
    """Give zero-initialised layers (adaLN, transcoder output) random weights."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def test_straight_through_gradient_is_one() -> None:
    q = BernoulliQuantizer(4, 3)
    h = torch.randn(2, 4, 2, 2)
    p = torch.sigmoid(q.proj(h)).detach().requires_grad_(True)
    b = torch.bernoulli(p.detach())
    b_st = b + p - p.detach()
    b_st.sum().backward()
    torch.testing.assert_close(p.grad, torch.ones_like(p))
    out, codes = q(h, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out.detach(), codes.bits, atol=1e-6, rtol=0)
    assert set(codes.bits.unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(codes.bits_det, (codes.probs > 0.5).float())
    out.sum().backward()  # gradient reaches the projection through p
    assert q.proj.weight.grad is not None and q.proj.weight.grad.abs().sum() > 0


def test_autoencoder_shapes_and_bad_input() -> None:
    cfg = BinaryAEConfig(nf=8, ch_mult=(1, 2, 2), num_res_blocks=1, attn_resolutions=(4,), emb_dim=16,
                         code_dim=6, resolution=16)  # fmt: skip
    ae = BinaryAutoencoder(cfg)
    codes = ae.encode(torch.zeros(2, 3, 16, 16))
    assert codes.probs.shape == (2, 6, 4, 4) and ae.decode(codes.bits).shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match="images"):
        ae.encode(torch.zeros(2, 3, 8, 8))
    with pytest.raises(ValueError, match="bits"):
        ae.decode(torch.zeros(2, 5, 4, 4))
    with pytest.raises(ValueError):
        BinaryAEConfig(resolution=100)


def test_autoencoder_norms_keep_channel_means_at_small_widths() -> None:
    """One channel per GroupNorm group is InstanceNorm, which erases each image's mean colour at
    the output layer (the bug the 16-channel CPU tokenizer had); paper widths keep 32 groups."""
    small = BinaryAutoencoder(BinaryAEConfig(nf=8, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(),
                                             emb_dim=16, code_dim=6, resolution=8))  # fmt: skip
    norms = [m for m in small.modules() if isinstance(m, torch.nn.GroupNorm)]
    assert norms and all(m.num_channels // m.num_groups >= 4 for m in norms)
    paper = BinaryAutoencoder(BinaryAEConfig(nf=128, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(),
                                             emb_dim=16, code_dim=6, resolution=8))  # fmt: skip
    assert {m.num_groups for m in paper.modules() if isinstance(m, torch.nn.GroupNorm)} == {32}


def test_perceptual_loss_is_a_distance_whose_gradient_reaches_only_the_image() -> None:
    torch.manual_seed(0)
    loss = PerceptualLoss(FeatureNet(4, widths=(4, 8, 8))).train()
    assert not loss.net.training
    x = torch.rand(3, 3, 16, 16) * 2 - 1
    x_hat = (x + 0.3 * torch.randn_like(x)).requires_grad_()
    d = loss(x_hat, x)
    assert float(loss(x, x)) == 0.0 and float(d) > 0.0
    d.backward()
    assert x_hat.grad is not None and x_hat.grad.abs().sum() > 0
    assert all(p.grad is None for p in loss.net.parameters())
    with pytest.raises(ValueError, match="equal shapes"):
        loss(x[:2], x)


def test_feature_net_learns_and_train_tokenizer_uses_the_perceptual_term() -> None:
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (64,), generator=gen)
    x = torch.randn(64, 3, 8, 8, generator=gen) * 0.1 + (2 * y.float() - 1)[:, None, None, None]
    torch.manual_seed(0)
    net = train_feature_net(x, y, 2, steps=30, batch_size=16, generator=gen)
    assert not net.training and float((net(x).argmax(-1) == y).float().mean()) > 0.9
    cfg = BinaryAEConfig(nf=8, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(), emb_dim=8, code_dim=4,
                         resolution=8)  # fmt: skip
    calls = []

    def counted(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls.append(a.shape)
        return PerceptualLoss(net)(a, b)

    ae = BinaryAutoencoder(cfg)
    with_term = train_tokenizer(ae, x, steps=3, batch_size=4, generator=gen, perceptual=counted)
    assert len(calls) == 3 and len(with_term) == 3
    train_tokenizer(ae, x, steps=2, batch_size=4, generator=gen, perceptual=counted, perceptual_weight=0.0)
    assert len(calls) == 3  # weight 0 skips the term
    with pytest.raises(ValueError, match="perceptual_weight"):
        train_tokenizer(ae, x, steps=1, perceptual=counted, perceptual_weight=-1.0)
    with pytest.raises(ValueError, match="labels"):
        train_feature_net(x, y[:3], 2, steps=1)


def test_masked_count_schedule_in_range() -> None:
    for n in (1, 4, 16, 256):
        counts = [masked_count(s, n) for s in range(n)]
        assert all(1 <= c <= n for c in counts) and counts[0] == n
        assert counts == sorted(counts, reverse=True)


def test_loss_ignores_outputs_at_unmasked_positions() -> None:
    model = _model()
    _randomise(model)
    model.train()
    grads = []

    def keep(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        output.retain_grad()
        grads.append(output)

    model.norm.register_forward_hook(keep)
    out = model.loss(_bits(4), torch.tensor([0, 1, 2, 3]), generator=torch.Generator().manual_seed(2))
    out["loss"].backward()
    g = grads[0].grad  # (B, N, D): the norm sees the image tokens only
    touched = (g.abs().sum(-1) > 0).sum(1)  # token positions that receive gradient
    assert touched.tolist() == [int(out["masked"])] * 4


def test_bidirectional_model_sees_later_tokens_causal_ones_do_not() -> None:
    bits = _bits(1)
    later = bits.clone()
    later[0, -1] = 1 - later[0, -1]
    labels = torch.tensor([1])
    for causal, expect_change in ((False, True), (True, False)):
        model = _model(causal=causal)
        _randomise(model)
        hs_a = model.backbone(model.bit_proj(bits), labels)[-1]
        hs_b = model.backbone(model.bit_proj(later), labels)[-1]
        changed = not torch.allclose(hs_a[0, 1], hs_b[0, 1])  # first image token's output
        assert changed == expect_change
    ar = CausalAR(code_dim=8, grid=4, num_classes=4, dim=32, depth=2, heads=2)
    _randomise(ar)
    la, lb = ar.logits(pack_bits(bits)[:, :-1], labels), ar.logits(pack_bits(later)[:, :-1], labels)
    torch.testing.assert_close(la, lb)  # the last token is never an input to earlier predictions
    la2 = ar.logits(pack_bits(later)[:, 1:], labels)
    assert not torch.allclose(la[:, 1:], la2[:, 1:])


def test_rope_2d_depends_only_on_relative_offset() -> None:
    grid, hd = 4, 16
    table = rope_2d(grid, hd)
    assert table.shape == (1 + grid * grid, hd // 2, 2)
    assert float(table[0].abs().sum()) == 0.0  # class-token row: cos = sin = 0
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(hd, generator=gen), torch.randn(hd, generator=gen)

    def dot(i: int, j: int) -> float:
        qi = apply_rope(q.expand(1, 1, 1 + grid * grid, hd), table)[0, 0, 1 + i]
        kj = apply_rope(k.expand(1, 1, 1 + grid * grid, hd), table)[0, 0, 1 + j]
        return float(qi @ kj)

    def pos(r: int, c: int) -> int:
        return r * grid + c

    assert math.isclose(dot(pos(0, 0), pos(1, 2)), dot(pos(2, 1), pos(3, 3)), rel_tol=1e-5)
    assert math.isclose(dot(pos(1, 3), pos(0, 1)), dot(pos(3, 2), pos(2, 0)), rel_tol=1e-5)
    assert not math.isclose(dot(pos(0, 0), pos(1, 2)), dot(pos(0, 0), pos(2, 1)), rel_tol=1e-3)
    cls = apply_rope(q.expand(1, 1, 1 + grid * grid, hd), table)[0, 0, 0]
    assert float(cls.abs().sum()) == 0.0  # the class token's q (and k) vanish


def test_sampler_schedule_reveals_and_never_changes_tokens() -> None:
    model = _model()
    _randomise(model)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    forward = model.forward

    def spy(bits, labels, token_mask=None, **kw):  # type: ignore[no-untyped-def]
        seen.append((bits.clone(), token_mask.clone()))
        return forward(bits, labels, token_mask, **kw)

    model.forward = spy  # type: ignore[method-assign]
    out = generate(model, torch.tensor([0, 3]), num_iter=5, cfg_scale=1.0, diffusion_steps=4,
                   generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert out.passes == 5 == len(seen) and out.network_evals == 5
    masked = [int(m[0].sum()) for _, m in seen]
    assert masked == [16, *unmask_schedule(16, 5)[:-1]]
    for (b_prev, m_prev), (b_next, _) in zip(seen, [*seen[1:], (out.bits, None)], strict=True):
        revealed = ~m_prev
        assert torch.equal(b_prev[revealed], b_next[revealed])  # revealed tokens never change
    assert unmask_schedule(16, 5)[-1] == 0
    out2 = generate(model, torch.tensor([0, 3]), num_iter=16, cfg_scale=3.0, diffusion_steps=2,
                    generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert out2.passes == 16 and out2.network_evals == 32  # one token per iteration at S = N


def test_inpainting_keeps_known_tokens_bit_identical() -> None:
    model = _model()
    _randomise(model)
    known = _bits(2)
    keep = ~outpaint_mask(4, 2).expand(2, -1)  # centre 2 x 2 known
    out = generate(model, torch.tensor([1, 2]), num_iter=4, diffusion_steps=4, gumbel_temp=10.0,
                   known_bits=known, known_mask=keep, generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.equal(out.bits[keep], known[keep])
    assert set(out.bits.unique().tolist()) <= {0.0, 1.0}


def test_same_generator_same_images_other_seed_differs() -> None:
    model = _model()
    _randomise(model)
    kw = {"num_iter": 4, "diffusion_steps": 4, "gumbel_temp": 0.5}
    a = generate(model, torch.tensor([0, 1]), generator=torch.Generator().manual_seed(7), **kw).bits
    b = generate(model, torch.tensor([0, 1]), generator=torch.Generator().manual_seed(7), **kw).bits
    c = generate(model, torch.tensor([0, 1]), generator=torch.Generator().manual_seed(8), **kw).bits
    assert torch.equal(a, b) and not torch.equal(a, c)
    ar = CausalAR(code_dim=8, grid=4, num_classes=4, dim=32, depth=1, heads=2)
    x = ar.generate(torch.tensor([0, 1]), generator=torch.Generator().manual_seed(7))
    y = ar.generate(torch.tensor([0, 1]), generator=torch.Generator().manual_seed(7))
    assert torch.equal(x[0], y[0]) and x[1] == 16


def test_argmax_sampler_is_deterministic() -> None:
    model = _model()
    _randomise(model)
    kw = {"num_iter": 4, "diffusion_steps": 4, "deterministic": True}
    a = generate(model, torch.tensor([2, 2]), generator=torch.Generator().manual_seed(1), **kw).bits
    b = generate(model, torch.tensor([2, 2]), generator=torch.Generator().manual_seed(2), **kw).bits
    assert torch.equal(a, b) and torch.equal(a[0], a[1])  # one image per class: mode collapse


def test_pack_bits_is_a_bijection() -> None:
    ids = torch.arange(2**10)
    assert torch.equal(pack_bits(unpack_bits(ids, 10)), ids)
    bits = _bits(3, 16, 10)
    assert torch.equal(unpack_bits(pack_bits(bits), 10), bits)


def test_features_use_null_class_and_check_layer() -> None:
    model = _model()
    _randomise(model)
    bits = _bits(3)
    f = model.extract_features(bits, layer=1)
    null = torch.full((3,), model.null_class)
    torch.testing.assert_close(f, model.extract_features(bits, layer=1, labels=null))
    assert not torch.allclose(f, model.extract_features(bits, layer=1, labels=torch.tensor([0, 1, 2])))
    with pytest.raises(ValueError, match="layer"):
        model.extract_features(bits, layer=3)
    with pytest.raises(ValueError, match="layer"):
        model.extract_features(bits, layer=-1)
    # layer 0 is the pooled input encoding, before any block
    torch.testing.assert_close(model.extract_features(bits, layer=0), model.bit_proj(bits).mean(1))


def test_bad_input_raises() -> None:
    model = _model()
    labels = torch.tensor([0, 1])
    with pytest.raises(ValueError, match="binary"):
        model.loss(_bits(2) * 0.5, labels)
    with pytest.raises(ValueError, match="shape"):
        model.loss(_bits(2, k=7), labels)
    with pytest.raises(ValueError, match="labels"):
        model.loss(_bits(2), torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="num_iter"):
        generate(model, labels, num_iter=17, diffusion_steps=2)
    with pytest.raises(ValueError, match="cfg_scale"):
        generate(model, labels, num_iter=2, cfg_scale=-1.0, diffusion_steps=2)
    with pytest.raises(ValueError, match="labels"):
        generate(model, torch.tensor([4]), num_iter=2, diffusion_steps=2)
    with pytest.raises(ValueError, match="cfg_scale"):
        SamplerConfig(cfg_scale=-0.5)
    with pytest.raises(ValueError, match="divisible"):
        BiGRConfig(dim=30, heads=4)
    with pytest.raises(ValueError, match="sample_steps"):
        TranscoderConfig(timesteps=8, sample_steps=9)
    with pytest.raises(ValueError, match="code_dim"):
        CausalAR(code_dim=13, grid=2, num_classes=2, dim=16, depth=1, heads=2)


def test_checkpoint_model_and_ema_reload_identically(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _model()
    _randomise(model)
    ema = _model()
    path = tmp_path / "bigr.pt"
    save_checkpoint(path, model, ema)
    blob = torch.load(path, weights_only=True)
    assert set(blob) == {"model", "ema"}
    again = load_state(_model(head="transcoder"), path, key="model")
    bits = _bits(2)
    torch.testing.assert_close(again.extract_features(bits, layer=2), model.extract_features(bits, layer=2))
    from_ema = load_state(_model(), path)  # inference default: "ema"
    torch.testing.assert_close(from_ema.extract_features(bits, layer=2), ema.extract_features(bits, layer=2))
    with pytest.raises(KeyError, match="does not fit"):
        load_state(_model(head="bit"), path)
    with pytest.raises(FileNotFoundError):
        load_state(_model(), tmp_path / "missing.pt")


def test_pipeline_outputs_and_interpolation() -> None:
    ae = BinaryAutoencoder(BinaryAEConfig(nf=8, ch_mult=(1, 2, 2), num_res_blocks=1, attn_resolutions=(),
                                          emb_dim=16, code_dim=8, resolution=16))  # fmt: skip
    model = _model()
    _randomise(model)
    pipe = BiGRPipeline(ae, model)
    gen = torch.Generator().manual_seed(0)
    out = pipe(torch.tensor([0, 1]), num_iter=4, diffusion_steps=2, generator=gen, output_type="np")
    assert out.images.shape == (2, 16, 16, 3) and out.passes == 4 and out.network_evals == 8
    pil = pipe(torch.tensor([0]), num_iter=2, diffusion_steps=2, generator=gen, output_type="pil")
    assert pil.images[0].size == (16, 16)
    mid = pipe.interpolate(0, 3, [0.0, 0.5, 1.0], num_iter=2, diffusion_steps=2, generator=gen)
    assert mid.images.shape == (3, 3, 16, 16) and float(mid.images.min()) >= 0.0
    img = torch.zeros(2, 3, 16, 16)
    fill = pipe.inpaint(
        img, outpaint_mask(4, 2), torch.tensor([0, 1]), num_iter=3, diffusion_steps=2, generator=gen
    )
    known = pipe.bits_to_tokens(ae.encode(img).bits_det)
    keep = ~outpaint_mask(4, 2)
    assert torch.equal(fill.bits[:, keep], known[:, keep])
    with pytest.raises(ValueError, match="output_type"):
        pipe(torch.tensor([0]), num_iter=2, diffusion_steps=2, output_type="jpg")


def test_paper_presets_are_configs_only() -> None:
    cfg = l_d24()
    assert (cfg.depth, cfg.heads, cfg.dim, cfg.transcoder.depth, cfg.num_tokens) == (24, 16, 1024, 3, 256)
