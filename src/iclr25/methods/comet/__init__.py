"""COMET: conditionally overlapping experts with fixed random-projection routing.

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones, ICLR 2025, arXiv:2410.08003.
"""

from iclr25.methods.comet.baselines import (
    BernoulliMaskMLP,
    DenseMLP,
    MoEMLP,
    ResampledRoutingMLP,
    TopKMLP,
    smaller_widths,
)
from iclr25.methods.comet.config import ClaimConfig, COMETConfig
from iclr25.methods.comet.data import load_cifar, load_image_folder, load_sarcos
from iclr25.methods.comet.ffn import COMETActivation, COMETFFNHandle, comet_ffn_
from iclr25.methods.comet.mlp import (
    COMETMLP,
    COMETClassifier,
    COMETRegressor,
    MaskedMLP,
    TrainLog,
    evaluate,
    train_mlp,
)
from iclr25.methods.comet.routing import COMETRouter, keep_count, kwta_mask, mask_cosine, routing_generator

__all__ = [
    "COMETMLP",
    "BernoulliMaskMLP",
    "COMETActivation",
    "COMETClassifier",
    "COMETConfig",
    "COMETFFNHandle",
    "COMETRegressor",
    "COMETRouter",
    "ClaimConfig",
    "DenseMLP",
    "MaskedMLP",
    "MoEMLP",
    "ResampledRoutingMLP",
    "TopKMLP",
    "TrainLog",
    "comet_ffn_",
    "evaluate",
    "keep_count",
    "kwta_mask",
    "load_cifar",
    "load_image_folder",
    "load_sarcos",
    "mask_cosine",
    "routing_generator",
    "smaller_widths",
    "train_mlp",
]
