"""FTCT: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*

Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Train a transformer on fragments of
causal chains; test whether few-shot chain-of-thought prompts make it chain them.
"""

from iclr25.methods.ftct.baselines import WindowedMLP
from iclr25.methods.ftct.config import ClaimConfig, FTCTConfig, ModelConfig, TrainConfig
from iclr25.methods.ftct.data import (
    COPY_KINDS,
    Corpus,
    TestItem,
    Trace,
    check_no_leakage,
    count_long_paths,
    draw_trace,
    longest_consistent_chain,
    longest_letter_path,
    make_compositional_tests,
    make_copy_tests,
    make_in_distribution_tests,
    make_probe_tests,
    make_training_corpus,
    noise_values,
    pack_traces,
)
from iclr25.methods.ftct.evaluate import (
    LeafStop,
    evaluate,
    greedy_generate,
    parse_pairs,
    query_leaf_id,
    score_copy,
    score_output,
    teacher_forced_correct,
)
from iclr25.methods.ftct.graph import LETTERS, CausalGraph, apply_edge
from iclr25.methods.ftct.mechanism import (
    forward_internals,
    induction_scores,
    parent_attention,
    probe_parent_value,
)
from iclr25.methods.ftct.train import build_model, lm_loss, load_checkpoint, save_checkpoint, train_model
from iclr25.methods.ftct.vocab import FTCTTokenizer

__all__ = [
    "COPY_KINDS",
    "LETTERS",
    "CausalGraph",
    "ClaimConfig",
    "Corpus",
    "FTCTConfig",
    "FTCTTokenizer",
    "LeafStop",
    "ModelConfig",
    "TestItem",
    "Trace",
    "TrainConfig",
    "WindowedMLP",
    "apply_edge",
    "build_model",
    "check_no_leakage",
    "count_long_paths",
    "draw_trace",
    "evaluate",
    "forward_internals",
    "greedy_generate",
    "induction_scores",
    "lm_loss",
    "load_checkpoint",
    "longest_consistent_chain",
    "longest_letter_path",
    "make_compositional_tests",
    "make_copy_tests",
    "make_in_distribution_tests",
    "make_probe_tests",
    "make_training_corpus",
    "noise_values",
    "pack_traces",
    "parent_attention",
    "parse_pairs",
    "probe_parent_value",
    "query_leaf_id",
    "save_checkpoint",
    "score_copy",
    "score_output",
    "teacher_forced_correct",
    "train_model",
]
