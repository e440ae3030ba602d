"""Configuration of the SCOPE-Gen claim check.

*Conformal Generative Modeling with Improved Sample Efficiency through Sequential Greedy
Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach; ICLR 2025; arXiv
2410.01660), Sec. 5 (experimental protocol), at CPU scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from iclr25._core.config import param

__all__ = ["TASKS", "ScopeGenCheckConfig"]

#: Tasks of the claim check: QA simulator (A), Gaussian-mixture toy (C), molecules (B, RDKit).
TASKS = ("qa", "gmm", "molecules")


@dataclass(frozen=True)
class ScopeGenCheckConfig:
    """Protocol of the claim check: tasks, α levels, split sizes and repetitions."""

    tasks: tuple[str, ...] = param(
        ("qa", "gmm", "molecules"),
        doc="tasks run (molecules only if rdkit imports, else skipped)",
        source="deviation: generated stand-ins for TriviaQA/CNN-DM/MIMIC-CXR and MOSES; no downloads",
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
        100, doc="R random calibration/test splits", source="deviation: paper uses 300; CPU"
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
    generation_score: str = param(
        "count", doc="generation score (count/sum/max)", source="paper: Sec. 4, count"
    )
    alpha_parts: tuple[int, ...] = param(
        (3, 1, 1), doc="chunks of log(1-α) per stage", source="paper: configs"
    )
    alpha_chunks: int = param(5, doc="M, total chunks", source="paper: official configs, 5 chunks")
    clm_pairs: int = param(10, doc="(ε, δ) pairs tried for CLM", source="paper: Sec. 5, 10 pairs")
    clm_n_lambdas: int = param(
        25, doc="quantiles per CLM λ grid (plus ±inf)", source="paper: CLM, 25 per grid"
    )
    clm_set_score: str = param("count", doc="CLM stopping set score", source="paper: CLM first-k stopping")
    seed_offset: int = param(
        0, doc="added to the run seed for the task worlds", source="deviation: bookkeeping"
    )

    def __post_init__(self) -> None:
        if not self.tasks or set(self.tasks) - set(TASKS):
            raise ValueError(f"tasks must be a non-empty subset of {TASKS}, got {self.tasks}")
        if not self.alphas or not all(0.0 < a < 1.0 for a in self.alphas):
            raise ValueError(f"alphas must lie in (0, 1), got {self.alphas}")
        for name in ("n_prompts", "n_cal", "n_test", "repetitions", "m_max", "m_max_molecules", "clm_pairs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.n_cal + self.n_test > min(self.n_prompts, self.n_prompts_molecules):
            raise ValueError(
                f"n_cal + n_test = {self.n_cal + self.n_test} exceeds n_prompts/n_prompts_molecules"
            )
        if self.generation_score not in ("count", "sum", "max"):
            raise ValueError(f"generation_score must be count, sum or max, got {self.generation_score!r}")
        if self.clm_set_score not in ("count", "sum", "max"):
            raise ValueError(f"clm_set_score must be count, sum or max, got {self.clm_set_score!r}")
        if sum(self.alpha_parts) != self.alpha_chunks or len(self.alpha_parts) != 3:
            raise ValueError(f"alpha_parts {self.alpha_parts} must be 3 parts summing to alpha_chunks")
