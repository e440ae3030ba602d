"""Transformer surgery: COMET masks inside stock GPT-2, Llama (transformers) and ViT, Mixer (timm)."""

from __future__ import annotations

import io

import pytest
import torch

from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.comet import COMETActivation, comet_ffn_, keep_count

timm = pytest.importorskip("timm")

IDS = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 11, 12, 13]])
IMG = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))


def _gpt2(seed: int = 0) -> torch.nn.Module:
    return build_tiny_lm("gpt2", vocab_size=20, n_layer=2, n_head=2, d_model=16, seed=seed)


def _llama(seed: int = 0) -> torch.nn.Module:
    return build_tiny_lm("llama", vocab_size=20, n_layer=2, n_head=2, d_model=16, seed=seed)


def _vit() -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    return VisionTransformer(
        img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5
    ).eval()


def _mixer() -> torch.nn.Module:
    from timm.models.mlp_mixer import MlpMixer

    torch.manual_seed(0)
    return MlpMixer(num_classes=5, img_size=32, patch_size=8, num_blocks=2, embed_dim=32).eval()


def _out(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model(x)
    return out.logits if hasattr(out, "logits") else out


CASES = [(_gpt2, IDS), (_llama, IDS), (_vit, IMG), (_mixer, IMG)]


@pytest.mark.parametrize(("build", "x"), CASES)
@pytest.mark.parametrize("source", ["embedding", "layer_input"])
def test_p_keep_one_is_identity_and_remove_restores(build, x, source) -> None:
    model = build()
    ref = _out(model, x)
    keys = set(model.state_dict())
    handle = comet_ffn_(model, 1.0, source=source)
    assert torch.equal(_out(model, x), ref)
    handle = handle.remove() and None
    comet_ffn_(model, 0.25, source=source).remove()
    assert torch.equal(_out(model, x), ref)
    assert set(model.state_dict()) == keys
    assert not any(isinstance(m, COMETActivation) for m in model.modules())


@pytest.mark.parametrize(("build", "x"), CASES)
@pytest.mark.parametrize("source", ["embedding", "layer_input"])
def test_each_token_keeps_exactly_k(build, x, source) -> None:
    model = build()
    handle = comet_ffn_(model, 0.25, source=source, include_token_mixing=True)
    _out(model, x)
    assert len(handle.last_masks) == len(handle.wrappers)
    for m, w in zip(handle.last_masks, handle.wrappers, strict=True):
        assert m.dtype == torch.bool
        assert bool((m.sum(-1) == keep_count(m.shape[-1], 0.25)).all()) and w.k == keep_count(
            m.shape[-1], 0.25
        )


@pytest.mark.parametrize("build", [_gpt2, _llama])
@pytest.mark.parametrize("source", ["embedding", "layer_input"])
def test_causality(build, source) -> None:
    model = build()
    handle = comet_ffn_(model, 0.25, source=source)
    a = _out(model, IDS)
    masks_a = [m.clone() for m in handle.last_masks]
    edited = IDS.clone()
    edited[:, -1] = 3
    b = _out(model, edited)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
    for ma, mb in zip(masks_a, handle.last_masks, strict=True):
        assert torch.equal(ma[:, :-1], mb[:, :-1])


def test_frozen_embedding_masks_fixed_live_and_layer_input_move() -> None:
    same = {}
    for name, kw in (
        ("frozen", {}),
        ("live", {"embedding_mode": "live"}),
        ("layer", {"source": "layer_input"}),
    ):
        model = _gpt2()
        handle = comet_ffn_(model, 0.5, **kw)
        _out(model, IDS)
        before = [m.clone() for m in handle.last_masks]
        opt = torch.optim.SGD(model.parameters(), lr=5.0)
        logits = model(IDS).logits[:, :-1]  # next-token loss computed here: see the claim's G3
        torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), IDS[:, 1:].reshape(-1)
        ).backward()
        opt.step()
        _out(model, IDS)
        same[name] = all(torch.equal(a, b) for a, b in zip(before, handle.last_masks, strict=True))
    assert same == {"frozen": True, "live": False, "layer": False}


def test_routing_buffers_saved_and_restored() -> None:
    model = _gpt2()
    handle = comet_ffn_(model, 0.25, seed=1)
    _out(model, IDS)
    masks = [m.clone() for m in handle.last_masks]
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    other = _gpt2(seed=7)
    h2 = comet_ffn_(other, 0.25, seed=2)
    other.load_state_dict(torch.load(buf))
    _out(other, IDS)
    assert all(torch.equal(a, b) for a, b in zip(masks, h2.last_masks, strict=True))
    assert not any("act.weight" in n for n, _ in other.named_parameters())
    sd = {k: v for k, v in model.state_dict().items() if not k.endswith("h.1.mlp.act.weight")}
    with pytest.raises(ValueError, match="routing buffer"):
        comet_ffn_(_gpt2(), 0.25).model.load_state_dict(sd, strict=False)


def test_chain_false_reads_embedding_directly() -> None:
    model = _gpt2()
    handle = comet_ffn_(model, 0.25, chain=False)
    assert all(w.weight.shape == (64, 16) for w in handle.wrappers)
    chained = comet_ffn_(_gpt2(), 0.25)
    assert [tuple(w.weight.shape) for w in chained.wrappers] == [(64, 16), (64, 64)]


def test_vit_masks_cover_cls_and_patches() -> None:
    model = _vit()
    handle = comet_ffn_(model, 0.5)
    _out(model, IMG)
    assert handle.last_masks[0].shape == (2, 17, 128)


def test_unsupported_model_and_bad_options() -> None:
    with pytest.raises(TypeError, match="supports"):
        comet_ffn_(torch.nn.Sequential(torch.nn.Linear(2, 2)), 0.5)
    with pytest.raises(ValueError, match="p_keep"):
        comet_ffn_(_gpt2(), 0.0)
    with pytest.raises(ValueError, match="source"):
        comet_ffn_(_gpt2(), 0.5, source="hidden")  # type: ignore[arg-type]


def test_inputs_embeds_rejected_in_frozen_mode() -> None:
    model = _gpt2()
    comet_ffn_(model, 0.5)
    with pytest.raises(ValueError, match="embedding stage"):
        model(inputs_embeds=torch.randn(1, 3, 16))


@pytest.mark.parametrize(("build", "x"), CASES)
def test_second_wrap_raises_and_model_stays_usable(build, x) -> None:
    model = build()
    ref = _out(model, x)
    handle = comet_ffn_(model, 0.5)
    masked = _out(model, x)
    with pytest.raises(ValueError, match="already carries COMET masks"):
        comet_ffn_(model, 0.25, source="layer_input")
    assert torch.equal(_out(model, x), masked)  # the failed call changed nothing
    handle.remove()
    assert torch.equal(_out(model, x), ref)
    comet_ffn_(model, 0.25).remove()  # wrapping again after remove() works
    assert torch.equal(_out(model, x), ref)
