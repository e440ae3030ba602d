"""SimCodec: alignment, straight-through VQ, loss closed forms, the codebook reorganisation."""

from __future__ import annotations

import copy
import shutil

import pytest
import torch
import torch.nn.functional as F

from iclr25.methods.gense import (
    CodecConfig,
    GroupVQ,
    SimCodec,
    align_length,
    code_perplexity,
    distinctness_loss,
    log_mel,
)

# tiny models: a second torch thread only spins on a busy machine
pytestmark = pytest.mark.usefixtures("one_thread")

TINY = CodecConfig(hidden=8, blocks=1, latent_dim=8, group_codebook=4, top_n=3, top_k=2)


def test_alignment_semantic_and_acoustic_frames() -> None:
    torch.manual_seed(0)
    codec = SimCodec(TINY).eval()
    lengths = torch.randint(200, 4000, (6,), generator=torch.Generator().manual_seed(0)).tolist()
    for n in [1, *lengths]:  # 1: the shortest aligned clip, one semantic frame
        N = align_length(n)
        t_s = log_mel(torch.zeros(1, N), hop=320).shape[1]
        codes = codec.encode(torch.zeros(1, 1, N))
        assert codes.shape[1] == 2 * t_s == N // 160
        assert codec.decode(codes).shape[-1] == N


def test_straight_through_gradient_reaches_encoder() -> None:
    torch.manual_seed(0)
    codec = SimCodec(TINY)
    y, _, _ = codec(0.1 * torch.randn(2, 1, 640))
    (y.pow(2).mean()).backward()
    assert codec.encoder.net[0].weight.grad is not None and codec.encoder.net[0].weight.grad.abs().sum() > 0


def test_vq_losses_match_closed_form() -> None:
    vq = GroupVQ(dim=2, n_groups=1, codebook_size=2)
    with torch.no_grad():
        vq.codebooks.copy_(torch.tensor([[[0.0, 0.0], [1.0, 1.0]]]))
    z = torch.tensor([[[0.2, 0.9], [0.1, 0.8]]])  # [B=1, D=2, T=2]: frames (0.2, 0.1) and (0.9, 0.8)
    q, codes, losses = vq(z)
    assert codes[0, :, 0].tolist() == [0, 1]
    expected = ((0.2**2 + 0.1**2) + (0.1**2 + 0.2**2)) / 4  # mean over the 4 latent entries
    assert abs(float(losses["codebook"]) - expected) < 1e-6
    assert abs(float(losses["commitment"]) - expected) < 1e-6
    assert torch.allclose(q, torch.tensor([[[0.0, 1.0], [0.0, 1.0]]]))


def test_distinctness_closed_form() -> None:
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    # cosine matrix [[1,0,1],[0,1,0],[1,0,1]] scaled by 3, cross-entropy against identity rows
    logits = 3 * torch.tensor([[1.0, 0, 1], [0, 1, 0], [1, 0, 1]])
    expected = F.cross_entropy(logits, torch.arange(3))
    assert torch.allclose(distinctness_loss(e, 3.0), expected)


def test_reorganisation_builds_concatenations_in_order() -> None:
    torch.manual_seed(0)
    codec = SimCodec(TINY)
    e1, e2 = codec.quantizer.codebooks[0].detach().clone(), codec.quantizer.codebooks[1].detach().clone()
    usage = [torch.tensor([5.0, 9.0, 1.0, 7.0]), torch.tensor([0.0, 3.0, 8.0, 2.0])]
    new = codec.reorganize(usage, top_n=3, top_k=2)
    top1, top2 = [1, 3, 0], [2, 1]
    book = new.quantizer.codebooks[0]
    assert book.shape == (6, 8) and new.codebook_size == 6
    for n in range(3):
        for k in range(2):
            assert torch.equal(book[n * 2 + k], torch.cat([e1[top1[n]], e2[top2[k]]]))
    assert torch.equal(new.encoder.net[0].weight, codec.encoder.net[0].weight)


def test_product_codebook_nearest_is_pair_of_group_nearest() -> None:
    torch.manual_seed(1)
    codec = SimCodec(TINY)
    new = codec.reorganize([torch.arange(4.0), torch.arange(4.0)], top_n=4, top_k=4)
    z = torch.randn(3, 8, 5)
    _, prod_codes, _ = new.quantizer(z)
    # the same 4 x 4 codes as two independent groups
    sub = GroupVQ(8, 2, 4)
    book = new.quantizer.codebooks[0].reshape(4, 4, 8)
    with torch.no_grad():
        sub.codebooks.copy_(torch.stack([book[:, 0, :4], book[0, :, 4:]]))
    _, pair, _ = sub(z)
    assert torch.equal(prod_codes[..., 0], pair[..., 0] * 4 + pair[..., 1])


