"""NetMoE: dynamic sample placement that cuts the All-to-All traffic of expert-parallel MoE training.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement*, Xinyi Liu, Yujie Wang,
Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui, ICLR 2025, OpenReview
``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from .cost import (
    IterationTraffic,
    Topology,
    TrafficReport,
    assignment_counts,
    inter_cost,
    intra_cost,
    iteration_traffic,
    link_bytes,
    traffic,
)
from .layer import (
    A2AStats,
    DenseMoE,
    ExpertParallelMoE,
    ExpertParallelStack,
    all_to_all_v,
    exchange_counts,
    init_moe_parameters,
    probe_all_to_all,
)
from .placement import EquivalenceSpec, equivalence_worker, global_token_loss, make_block_batch, placed_labels
from .planner import AsyncPlanner
from .solve import (
    Placement,
    expert_replacement,
    expert_stats,
    greedy_placement,
    identity_placement,
    placement_cost,
    plan_layers,
    random_placement,
    solve_bottleneck,
    solve_ilp,
    solve_joint,
    solve_two_stage,
)

__all__ = [
    "A2AStats",
    "AsyncPlanner",
    "DenseMoE",
    "EquivalenceSpec",
    "ExpertParallelMoE",
    "ExpertParallelStack",
    "IterationTraffic",
    "Placement",
    "Topology",
    "TrafficReport",
    "all_to_all_v",
    "assignment_counts",
    "equivalence_worker",
    "exchange_counts",
    "expert_replacement",
    "expert_stats",
    "global_token_loss",
    "greedy_placement",
    "identity_placement",
    "init_moe_parameters",
    "inter_cost",
    "intra_cost",
    "iteration_traffic",
    "link_bytes",
    "make_block_batch",
    "placed_labels",
    "placement_cost",
    "plan_layers",
    "probe_all_to_all",
    "random_placement",
    "solve_bottleneck",
    "solve_ilp",
    "solve_joint",
    "solve_two_stage",
    "traffic",
]
