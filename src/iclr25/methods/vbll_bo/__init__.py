"""VBLL Bayesian optimisation: a BoTorch surrogate with variational Bayesian last layers, exact
recursive conditioning and continual training.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.
"""

from .baselines import BOResult, DeepEnsemble, exact_gp_linear, fit_gp, gaussian_nll, run_bo
from .config import ClaimConfig, ContinualConfig, FitConfig, HeadConfig
from .continual import ContinualVBLL
from .head import VBLLHead, blr_posterior, cholesky_rank1_update, recursive_update
from .model import ThompsonPath, VBLLModel, default_backbone
from .problems import NNDraw, benchmark, simple_regret
from .thompson import maximize_path, thompson_candidates
from .training import EarlyStopping, FitResult, fit_vbll

__all__ = [
    "BOResult",
    "ClaimConfig",
    "ContinualConfig",
    "ContinualVBLL",
    "DeepEnsemble",
    "EarlyStopping",
    "FitConfig",
    "FitResult",
    "HeadConfig",
    "NNDraw",
    "ThompsonPath",
    "VBLLHead",
    "VBLLModel",
    "benchmark",
    "blr_posterior",
    "cholesky_rank1_update",
    "default_backbone",
    "exact_gp_linear",
    "fit_gp",
    "fit_vbll",
    "gaussian_nll",
    "maximize_path",
    "recursive_update",
    "run_bo",
    "simple_regret",
    "thompson_candidates",
]
