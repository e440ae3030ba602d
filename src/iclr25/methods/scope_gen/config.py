"""Configuration of the SCOPE-Gen claim check.

*Conformal Generative Modeling with Improved Sample Efficiency through Sequential Greedy
Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach; ICLR 2025; arXiv
2410.01660), Sec. 5 (experimental protocol), at CPU scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from iclr25._core.config import param

__all__ = ["TASKS", "ScopeGenCheckConfig"]

#: Tasks of the claim check: QA simulator (A), Gaussian-mixture toy (C), molecules (B, RDKit),
#: long-form reports from a tiny LM (D, ROUGE).
TASKS = ("qa", "gmm", "molecules", "reports")


@dataclass(frozen=True)
class ScopeGenCheckConfig:
    """Protocol of the claim check: tasks, α levels, split sizes and repetitions."""

    tasks: tuple[str, ...] = param(
        ("qa", "gmm", "molecules", "reports"),
        doc="tasks run (molecules only if rdkit imports, reports only if rouge-score imports)",
        source="deviation: generated stand-ins for TriviaQA, CNN-DM/MIMIC-CXR and MOSES; no downloads",
    )
    alphas: tuple[float, ...] = param(
        (0.3, 0.4), doc="total miscoverage levels α", source="paper: Sec. 5, α grid"
    )
    n_prompts: int = param(
        2000, doc="prompts generated per task (the pool)", source="deviation: CPU-scale pool"
    )
    n_cal: int = param(
        600, doc="calibration prompts per repetition", source="paper: Sec. 5, text tasks use 600"
    )
    n_test: int = param(300, doc="test prompts per repetition", source="paper: Sec. 5, 300 test points")
    repetitions: int = param(
        100,
        doc="R random calibration/test splits",
        source="deviation: 100 at the full budget (CPU); the long budget runs the paper's 300",
    )
    m_max: int = param(
        20, doc="sampling cap per prompt (text-like tasks)", source="paper: Sec. 5, 20 samples"
    )
    m_max_molecules: int = param(
        60, doc="sampling cap per prompt (molecules)", source="paper: Sec. 5, 60 molecules"
    )
    n_prompts_molecules: int = param(
        900, doc="prompts generated for the molecule task", source="deviation: RDKit is slow; smaller pool"
    )
    n_prompts_reports: int = param(
        1000, doc="cases generated for the report task", source="deviation: LM sampling on CPU; smaller pool"
    )
    reports_threshold: float = param(
        0.9,
        doc="ROUGE-L bar of the report oracle (at most one of six findings wrong)",
        source="deviation: set from the report template (a ROUGE-L bar as in the paper's text tasks)",
    )
    reports_lm_steps: int = param(
        150, doc="training steps of the report task's tiny GPT-2", source="deviation: CPU budget"
    )
    stages: tuple[str, ...] = param(
        ("generation", "quality", "diversity"),
        doc="stage order of SCOPE-Gen (the 'flipped' arm swaps the two filters)",
        source="paper: Fig. 1, quality filter before diversity filter",
    )
    generation_score: str = param(
        "count", doc="generation score (count/sum/max)", source="paper: Sec. 4, count"
    )
    alpha_parts: tuple[int, ...] = param(
        (3, 1, 1), doc="chunks of log(1-α) per stage", source="paper: configs"
    )
    alpha_chunks: int = param(5, doc="M, total chunks", source="paper: official configs, 5 chunks")
    clm_pairs: int = param(10, doc="(ε, δ) pairs tried for CLM", source="paper: Sec. 5, 10 pairs")
    clm_n_lambdas: int = param(
        25,
        doc="quantiles per CLM λ_sim/λ_qual grid (plus ±inf); λ_stop is every count 1..k",
        source="paper: CLM, 25 per grid",
    )
    clm_set_score: str = param("count", doc="CLM stopping set score", source="paper: CLM first-k stopping")
    clm_k_small: int = param(
        10, doc="k_max of the reduced CLM arm", source="paper: official configs, 'CLM reduced max' = 10"
    )
    calibration_sizes: tuple[int, ...] = param(
        (150, 300, 600),
        doc="calibration-set sizes of the report-only sensitivity figure",
        source="deviation: sensitivity study, not in the paper's tables",
    )
    sensitivity_repetitions: int = param(
        20, doc="splits per size in the sensitivity figure", source="deviation: CPU budget"
    )
    seed_offset: int = param(
        0, doc="added to the run seed for the task worlds", source="deviation: bookkeeping"
    )

    def __post_init__(self) -> None:
        if not self.tasks or set(self.tasks) - set(TASKS):
            raise ValueError(f"tasks must be a non-empty subset of {TASKS}, got {self.tasks}")
        if not self.alphas or not all(0.0 < a < 1.0 for a in self.alphas):
            raise ValueError(f"alphas must lie in (0, 1), got {self.alphas}")
        positive = (
            "n_prompts",
            "n_cal",
            "n_test",
            "repetitions",
            "m_max",
            "m_max_molecules",
            "n_prompts_reports",
            "reports_lm_steps",
            "clm_pairs",
            "clm_k_small",
            "sensitivity_repetitions",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        pools = {"qa": self.n_prompts, "gmm": self.n_prompts, "molecules": self.n_prompts_molecules}
        pools["reports"] = self.n_prompts_reports
        pool = min(pools[t] for t in self.tasks)
        if self.n_cal + self.n_test > pool or max(self.calibration_sizes, default=0) + self.n_test > pool:
            raise ValueError(
                f"n_cal (or a calibration size) + n_test = {self.n_cal} + {self.n_test} exceeds the "
                f"smallest pool of the tasks run ({pool})"
            )
        if not self.calibration_sizes or min(self.calibration_sizes) < 1:
            raise ValueError(f"calibration_sizes must be positive, got {self.calibration_sizes}")
        if not 0.0 <= self.reports_threshold <= 1.0:
            raise ValueError(f"reports_threshold must lie in [0, 1], got {self.reports_threshold}")
        if self.stages[:1] != ("generation",) or sorted(self.stages[1:]) != ["diversity", "quality"]:
            raise ValueError(f"stages must be generation then quality and diversity, got {self.stages}")
        if self.generation_score not in ("count", "sum", "max"):
            raise ValueError(f"generation_score must be count, sum or max, got {self.generation_score!r}")
        if self.clm_set_score not in ("count", "sum", "max"):
            raise ValueError(f"clm_set_score must be count, sum or max, got {self.clm_set_score!r}")
        if self.clm_k_small > min(self.m_max, self.m_max_molecules):
            raise ValueError(f"clm_k_small {self.clm_k_small} exceeds a sampling cap")
        if sum(self.alpha_parts) != self.alpha_chunks or len(self.alpha_parts) != 3:
            raise ValueError(f"alpha_parts {self.alpha_parts} must be 3 parts summing to alpha_chunks")
