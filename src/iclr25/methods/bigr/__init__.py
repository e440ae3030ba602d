"""BiGR: masked generation over binary latent codes whose hidden states are a strong representation.

Paper: *BiGR: Harnessing Binary Latent Codes for Image Generation and Improved Visual Representation
Capabilities*, Shaozhe Hao, Xuantong Liu, Xianbiao Qi, Shihao Zhao, Bojia Zi, Rong Xiao, Kai Han,
Kwan-Yee K. Wong, ICLR 2025, arXiv:2410.14672.
"""

from iclr25.methods.bigr.backbone import LlamaBackbone, apply_rope, rope_2d
from iclr25.methods.bigr.baselines import CausalAR, pack_bits, unpack_bits
from iclr25.methods.bigr.checkpoint import load_state, save_checkpoint
from iclr25.methods.bigr.config import (
    BiGRConfig,
    BinaryAEConfig,
    ClaimConfig,
    SamplerConfig,
    TranscoderConfig,
    bae_d24,
    bae_d32,
    l_d24,
    l_d32_512,
    tiny,
    xl_d24,
    xxl_d24,
    xxl_d32,
)
from iclr25.methods.bigr.model import BiGR, check_bits, masked_count, train_bigr
from iclr25.methods.bigr.perceptual import FeatureNet, PerceptualLoss, train_feature_net
from iclr25.methods.bigr.pipeline import BiGRPipeline, PipelineOutput
from iclr25.methods.bigr.probe import (
    Evaluator,
    conditional_accuracy,
    fid_proxy,
    linear_probe,
    precision_recall,
    train_evaluator,
)
from iclr25.methods.bigr.sampling import SampleOutput, generate, outpaint_mask, unmask_schedule
from iclr25.methods.bigr.tokenizer import (
    SHAPES_TOKENIZER,
    BernoulliQuantizer,
    BinaryAutoencoder,
    BinaryCodes,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)
from iclr25.methods.bigr.transcoder import (
    BernoulliTranscoder,
    BitHead,
    flip_to_x0_logit,
    keep_factor,
    posterior_one,
    q_sample,
    sample_timesteps,
    timestep_embedding,
    weighted_bce,
)

__all__ = [
    "SHAPES_TOKENIZER",
    "BernoulliQuantizer",
    "BernoulliTranscoder",
    "BiGR",
    "BiGRConfig",
    "BiGRPipeline",
    "BinaryAEConfig",
    "BinaryAutoencoder",
    "BinaryCodes",
    "BitHead",
    "CausalAR",
    "ClaimConfig",
    "Evaluator",
    "FeatureNet",
    "LlamaBackbone",
    "PerceptualLoss",
    "PipelineOutput",
    "SampleOutput",
    "SamplerConfig",
    "TranscoderConfig",
    "apply_rope",
    "bae_d24",
    "bae_d32",
    "check_bits",
    "conditional_accuracy",
    "fid_proxy",
    "flip_to_x0_logit",
    "generate",
    "keep_factor",
    "l_d24",
    "l_d32_512",
    "linear_probe",
    "load_state",
    "load_tokenizer",
    "masked_count",
    "outpaint_mask",
    "pack_bits",
    "posterior_one",
    "precision_recall",
    "q_sample",
    "rope_2d",
    "sample_timesteps",
    "save_checkpoint",
    "save_tokenizer",
    "timestep_embedding",
    "tiny",
    "train_bigr",
    "train_evaluator",
    "train_feature_net",
    "train_tokenizer",
    "unmask_schedule",
    "unpack_bits",
    "weighted_bce",
    "xl_d24",
    "xxl_d24",
    "xxl_d32",
]
