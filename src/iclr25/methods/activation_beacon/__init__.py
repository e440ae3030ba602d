"""Activation Beacon: plug-in key/value compression for stock Hugging Face decoders.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462.
"""

from iclr25.methods.activation_beacon.base import (
    BASE_DIR,
    BaseStage,
    BaseTrainConfig,
    PairTask,
    build_base,
    knockout_accuracy,
    load_base,
    make_pair_recall,
    make_repeat_segments,
    pretrain_base,
    retrieval_mass,
    train_base,
)
from iclr25.methods.activation_beacon.cache import BeaconCache, MeanPoolCache, SinkWindowCache
from iclr25.methods.activation_beacon.config import BeaconConfig, ClaimConfig
from iclr25.methods.activation_beacon.eviction import SnapKV
from iclr25.methods.activation_beacon.flops import (
    beacon_kv_peak,
    beacon_kv_resident,
    beacon_score_entries,
    full_score_entries,
)
from iclr25.methods.activation_beacon.generation import BeaconGenerationCache
from iclr25.methods.activation_beacon.kvpress_adapter import (
    KVPRESS_PRESSES,
    KVPressEviction,
    kvpress_available,
)
from iclr25.methods.activation_beacon.layout import ChunkLayout, additive_mask, chunk_layout, chunk_visibility
from iclr25.methods.activation_beacon.longbench import (
    DEFAULT_TEMPLATE,
    LONGBENCH_FIELDS,
    NeedleSample,
    longbench_prompts,
    needle_in_haystack,
    read_haystack,
    read_longbench,
    truncate_middle,
)
from iclr25.methods.activation_beacon.memory import MemoryStats, chunk_lm_loss, ratio_schedule, run_chunks
from iclr25.methods.activation_beacon.model import (
    BeaconMemory,
    BeaconModel,
    BeaconModelConfig,
    MeanPoolKV,
    StreamingLLM,
    load_beacon_config,
    load_beacon_model,
    register_auto_classes,
    wrap_with_beacon,
)
from iclr25.methods.activation_beacon.wrap import BeaconContext, BeaconLinear

__all__ = [
    "BASE_DIR",
    "DEFAULT_TEMPLATE",
    "KVPRESS_PRESSES",
    "LONGBENCH_FIELDS",
    "BaseStage",
    "BaseTrainConfig",
    "BeaconCache",
    "BeaconConfig",
    "BeaconContext",
    "BeaconGenerationCache",
    "BeaconLinear",
    "BeaconMemory",
    "BeaconModel",
    "BeaconModelConfig",
    "ChunkLayout",
    "ClaimConfig",
    "KVPressEviction",
    "MeanPoolCache",
    "MeanPoolKV",
    "MemoryStats",
    "NeedleSample",
    "PairTask",
    "SinkWindowCache",
    "SnapKV",
    "StreamingLLM",
    "additive_mask",
    "beacon_kv_peak",
    "beacon_kv_resident",
    "beacon_score_entries",
    "build_base",
    "chunk_layout",
    "chunk_lm_loss",
    "chunk_visibility",
    "full_score_entries",
    "knockout_accuracy",
    "kvpress_available",
    "load_base",
    "load_beacon_config",
    "load_beacon_model",
    "longbench_prompts",
    "make_pair_recall",
    "make_repeat_segments",
    "needle_in_haystack",
    "pretrain_base",
    "ratio_schedule",
    "read_haystack",
    "read_longbench",
    "register_auto_classes",
    "retrieval_mass",
    "run_chunks",
    "train_base",
    "truncate_middle",
    "wrap_with_beacon",
]
