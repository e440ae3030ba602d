"""PAL: personalised reward models from a mixture of shared ideal-point prototypes.

*PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Daiwei Chen, Yi Chen,
Aniket Rege, Zhi Wang, Ramya Korlakai Vinayak, ICLR 2025, arXiv:2406.08469.
"""

from .baselines import MLPRewardModel, PerUserLogistic, UnconstrainedIdealPoint
from .config import ClaimConfig, PALConfig
from .data import (
    RECORD_COLUMNS,
    Comparisons,
    EmbeddedComparisons,
    embed_comparisons,
    from_chosen_rejected,
    from_records,
    from_signed,
)
from .encoders import (
    CachedEncoder,
    HashedNgramEncoder,
    HFEncoder,
    LookupEncoder,
    MiniLMEncoder,
    TextEncoder,
    default_cache_dir,
)
from .model import (
    PALHead,
    PALRewardModel,
    RewardOutput,
    UserRegistry,
    cumulative_weights,
    hinge_loss,
    parse_projector,
    pool_last,
    pool_mean,
    preference_loss,
)
from .tldr import TLDR_PROMPT, read_tldr_comparisons, relabel_by_length, top_workers
from .train import PALEstimator, PALTrainer, comparison_accuracy_scorer, comparison_matrix
from .worlds import (
    IdealPointWorld,
    SummaryLengthWorld,
    first_n_per_user,
    length_probe_accuracy,
    make_ideal_point_world,
    make_summary_length_world,
    simplex_grid,
    weight_recovery_error,
)

__all__ = [
    "RECORD_COLUMNS",
    "TLDR_PROMPT",
    "CachedEncoder",
    "ClaimConfig",
    "Comparisons",
    "EmbeddedComparisons",
    "HFEncoder",
    "HashedNgramEncoder",
    "IdealPointWorld",
    "LookupEncoder",
    "MLPRewardModel",
    "MiniLMEncoder",
    "PALConfig",
    "PALEstimator",
    "PALHead",
    "PALRewardModel",
    "PALTrainer",
    "PerUserLogistic",
    "RewardOutput",
    "SummaryLengthWorld",
    "TextEncoder",
    "UnconstrainedIdealPoint",
    "UserRegistry",
    "comparison_accuracy_scorer",
    "comparison_matrix",
    "cumulative_weights",
    "default_cache_dir",
    "embed_comparisons",
    "first_n_per_user",
    "from_chosen_rejected",
    "from_records",
    "from_signed",
    "hinge_loss",
    "length_probe_accuracy",
    "make_ideal_point_world",
    "make_summary_length_world",
    "parse_projector",
    "pool_last",
    "pool_mean",
    "preference_loss",
    "read_tldr_comparisons",
    "relabel_by_length",
    "simplex_grid",
    "top_workers",
    "weight_recovery_error",
]
