"""VIE-DM: vision-guided expression diffusion that writes referring expressions to augment REC data.

Paper: *Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for Boosting
Referring Expression Generation and Comprehension*, Jingcheng Ke, Jun-Cheng Chen, I-Hong Jhuo,
Chia-Wen Lin, Yen-Yu Lin, ICLR 2025. Base text diffusion: DiffuSeq (Gong et al., ICLR 2023).
"""

from iclr25.methods.vie_dm.ar_speaker import ARSpeaker, train_ar_speaker
from iclr25.methods.vie_dm.augment import (
    augment_rec_dataset,
    export_refcoco,
    generate_for_targets,
    reassign_to_other_object,
)
from iclr25.methods.vie_dm.config import (
    ClaimConfig,
    DiffusionConfig,
    ListenerConfig,
    TextPretrainConfig,
    VIEDMConfig,
)
from iclr25.methods.vie_dm.data import RefDataset, ReferImages, from_shapes_world, load_refer
from iclr25.methods.vie_dm.denoiser import Denoiser, timestep_embedding
from iclr25.methods.vie_dm.diffusion import (
    GaussianSequenceDiffusion,
    LossAwareSampler,
    UniformSampler,
    betas_for_alpha_bar,
    clamp_to_embeddings,
    make_betas,
    round_to_tokens,
)
from iclr25.methods.vie_dm.listener import Listener, listener_accuracy, train_listener
from iclr25.methods.vie_dm.metrics import (
    bleu,
    cider,
    distinct_n,
    meteor,
    meteor_available,
    oracle_accuracy,
    self_bleu,
)
from iclr25.methods.vie_dm.model import VIEDM, train_viedm
from iclr25.methods.vie_dm.pretrain import (
    AR_TEXT,
    TEXT_DIFFUSION,
    load_text_foundation,
    pretrain_ar_text,
    pretrain_text_diffusion,
    text_model_config,
)
from iclr25.methods.vie_dm.tokenizer import ExpressionTokenizer, HFExpressionTokenizer
from iclr25.methods.vie_dm.visual import (
    BoxEmbedding,
    ImageEncoder,
    check_boxes,
    pretrain_encoder,
    roi_features,
)
from iclr25.methods.vie_dm.vtc import VisionTextCondition, VisualMemory, select_tokens

__all__ = [
    "AR_TEXT",
    "TEXT_DIFFUSION",
    "VIEDM",
    "ARSpeaker",
    "BoxEmbedding",
    "ClaimConfig",
    "Denoiser",
    "DiffusionConfig",
    "ExpressionTokenizer",
    "GaussianSequenceDiffusion",
    "HFExpressionTokenizer",
    "ImageEncoder",
    "Listener",
    "ListenerConfig",
    "LossAwareSampler",
    "RefDataset",
    "ReferImages",
    "TextPretrainConfig",
    "UniformSampler",
    "VIEDMConfig",
    "VisionTextCondition",
    "VisualMemory",
    "augment_rec_dataset",
    "betas_for_alpha_bar",
    "bleu",
    "check_boxes",
    "cider",
    "clamp_to_embeddings",
    "distinct_n",
    "export_refcoco",
    "from_shapes_world",
    "generate_for_targets",
    "listener_accuracy",
    "load_refer",
    "load_text_foundation",
    "make_betas",
    "meteor",
    "meteor_available",
    "oracle_accuracy",
    "pretrain_ar_text",
    "pretrain_encoder",
    "pretrain_text_diffusion",
    "reassign_to_other_object",
    "roi_features",
    "round_to_tokens",
    "select_tokens",
    "self_bleu",
    "text_model_config",
    "timestep_embedding",
    "train_ar_speaker",
    "train_listener",
    "train_viedm",
]
