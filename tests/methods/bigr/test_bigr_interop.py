"""Images to features (the paper's representation use), the official checkpoint key map, and EMA."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from iclr25.methods.bigr import (
    BiGR,
    BiGRConfig,
    BiGRPipeline,
    BinaryAEConfig,
    BinaryAutoencoder,
    from_official_names,
    generate_causal,
    load_official_state_dict,
    tiny,
    to_official_names,
    train_bigr,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**kw: object) -> BiGR:
    torch.manual_seed(0)
    model = BiGR(BiGRConfig(**{**tiny().__dict__, **kw})).eval()  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # give zero-initialised layers (adaLN, transcoder output) weights
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    return model


def _pipe() -> BiGRPipeline:
    torch.manual_seed(2)
    ae = BinaryAutoencoder(BinaryAEConfig(nf=8, ch_mult=(1, 2, 2), num_res_blocks=1, attn_resolutions=(),
                                          emb_dim=16, code_dim=8, resolution=16))  # fmt: skip
    return BiGRPipeline(ae, _model())


def _images(n: int = 5) -> torch.Tensor:
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(3)) * 2 - 1


def test_encode_images_pools_unmasked_codes_with_the_null_class() -> None:
    pipe = _pipe()
    x = _images()
    f = pipe.encode_images(x)
    assert f.shape == (5, 64) and pipe.feature_layer == 1  # tiny: depth 2 -> layer 1
    # by hand: deterministic bits, every token visible, null class, pre-norm, pooled
    tokens = pipe.bits_to_tokens(pipe.tokenizer.encode(x).bits_det)
    hs = pipe.model.backbone(pipe.model.bit_proj(tokens), torch.full((5,), pipe.model.null_class), stop_at=1)
    torch.testing.assert_close(f, hs[-1][:, 1:].mean(1))
    torch.testing.assert_close(pipe.encode_images(x, batch_size=2), f)  # batching changes nothing
    assert not torch.allclose(pipe.encode_images(x, layer=2), f)
    # an image's features do not depend on the rest of the batch
    torch.testing.assert_close(pipe.encode_images(x[:1]), f[:1])


def test_encode_images_rejects_bad_input() -> None:
    pipe = _pipe()
    x = _images(2)
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        pipe.encode_images(x.numpy())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="floating-point"):
        pipe.encode_images(((x + 1) * 127.5).to(torch.uint8))
    with pytest.raises(ValueError, match="shape"):
        pipe.encode_images(x[:, :1])
    with pytest.raises(ValueError, match="shape"):
        pipe.encode_images(x[0])
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        pipe.encode_images((x + 1) * 127.5)
    with pytest.raises(ValueError, match="NaN"):
        pipe.encode_images(torch.full_like(x, float("nan")))
    with pytest.raises(ValueError, match="layer"):
        pipe.encode_images(x, layer=3)
    with pytest.raises(ValueError, match="feature_layer"):
        BiGRPipeline(pipe.tokenizer, pipe.model, feature_layer=0)


def _official(model: BiGR) -> dict[str, torch.Tensor]:
    """A state dict in the released layout, as the official training script would write it: the
    diffusion wrapper holds a second reference to the denoiser."""
    state = {k: v.clone() for k, v in to_official_names(model.state_dict()).items()}
    for k in [k for k in state if k.startswith("denoise_mlp.")]:
        state["diffusion_processor.denoise_fn." + k.removeprefix("denoise_mlp.")] = state[k]
    return state


def test_official_names_are_the_released_layout() -> None:
    state = to_official_names(_model().state_dict())
    for name in ("cls_embedding.embedding_table.weight", "tok_embeddings.weight", "adaLN.1.weight",
                 "layers.1.attention.wqkv.weight", "layers.0.feed_forward.w3.weight", "layers.1.ada_gss",
                 "layers.0.attention_norm.weight", "norm.weight", "diffusion_pos_embed_learned",
                 "denoise_mlp.t_embedder.mlp.2.bias", "denoise_mlp.blocks.1.adaLN_modulation.1.weight",
                 "denoise_mlp.final_layer.linear.weight"):  # fmt: skip
        assert name in state, name
    assert state["mask_tok"].shape == (1, 64)  # (1, D) there, (D,) here
    assert state["denoise_mlp.t_embedder.mlp.0.weight"].shape == (64, 256)  # 256-d timestep frequencies
    assert state["cls_embedding.embedding_table.weight"].shape == (5, 64)  # 4 classes + null
    back = from_official_names(state)
    own = _model().state_dict()
    assert set(back) == set(own) and all(torch.equal(back[k], own[k]) for k in own)


@pytest.mark.parametrize("fmt", ["torch", "safetensors"])
def test_official_checkpoint_loads_into_our_model(tmp_path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    model = _model()
    official = _official(model)
    if fmt == "torch":
        path = tmp_path / "bigr.pt"
        raw = {k: torch.zeros_like(v) for k, v in official.items()}
        torch.save({"model": raw, "ema": official}, path)
    else:
        path = tmp_path / "bigr.safetensors"
        save_file(
            {k: v.contiguous() for k, v in official.items() if not k.startswith("diffusion_processor.")}, path
        )
    torch.manual_seed(9)
    fresh = BiGR(tiny()).eval()  # other weights until loaded
    load_official_state_dict(path, fresh)
    own = model.state_dict()
    assert all(torch.equal(fresh.state_dict()[k], own[k]) for k in own)
    bits = torch.randint(0, 2, (2, 16, 8), generator=torch.Generator().manual_seed(0)).float()
    torch.testing.assert_close(fresh.extract_features(bits, layer=2), model.extract_features(bits, layer=2))
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[:, 5:] = True
    labels = torch.tensor([0, 3])
    torch.testing.assert_close(fresh(bits, labels, mask), model(bits, labels, mask))
    if fmt == "torch":  # the raw weights are the other entry
        raw_model = load_official_state_dict(path, BiGR(tiny()), key="model")
        assert all(float(p.detach().abs().sum()) == 0 for p in raw_model.parameters())


def test_official_loader_names_what_does_not_fit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    official = _official(_model())
    with pytest.raises(KeyError, match=r"unexpected keys.*output\.weight"):
        load_official_state_dict({**official, "output.weight": torch.zeros(3)}, BiGR(tiny()))
    short = {k: v for k, v in official.items() if k != "layers.1.ada_gss"}
    with pytest.raises(KeyError, match=r"missing \(ours\) \['backbone.blocks.1.ada_offset'\]"):
        load_official_state_dict(short, BiGR(tiny()))
    deeper = BiGR(BiGRConfig(**{**tiny().__dict__, "depth": 3}))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"backbone\.blocks\.2"):
        load_official_state_dict(official, deeper)
    more = BiGR(tiny(num_classes=6))
    with pytest.raises(
        ValueError, match=r"backbone.class_emb.weight: checkpoint \(5, 64\) vs model \(7, 64\)"
    ):
        load_official_state_dict(official, more)
    with pytest.raises(KeyError, match="'ema'"):
        load_official_state_dict({"model": official}, BiGR(tiny()))
    with pytest.raises(FileNotFoundError, match="local paths"):
        load_official_state_dict(tmp_path / "none.pt", BiGR(tiny()))
    with pytest.raises(KeyError, match="no official name"):
        to_official_names({"head.something": torch.zeros(1)})


def test_ema_follows_the_update_rule_and_feeds_the_evaluations() -> None:
    model = _model()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    bits = torch.randint(0, 2, (8, 16, 8), generator=torch.Generator().manual_seed(0)).float()
    labels = torch.arange(8) % 4
    seen: list[tuple[int, bool]] = []
    _, ema = train_bigr(
        model, lambda idx: bits[idx], labels, steps=5, batch_size=4, ema_decay=0.0,
        generator=torch.Generator().manual_seed(0), eval_every=2,
        on_eval=lambda step, m: seen.append((step, m.training)),
    )  # fmt: skip
    assert [s for s, _ in seen] == [2, 4, 5] and not any(t for _, t in seen)
    assert ema is not None  # decay 0: the EMA is the model itself
    assert all(torch.equal(a, b) for a, b in zip(ema.parameters(), model.parameters(), strict=True))
    model2 = _model()
    _, ema2 = train_bigr(model2, lambda idx: bits[idx], labels, steps=1, batch_size=4, ema_decay=0.75,
                         generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert ema2 is not None
    for (name, p), pe in zip(model2.named_parameters(), ema2.parameters(), strict=True):
        torch.testing.assert_close(pe, 0.75 * start[name] + 0.25 * p.detach())
    with pytest.raises(ValueError, match="ema_decay"):
        train_bigr(model, lambda idx: bits[idx], labels, steps=1, ema_decay=1.0)


def test_causal_sampler_conditions_each_token_as_training_does() -> None:
    model = _model(causal=True)
    labels = torch.tensor([0, 3])
    seen: list[torch.Tensor] = []
    prob = model.head.prob

    def spy(cond: torch.Tensor, *args: object, **kw: object) -> torch.Tensor:
        seen.append(cond.clone())
        return prob(cond, *args, **kw)  # type: ignore[arg-type]

    model.head.prob = spy  # type: ignore[method-assign]
    out = generate_causal(
        model, labels, cfg_scale=1.0, diffusion_steps=4, generator=torch.Generator().manual_seed(0)
    )
    assert out.bits.shape == (2, 16, 8) and set(out.bits.unique().tolist()) <= {0.0, 1.0}
    assert (out.passes, out.network_evals) == (16, 16)
    # the training path: position i of [class; x_1 .. x_{i-1}] predicts token i
    hs = model.backbone(model.bit_proj(out.bits[:, :-1]), labels)
    train_cond = model.norm(hs[-1]) + model.pos_emb  # (2, 16, D)
    torch.testing.assert_close(torch.stack(seen, 1), train_cond, atol=1e-5, rtol=1e-5)
    model.head.prob = prob  # type: ignore[method-assign]
    cfg = generate_causal(
        model, labels, cfg_scale=3.0, diffusion_steps=4, generator=torch.Generator().manual_seed(0)
    )
    assert cfg.network_evals == 32
    with pytest.raises(ValueError, match="causal=True"):
        generate_causal(_model(), labels)
    with pytest.raises(ValueError, match="labels"):
        generate_causal(model, torch.tensor([4]))
