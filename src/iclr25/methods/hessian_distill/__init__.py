"""Hessian distillation: fast, specialised force fields trained on a foundation model's Hessian rows.

*Towards Fast, Specialized Machine Learning Force Fields: Distilling Foundation Models via
Energy Hessians*, Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan, ICLR 2025, arXiv:2501.09009.
"""

from .baselines import (
    direct_student,
    make_student,
    random_teacher_labels,
    shuffled_labels,
    sign_flipped_labels,
)
from .batch import AtomsBatch, numbers_hash
from .calculator import StudentCalculator, energy_drift, run_nve
from .config import ClaimConfig, DataConfig, DistillConfig, FoundationConfig, StudentConfig
from .data import (
    BROAD_ELEMENTS,
    LabelledStructures,
    make_broad_set,
    make_clusters,
    read_structures,
    specialised_subset,
    write_structures,
)
from .hessian import check_rows, force_jacobian, hessian_rows, sample_rows
from .labels import TeacherLabelStore
from .loss import AdaptiveHessianWeight, HessianDistillationLoss, energy_force_loss
from .mace_teacher import MACEEnergyModel, load_mace_model, load_mace_teacher
from .models import EnergyModel, TinyPaiNN, count_parameters, load_model, polynomial_envelope
from .speed import count_flops, time_calls
from .spice import SPICE_FIELDS, SpiceHDF5
from .teachers import ASECalculatorTeacher, EnergyFunctionModel, TorchTeacher, batch_to_atoms
from .train import DistillTrainer, evaluate, fit_normalisation, train_teacher

__all__ = [
    "BROAD_ELEMENTS",
    "SPICE_FIELDS",
    "ASECalculatorTeacher",
    "AdaptiveHessianWeight",
    "AtomsBatch",
    "ClaimConfig",
    "DataConfig",
    "DistillConfig",
    "DistillTrainer",
    "EnergyFunctionModel",
    "EnergyModel",
    "FoundationConfig",
    "HessianDistillationLoss",
    "LabelledStructures",
    "MACEEnergyModel",
    "SpiceHDF5",
    "StudentCalculator",
    "StudentConfig",
    "TeacherLabelStore",
    "TinyPaiNN",
    "TorchTeacher",
    "batch_to_atoms",
    "check_rows",
    "count_flops",
    "count_parameters",
    "direct_student",
    "energy_drift",
    "energy_force_loss",
    "evaluate",
    "fit_normalisation",
    "force_jacobian",
    "hessian_rows",
    "load_mace_model",
    "load_mace_teacher",
    "load_model",
    "make_broad_set",
    "make_clusters",
    "make_student",
    "numbers_hash",
    "polynomial_envelope",
    "random_teacher_labels",
    "read_structures",
    "run_nve",
    "sample_rows",
    "shuffled_labels",
    "sign_flipped_labels",
    "specialised_subset",
    "time_calls",
    "train_teacher",
    "write_structures",
]
