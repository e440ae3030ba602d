"""InvMSAFold: structure → low-rank Potts model → fast, diverse sequences.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva, Barthelemy
Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975.
"""

from .baselines import IFAR
from .config import ClaimConfig, DecoderConfig, LatticeConfig, SampleConfig, TrainConfig
from .data import (
    LATTICE_ALPHABET,
    PROTEIN_ALPHABET,
    UNKNOWN_RESIDUES,
    decode,
    encode,
    pad_batch,
    read_a3m,
    read_fasta,
    subsample_rows,
    write_fasta,
)
from .decoder import InvMSAFold
from .encoders import ESMIF1Encoder, LatticeEncoder, PrecomputedEmbeddings, StructureEncoder
from .foundation import IFARRecipe, fold_split, load_ifar, pretrain_ifar
from .lattice import (
    MJ_ORDER,
    MJ_TABLE,
    LatticeStructure,
    LatticeWorld,
    contact_energy,
    count_hamiltonian_paths_dp,
    enumerate_compact_walks,
    mj_matrix,
    sample_msa,
)
from .metrics import (
    connected_covariance,
    covariance_pearson,
    hamming_to,
    mean_pairwise_hamming,
    nearest_row_distance,
    pca_kl,
)
from .potts import (
    ARPotts,
    PottsParams,
    ar_fields,
    ar_frobenius_sq,
    ar_log_prob,
    conditional_logits,
    lowrank_energy,
    pseudo_log_likelihood,
    pw_frobenius_sq,
    read_adabmdca_text,
    read_npz,
    write_adabmdca_text,
    write_npz,
)
from .structure_io import THREE_TO_ONE, ca_contact_map, load_msa, read_ca_coords
from .train import invmsafold_loss, train_ifar, train_invmsafold

__all__ = [
    "IFAR",
    "LATTICE_ALPHABET",
    "MJ_ORDER",
    "MJ_TABLE",
    "PROTEIN_ALPHABET",
    "THREE_TO_ONE",
    "UNKNOWN_RESIDUES",
    "ARPotts",
    "ClaimConfig",
    "DecoderConfig",
    "ESMIF1Encoder",
    "IFARRecipe",
    "InvMSAFold",
    "LatticeConfig",
    "LatticeEncoder",
    "LatticeStructure",
    "LatticeWorld",
    "PottsParams",
    "PrecomputedEmbeddings",
    "SampleConfig",
    "StructureEncoder",
    "TrainConfig",
    "ar_fields",
    "ar_frobenius_sq",
    "ar_log_prob",
    "ca_contact_map",
    "conditional_logits",
    "connected_covariance",
    "contact_energy",
    "count_hamiltonian_paths_dp",
    "covariance_pearson",
    "decode",
    "encode",
    "enumerate_compact_walks",
    "fold_split",
    "hamming_to",
    "invmsafold_loss",
    "load_ifar",
    "load_msa",
    "lowrank_energy",
    "mean_pairwise_hamming",
    "mj_matrix",
    "nearest_row_distance",
    "pad_batch",
    "pca_kl",
    "pretrain_ifar",
    "pseudo_log_likelihood",
    "pw_frobenius_sq",
    "read_a3m",
    "read_adabmdca_text",
    "read_ca_coords",
    "read_fasta",
    "read_npz",
    "sample_msa",
    "subsample_rows",
    "train_ifar",
    "train_invmsafold",
    "write_adabmdca_text",
    "write_fasta",
    "write_npz",
]
