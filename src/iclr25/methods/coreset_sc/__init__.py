"""Coreset Spectral Clustering (Jourdan, Schwartzman, Macgregor, Sun; ICLR 2025, arXiv 2503.07227)."""

from iclr25.methods.coreset_sc.baselines import (
    CoresetKernelKMeans,
    dense_kernel_seeding,
    full_spectral_clustering,
    nearest_point_labels,
    reference_coreset_sc,
    weighted_kernel_kmeans,
)
from iclr25.methods.coreset_sc.estimator import CoresetSpectralClustering
from iclr25.methods.coreset_sc.graphs import from_networkx, load_graph, sbm
from iclr25.methods.coreset_sc.kernel import (
    check_adjacency,
    conductances,
    degrees,
    kernel_kmeans_cost,
    normalized_cut,
    self_affinities,
    sparse_kernel_distances,
)
from iclr25.methods.coreset_sc.labelling import centre_norms, label_full_graph
from iclr25.methods.coreset_sc.sampling import (
    SeedingResult,
    SumTree,
    coreset_graph,
    sample_coreset,
    sampling_probabilities,
    sparse_kernel_seeding,
)
from iclr25.methods.coreset_sc.spectral import (
    eigsh_embedding,
    fast_spectral_clustering,
    power_method_embedding,
)

__all__ = [
    "CoresetKernelKMeans",
    "CoresetSpectralClustering",
    "SeedingResult",
    "SumTree",
    "centre_norms",
    "check_adjacency",
    "conductances",
    "coreset_graph",
    "degrees",
    "dense_kernel_seeding",
    "eigsh_embedding",
    "fast_spectral_clustering",
    "from_networkx",
    "full_spectral_clustering",
    "kernel_kmeans_cost",
    "label_full_graph",
    "load_graph",
    "nearest_point_labels",
    "normalized_cut",
    "power_method_embedding",
    "reference_coreset_sc",
    "sample_coreset",
    "sampling_probabilities",
    "sbm",
    "self_affinities",
    "sparse_kernel_distances",
    "sparse_kernel_seeding",
    "weighted_kernel_kmeans",
]