def test_code_perplexity() -> None:
    assert code_perplexity(torch.tensor([1.0, 1, 1, 1])) == 4.0
    assert code_perplexity(torch.tensor([3.0, 0, 0])) == 1.0


def test_codec_fits_one_clip() -> None:
    """A direct fit: trained on one voiced clip, copy-synthesis must get much closer to it."""
    from iclr25.methods.gense import codec_mel_l1, train_codec

    t = torch.arange(6400) / 16000
    x = sum(torch.sin(2 * torch.pi * 140 * h * t) / h for h in range(1, 12))
    wav = (0.1 * x * (0.6 + 0.4 * torch.sin(2 * torch.pi * 3 * t)))[None].float()
    torch.manual_seed(0)
    cfg = CodecConfig(
        hidden=32,
        blocks=1,
        latent_dim=8,
        group_codebook=8,
        top_n=4,
        top_k=2,
        batch_size=2,
        segment_seconds=0.2,
    )
    codec = SimCodec(cfg, n_groups=1, codebook_size=8)
    before = codec_mel_l1(codec, wav)
    train_codec(codec, wav, steps=150, generator=torch.Generator().manual_seed(0))  # about 2 s
    assert codec_mel_l1(codec, wav) < 0.5 * before


def test_codec_training_resumes_bit_for_bit() -> None:
    """A run stopped at a checkpoint and resumed ends where an uninterrupted run ends."""
    from iclr25.methods.gense import train_codec

    cfg = CodecConfig(hidden=8, blocks=1, latent_dim=8, group_codebook=8, top_n=4, top_k=2, batch_size=2,
                      segment_seconds=0.04, restart_every=2)  # fmt: skip
    wav = 0.1 * torch.randn(3, 1280, generator=torch.Generator().manual_seed(0))

    def fresh() -> SimCodec:
        torch.manual_seed(0)
        return SimCodec(cfg)

    straight, full = fresh(), []
    train_codec(straight, wav, steps=6, generator=torch.Generator().manual_seed(1), step_losses=full)
    saved: list[dict] = []
    first, part = fresh(), []
    train_codec(first, wav, steps=6, generator=torch.Generator().manual_seed(1), step_losses=part, stop=3,
                checkpoint=lambda st: saved.append(copy.deepcopy(st)), checkpoint_every=3)  # fmt: skip
    resumed, rest = fresh(), []
    train_codec(resumed, wav, steps=6, generator=torch.Generator(), resume=saved[-1], step_losses=rest)
    assert len(saved) == 1 and saved[0]["step"] == 3
    assert part + rest == full
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_codec_recipe_replays_and_writes_the_artefact(tmp_path) -> None:
    """The recipe on a toy size: a replay writes nothing; a full run writes the three files with
    the quality bars recorded, and the folder loads."""
    from iclr25._core.pretrained import read_training, require_artefact
    from iclr25.methods.gense import CodecRecipe, DataConfig, load_codec, pretrain_codec

    data = DataConfig(train_voices=("en-us+m1", "en-us+f1"), test_voices=("en-us+m3",), clip_seconds=0.96)
    codec = CodecConfig(hidden=8, blocks=1, latent_dim=8, group_codebook=4, top_n=3, top_k=2, batch_size=2,
                        stage1_steps=3, stage2_steps=2)  # fmt: skip
    recipe = CodecRecipe(data=data, n_train=6, codec=codec, n_eval=2, checkpoint_every=2)
    replay = pretrain_codec(tmp_path / "r", max_steps=4, recipe=recipe)
    assert len(replay) == 4 and not (tmp_path / "r").exists()
    losses = pretrain_codec(tmp_path / "a", recipe=recipe)
    assert losses[:4] == replay and len(losses) == 5
    record = read_training(require_artefact(tmp_path / "a"))
    assert record["steps"] == 5 and set(record["bars_met"]) == {"copy_per", "ceiling_stoi_gain"}
    assert {"copy_stoi", "noisy_stoi", "copy_per", "noisy_per"} <= set(record["quality"])
    assert load_codec(tmp_path / "a").codebook_size == 6
