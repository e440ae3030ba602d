"""The text foundation: text-only losses, loading an artefact into each claim model, its errors,
random token selection (a control), and METEOR (when Java is there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from iclr25._core.pretrained import ArtefactMissingError, write_training
from iclr25.methods.vie_dm import (
    VIEDM,
    ARSpeaker,
    ExpressionTokenizer,
    ImageEncoder,
    TextPretrainConfig,
    load_text_foundation,
    meteor,
    meteor_available,
    text_model_config,
)

WORDS = ["the", "red", "blue", "circle", "square"]


def _artefact(tmp_path: Path, model: torch.nn.Module, kind: str, keys: tuple[str, ...], tok) -> Path:
    """Write a foundation folder from ``model``'s text weights (the layout the recipes write)."""
    from safetensors.torch import save_file

    cfg = TextPretrainConfig()
    mcfg = model.config
    out = tmp_path / kind
    out.mkdir()
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k.startswith(keys)}
    save_file(state, str(out / "model.safetensors"))
    meta = {
        "kind": kind, "vocabulary": tok.itos, "seq_len": cfg.seq_len, "d_model": cfg.d_model,
        "d_emb": cfg.d_emb, "heads": cfg.heads, "vtc_layers": cfg.vtc_layers,
        "denoiser_layers": cfg.denoiser_layers, "T": mcfg.diffusion.steps,
        "schedule": mcfg.diffusion.schedule,
    }  # fmt: skip
    (out / "config.json").write_text(json.dumps(meta))
    write_training(out, command="iclr25 pretrain vie_dm x", loss_curve=[1.0], wall_seconds=0.0, quality={})
    return out


def _models(tok):
    mcfg = text_model_config(TextPretrainConfig(), len(tok))
    enc = ImageEncoder((8, 8, 8), strides=(2, 2, 1))
    torch.manual_seed(0)
    src = VIEDM(mcfg, encoder=enc, grid_tokens=144, decode=tok.decode)
    torch.manual_seed(1)
    dst = VIEDM(mcfg, encoder=enc, grid_tokens=144, decode=tok.decode)
    torch.manual_seed(2)
    ablation = VIEDM(mcfg.replace(use_vtc=False), encoder=enc, grid_tokens=144, decode=tok.decode)
    return src, dst, ablation


def test_text_losses_are_finite_and_train(one_thread) -> None:
    tok = ExpressionTokenizer(WORDS)
    src, _, _ = _models(tok)
    ids = tok.encode(["the red circle", "blue square"], length=src.config.seq_len)
    out = src.text_loss(ids, generator=torch.Generator().manual_seed(0))
    assert out["loss"].ndim == 0 and torch.isfinite(out["loss"])
    out["loss"].backward()
    assert src.denoiser.in_proj[0].weight.grad is not None
    assert src.memory.token_proj.weight.grad is None  # the null condition never reads an image
    sp = ARSpeaker(src.config, encoder=ImageEncoder((8, 8, 8)), decode=tok.decode)
    loss = sp.text_loss(ids)
    assert torch.isfinite(loss)
    assert sp.sample_text(3, generator=torch.Generator().manual_seed(0)).shape == (3, src.config.seq_len)


def test_foundation_loads_into_vie_dm_the_ablation_and_the_speaker(one_thread, tmp_path: Path) -> None:
    tok = ExpressionTokenizer(WORDS)
    src, dst, ablation = _models(tok)
    folder = _artefact(tmp_path, src, "diffusion", ("embedding.", "denoiser."), tok)
    record = load_text_foundation(dst, folder, vocabulary=tok.itos)
    assert record["steps"] == 1
    assert torch.equal(dst.embedding.weight, src.embedding.weight)
    assert torch.equal(dst.denoiser.vtc.layers[0].multihead_attn.in_proj_weight,
                       src.denoiser.vtc.layers[0].multihead_attn.in_proj_weight)  # fmt: skip
    assert not torch.equal(dst.memory.token_proj.weight, src.memory.token_proj.weight)  # visual side stays
    load_text_foundation(ablation, folder, vocabulary=tok.itos)
    # the prefix layers take the VTC layers' self-attention and feed-forward (norm3 -> norm2)
    a, b = ablation.denoiser.vtc[1], src.denoiser.vtc.layers[1]
    assert torch.equal(a.self_attn.in_proj_weight, b.self_attn.in_proj_weight)
    assert torch.equal(a.linear2.weight, b.linear2.weight) and torch.equal(a.norm2.weight, b.norm3.weight)
    assert torch.equal(ablation.denoiser.body[0].linear1.weight, src.denoiser.body[0].linear1.weight)
    torch.manual_seed(3)
    sp_src = ARSpeaker(src.config, encoder=ImageEncoder((8, 8, 8)), grid_tokens=144)
    sp_dst = ARSpeaker(src.config, encoder=ImageEncoder((8, 8, 8)), grid_tokens=144)
    ar = _artefact(tmp_path, sp_src, "ar", ("embed.", "pos", "layers.", "norm.", "head."), tok)
    load_text_foundation(sp_dst, ar, vocabulary=tok.itos)
    assert torch.equal(sp_dst.head.weight, sp_src.head.weight)


def test_foundation_errors(one_thread, tmp_path: Path) -> None:
    tok = ExpressionTokenizer(WORDS)
    src, dst, _ = _models(tok)
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain vie_dm text_diffusion"):
        load_text_foundation(dst, tmp_path / "text_diffusion", vocabulary=tok.itos)
    folder = _artefact(tmp_path, src, "diffusion", ("embedding.", "denoiser."), tok)
    with pytest.raises(ValueError, match="vocabulary"):
        load_text_foundation(dst, folder, vocabulary=[*tok.itos, "green"])
    sp = ARSpeaker(src.config, encoder=ImageEncoder((8, 8, 8)))
    with pytest.raises(ValueError, match="not a ar one"):
        load_text_foundation(sp, folder, vocabulary=tok.itos)
    wide = VIEDM(src.config.replace(d_emb=16), encoder=ImageEncoder((8, 8, 8)), grid_tokens=144)
    with pytest.raises(ValueError, match="sizes differ"):
        load_text_foundation(wide, folder, vocabulary=tok.itos)


def test_random_selection_keeps_k_tokens_and_bad_mode_raises(one_thread) -> None:
    tok = ExpressionTokenizer(WORDS)
    model = _models(tok)[0]
    images, boxes = torch.rand(2, 3, 48, 48), torch.tensor([[4.0, 4, 20, 20], [10, 12, 30, 40]])
    tgt, ctx, _ = model.memory(images, boxes)
    model.memory.selection = "random"
    tgt_r, ctx_r, _ = model.memory(images, boxes)
    assert ctx_r.shape == ctx.shape and torch.equal(tgt_r, tgt) and not torch.equal(ctx_r, ctx)
    model.memory.selection = "nearest"
    with pytest.raises(ValueError, match="selection"):
        model.memory(images, boxes)


@pytest.mark.slow  # the METEOR jar loads its paraphrase table at start-up (tens of seconds)
@pytest.mark.skipif(not meteor_available(), reason="METEOR needs Java")
def test_meteor_orders_candidates() -> None:
    gts = {0: ["the red circle", "red disc"], 1: ["the blue square", "blue box"]}
    exact = {0: ["the red circle"], 1: ["the blue square"]}
    wrong = {0: ["the green star"], 1: ["the yellow star"]}
    scores = meteor(gts, {"exact": exact, "wrong": wrong})
    assert scores["exact"] > 0.9 and scores["wrong"] < scores["exact"]
    assert meteor(gts, exact) == pytest.approx(scores["exact"])
