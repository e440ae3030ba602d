"""Procedural knowledge influence: EK-FAC influence of pretraining documents on reasoning and
factual completions of a tiny LM trained on a synthetic corpus with metadata.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Laura Ruis,
Maximilian Mozes, Juhan Bae, Siddhartha Rao Kamalakara, Dwarak Talupuru, Acyr Locatelli, Robert Kirk,
Tim Rocktäschel, Edward Grefenstette, Max Bartolo, ICLR 2025, arXiv:2411.12580.
"""

from iclr25.methods.procedural_influence.analysis import (
    answer_in_topk,
    compare_slopes,
    group_correlations,
    kind_share_topk,
    normalize_per_nat,
    paired_greater_p,
    partial_spearman,
    permute_per_query,
    powerlaw_slope,
    query_correlation_matrix,
    shuffle_pairing,
    source_overrepresentation,
    topk_coverage,
    topk_indices,
)
from iclr25.methods.procedural_influence.baselines import bm25_scores, gradient_dot_scores, tfidf_scores
from iclr25.methods.procedural_influence.config import ClaimConfig, CorpusConfig, InfluenceConfig, LMConfig
from iclr25.methods.procedural_influence.corpus import (
    TASKS,
    Corpus,
    Document,
    Query,
    assert_no_leak,
    make_corpus,
    query_prompts,
    valid_solutions,
)
from iclr25.methods.procedural_influence.influence import (
    InfluenceResult,
    TensorDictDataset,
    cache_root,
    compute_influence,
    content_hash,
)
from iclr25.methods.procedural_influence.lm import (
    Checkpoint,
    build_lm,
    completion_nll,
    completion_token_nll,
    encode_documents,
    encode_queries,
    greedy_complete,
    make_queries,
    train_lm,
)
from iclr25.methods.procedural_influence.task import CausalLMInfluenceTask, resolve_tracked_modules

__all__ = [
    "TASKS",
    "CausalLMInfluenceTask",
    "Checkpoint",
    "ClaimConfig",
    "Corpus",
    "CorpusConfig",
    "Document",
    "InfluenceConfig",
    "InfluenceResult",
    "LMConfig",
    "Query",
    "TensorDictDataset",
    "answer_in_topk",
    "assert_no_leak",
    "bm25_scores",
    "build_lm",
    "cache_root",
    "compare_slopes",
    "completion_nll",
    "completion_token_nll",
    "compute_influence",
    "content_hash",
    "encode_documents",
    "encode_queries",
    "gradient_dot_scores",
    "greedy_complete",
    "group_correlations",
    "kind_share_topk",
    "make_corpus",
    "make_queries",
    "normalize_per_nat",
    "paired_greater_p",
    "partial_spearman",
    "permute_per_query",
    "powerlaw_slope",
    "query_correlation_matrix",
    "query_prompts",
    "resolve_tracked_modules",
    "shuffle_pairing",
    "source_overrepresentation",
    "tfidf_scores",
    "topk_coverage",
    "topk_indices",
    "train_lm",
    "valid_solutions",
]
