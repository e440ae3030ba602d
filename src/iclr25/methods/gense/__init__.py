"""GenSE: generative speech enhancement with hierarchical token language models (ICLR 2025).

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Jixun Yao, Hexin Liu, Chen Chen, Yuchen Hu, Eng Siong Chng, Lei Xie, ICLR 2025 (arXiv 2502.02942).

Public API: the synthetic espeak-ng speech world (:mod:`.data`), the semantic tokeniser
(:class:`SemanticTokenizer` over :class:`PhoneCTCFeatures` or :class:`HFSSLFeatures`), the
SimCodec-style codec with codebook reorganisation (:class:`SimCodec`), the token builders and
:class:`RangeMask`, the :class:`N2S` / :class:`S2S` language models, the :class:`GenSE` pipeline
and :func:`enhance_wav`, baselines and metrics.
"""

from iclr25.methods.gense.audio import align_length, as_mono, log_mel
from iclr25.methods.gense.baselines import BLSTMMask, naive_codec, neg_si_sdr, train_blstm
from iclr25.methods.gense.codec import (
    GroupVQ,
    SimCodec,
    code_perplexity,
    codec_mel_l1,
    distinctness_loss,
    train_codec,
)
from iclr25.methods.gense.config import (
    ClaimConfig,
    CodecConfig,
    CodecRecipe,
    DataConfig,
    LMConfig,
    TokenizerConfig,
)
from iclr25.methods.gense.data import (
    NOISE_TYPES,
    EspeakNotFoundError,
    SpeechSet,
    default_cache_dir,
    espeak_phonemes,
    make_mixtures,
    make_noise,
    make_speech_set,
    mix_at_snr,
    random_text,
    synthesize,
)
from iclr25.methods.gense.foundations import (
    CODEC_BARS,
    CODEC_DIR,
    codec_quality,
    load_codec,
    pretrain_codec,
    save_codec,
)
from iclr25.methods.gense.lm import N2S, S2S, decode, gpt2_config, train_lm
from iclr25.methods.gense.metrics import (
    SpeakerProxy,
    dnsmos,
    dnsmos_available,
    pesq_wb,
    phone_error_rate,
    real_time_factor,
    si_sdr,
    stoi,
)
from iclr25.methods.gense.pipeline import GenSE, enhance_wav
from iclr25.methods.gense.semantic import (
    HFSSLFeatures,
    PhoneCTC,
    PhoneCTCFeatures,
    SemanticTokenizer,
    ctc_greedy_decode,
    phone_vocabulary,
    train_phone_ctc,
)
from iclr25.methods.gense.tokens import (
    BOS,
    EOS,
    IGNORE,
    N_SPECIAL,
    PAD,
    RangeMask,
    build_n2s,
    build_pair,
    build_s2s,
)
from iclr25.methods.gense.train import (
    load_or_train_codecs,
    load_or_train_recognizer,
    load_or_train_tokenizer,
    speech_key,
)

__all__ = [
    "BOS",
    "CODEC_BARS",
    "CODEC_DIR",
    "EOS",
    "IGNORE",
    "N2S",
    "NOISE_TYPES",
    "N_SPECIAL",
    "PAD",
    "S2S",
    "BLSTMMask",
    "ClaimConfig",
    "CodecConfig",
    "CodecRecipe",
    "DataConfig",
    "EspeakNotFoundError",
    "GenSE",
    "GroupVQ",
    "HFSSLFeatures",
    "LMConfig",
    "PhoneCTC",
    "PhoneCTCFeatures",
    "RangeMask",
    "SemanticTokenizer",
    "SimCodec",
    "SpeakerProxy",
    "SpeechSet",
    "TokenizerConfig",
    "align_length",
    "as_mono",
    "build_n2s",
    "build_pair",
    "build_s2s",
    "code_perplexity",
    "codec_mel_l1",
    "codec_quality",
    "ctc_greedy_decode",
    "decode",
    "default_cache_dir",
    "distinctness_loss",
    "dnsmos",
    "dnsmos_available",
    "enhance_wav",
    "espeak_phonemes",
    "gpt2_config",
    "load_codec",
    "load_or_train_codecs",
    "load_or_train_recognizer",
    "load_or_train_tokenizer",
    "log_mel",
    "make_mixtures",
    "make_noise",
    "make_speech_set",
    "mix_at_snr",
    "naive_codec",
    "neg_si_sdr",
    "pesq_wb",
    "phone_error_rate",
    "phone_vocabulary",
    "pretrain_codec",
    "random_text",
    "real_time_factor",
    "save_codec",
    "si_sdr",
    "speech_key",
    "stoi",
    "synthesize",
    "train_blstm",
    "train_codec",
    "train_lm",
    "train_phone_ctc",
]
