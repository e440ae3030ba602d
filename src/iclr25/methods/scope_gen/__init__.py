"""SCOPE-Gen: conformal prediction sets for black-box generative models with few admissibility checks.

Kladny, Schölkopf, Muehlebach. *Conformal Generative Modeling with Improved Sample Efficiency
through Sequential Greedy Filtering*. ICLR 2025. arXiv 2410.01660. Includes the Conformal
Language Modeling baseline (Quach et al., ICLR 2024).
"""

from iclr25.methods.scope_gen.adapters import (
    ArithmeticTask,
    HFGenerator,
    MoleculeTask,
    build_arithmetic_lm,
    canonical_smiles,
    molecule_task,
    text_similarity,
)
from iclr25.methods.scope_gen.clm import (
    CLM,
    binomial_pvalue,
    clm_grids,
    clm_losses,
    clm_risk_grid,
    fixed_sequence_test,
    pareto_front,
)
from iclr25.methods.scope_gen.config import ScopeGenCheckConfig
from iclr25.methods.scope_gen.conformal import (
    allocate_alphas,
    conformal_quantile,
    disjoint_splits,
    min_calibration_size,
)
from iclr25.methods.scope_gen.oracle import (
    AdmissibilityOracle,
    ArrayOracle,
    Generator,
    OracleBudgetError,
    Similarity,
    canonical_key,
)
from iclr25.methods.scope_gen.orders import farthest_point_order, quality_order
from iclr25.methods.scope_gen.pipeline import BatchPrediction, PredictionSet, ScopeGen, evaluate
from iclr25.methods.scope_gen.scores import diversity_scores, generation_scores, quality_scores
from iclr25.methods.scope_gen.stages import filter_stage, first_admissible, generation_stage
from iclr25.methods.scope_gen.tasks import GaussianMixtureToy, QASimulator, TaskArrays, load_arrays
from iclr25.methods.scope_gen.text import ReportTask, RougeScore, human_oracle, rouge_oracle, rouge_similarity

__all__ = [
    "CLM",
    "AdmissibilityOracle",
    "ArithmeticTask",
    "ArrayOracle",
    "BatchPrediction",
    "GaussianMixtureToy",
    "Generator",
    "HFGenerator",
    "MoleculeTask",
    "OracleBudgetError",
    "PredictionSet",
    "QASimulator",
    "ReportTask",
    "RougeScore",
    "ScopeGen",
    "ScopeGenCheckConfig",
    "Similarity",
    "TaskArrays",
    "allocate_alphas",
    "binomial_pvalue",
    "build_arithmetic_lm",
    "canonical_key",
    "canonical_smiles",
    "clm_grids",
    "clm_losses",
    "clm_risk_grid",
    "conformal_quantile",
    "disjoint_splits",
    "diversity_scores",
    "evaluate",
    "farthest_point_order",
    "filter_stage",
    "first_admissible",
    "fixed_sequence_test",
    "generation_scores",
    "generation_stage",
    "human_oracle",
    "load_arrays",
    "min_calibration_size",
    "molecule_task",
    "pareto_front",
    "quality_order",
    "quality_scores",
    "rouge_oracle",
    "rouge_similarity",
    "text_similarity",
]
