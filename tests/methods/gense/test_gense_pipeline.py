"""The GenSE pipeline: shapes, oracle / identity modes, save and load, the file demo, SSL loader."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from iclr25.methods.gense import GenSE, HFSSLFeatures, SemanticTokenizer, enhance_wav

# tiny models: a second torch thread only spins on a busy machine
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny() -> GenSE:
    return GenSE.tiny_random(seed=0)


def test_enhance_batch_pads_and_trims(tiny: GenSE) -> None:
    x = 0.05 * torch.randn(2, 7000, generator=torch.Generator().manual_seed(0))
    y = tiny.enhance_batch(x, lengths=torch.tensor([1.0, 0.5]))
    assert y.shape == (2, 7000) and torch.isfinite(y).all()
    assert (y[1, 3500:] == 0).all()
    t = tiny.tokens(torch.nn.functional.pad(x, (0, 7040 - 7000))[:, :6400])
    assert t["acoustic"].shape[1] == 2 * t["sem"].shape[1] == 40


def test_oracle_semantic_and_identity_modes(tiny: GenSE) -> None:
    x = 0.05 * torch.randn(1, 6400, generator=torch.Generator().manual_seed(1))
    oracle = torch.zeros(1, 20, dtype=torch.long)
    assert torch.equal(tiny.tokens(x, clean_semantic=oracle)["sem"], oracle)
    ident = GenSE(tiny.tokenizer, tiny.codec, None, tiny.s2s, chunk_samples=6400)
    t = ident.tokens(x)
    assert torch.equal(t["sem"], t["noisy_sem"])


def test_bad_input_raises(tiny: GenSE) -> None:
    with pytest.raises(ValueError, match="NaN"):
        tiny.enhance_batch(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError):
        tiny.enhance_batch(torch.zeros(1, 0))


def test_save_and_load_round_trip(tiny: GenSE, tmp_path: Path) -> None:
    tiny.save_pretrained(tmp_path / "m")
    again = GenSE.from_pretrained(tmp_path / "m")
    x = 0.05 * torch.randn(1, 6400, generator=torch.Generator().manual_seed(2))
    assert torch.equal(tiny.enhance_batch(x), again.enhance_batch(x))
    with pytest.raises(FileNotFoundError):
        GenSE.from_pretrained(tmp_path / "missing")


def test_tokenizer_joblib_round_trip(tiny: GenSE, tmp_path: Path) -> None:
    tiny.tokenizer.save(tmp_path / "k.joblib")
    other = SemanticTokenizer(tiny.tokenizer.features).load_kmeans(tmp_path / "k.joblib")
    x = np.random.default_rng(0).standard_normal(3200).astype(np.float32)
    assert torch.equal(other.transform(x), tiny.tokenizer.transform(x))


def test_enhance_wav_demo_on_a_generated_file(tiny: GenSE, tmp_path: Path) -> None:
    tiny.save_pretrained(tmp_path / "m")
    rng = np.random.default_rng(0)
    sf.write(tmp_path / "in.wav", (0.05 * rng.standard_normal((9000, 2))).astype(np.float32), 16000)
    y = enhance_wav(tmp_path / "in.wav", tmp_path / "out.wav", model_dir=tmp_path / "m")
    back, sr = sf.read(tmp_path / "out.wav")
    assert sr == 16000 and back.shape == (9000,) and len(y) == 9000
    sf.write(tmp_path / "8k.wav", (0.05 * rng.standard_normal(4000)).astype(np.float32), 8000)
    with pytest.warns(UserWarning, match="resampled"):
        tiny.enhance_file(tmp_path / "8k.wav", tmp_path / "8k-out.wav")
    assert (
        sf.info(tmp_path / "8k-out.wav").samplerate == 8000
        and sf.info(tmp_path / "8k-out.wav").frames == 4000
    )
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        enhance_wav(tmp_path / "in.wav", tmp_path / "o.wav", model_dir=tmp_path / "none")


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100])
def test_enhance_keeps_length_rate_and_level_of_any_input(tiny: GenSE, rate: int) -> None:
    rng = np.random.default_rng(rate)
    x = (0.05 * rng.standard_normal(rate // 4)).astype(np.float32)
    with pytest.warns(UserWarning, match="resampled") if rate != 16000 else contextlib.nullcontext():
        y = tiny.enhance(x, rate)
        y3 = tiny.enhance(3 * x, rate)
    assert y.shape == x.shape and y.dtype == np.float32
    # the input is brought to a working peak and the gain undone: 3x the input, 3x the output
    np.testing.assert_allclose(y3, 3 * y, rtol=1e-4, atol=1e-6)


def test_enhance_accepts_stereo_and_integer_pcm(tiny: GenSE) -> None:
    rng = np.random.default_rng(0)
    f = (0.1 * rng.standard_normal((2, 3200))).astype(np.float32)  # [C, N]
    i16 = np.round(f.T * 32768).astype(np.int16)  # [N, C], the same signal as 16-bit PCM
    u8 = np.round(f.T * 128 + 128).clip(0, 255).astype(np.uint8)  # 8-bit unsigned PCM
    a, b, c = tiny.enhance(f, 16000), tiny.enhance(i16, 16000), tiny.enhance(u8, 16000)
    assert a.shape == b.shape == c.shape == (3200,)
    np.testing.assert_allclose(a, b, atol=2e-3)
    assert np.corrcoef(a, c)[0, 1] > 0.9
    with pytest.raises(TypeError, match="dtype"):
        tiny.enhance(np.zeros(320, bool), 16000)
    with pytest.raises(ValueError, match="sample_rate"):
        tiny.enhance(f, 0)
    with pytest.raises(ValueError, match="empty"):
        tiny.enhance(np.zeros(0, np.float32), 16000)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_demo_enhances_a_generated_clip_or_the_users_file(tiny: GenSE, tmp_path: Path) -> None:
    from iclr25.methods.gense.pipeline import demo

    tiny.save_pretrained(tmp_path / "m")
    noisy, enhanced = demo(tmp_path / "out", seed=1, model_dir=tmp_path / "m")
    assert (noisy.name, enhanced.name) == ("noisy.wav", "noisy-enhanced.wav")
    assert sf.info(enhanced).samplerate == 16000 and sf.info(enhanced).frames == sf.info(noisy).frames
    (mine,) = demo(tmp_path / "out2", input=noisy, model_dir=tmp_path / "m")
    assert mine.name == "noisy-enhanced.wav" and mine.parent.name == "out2"
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        demo(tmp_path / "out3", input=noisy, model_dir=tmp_path / "none")


def test_hf_ssl_features_from_a_local_tiny_model(tmp_path: Path) -> None:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    cfg = Wav2Vec2Config(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(5, 64),
        conv_kernel=(10, 64),
        num_feat_extract_layers=2,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
    )
    torch.manual_seed(0)
    Wav2Vec2Model(cfg).save_pretrained(tmp_path / "w2v")
    feats = HFSSLFeatures(tmp_path / "w2v", layer=2)
    f = feats(np.random.default_rng(0).standard_normal(3200).astype(np.float32))
    assert f.shape[1] == 16 and f.shape[0] >= 9
    with pytest.raises(FileNotFoundError):
        HFSSLFeatures(tmp_path / "nope")


def test_load_of_an_older_codec_layout_names_the_problem(tiny: GenSE, tmp_path: Path) -> None:
    tiny.save_pretrained(tmp_path / "m")
    conf = json.loads((tmp_path / "m" / "config.json").read_text())
    conf["codec"]["strides"] = [2, 4, 4, 5]  # a field of the waveform-convolution layout
    (tmp_path / "m" / "config.json").write_text(json.dumps(conf))
    with pytest.raises(ValueError, match="older layout"):
        GenSE.from_pretrained(tmp_path / "m")
