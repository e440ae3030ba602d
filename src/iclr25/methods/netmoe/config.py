"""Configuration of the NetMoE claim check.

Paper: *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*, Xinyi Liu, Yujie Wang,
Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui, ICLR 2025, OpenReview ``1qP3lsatCR``
(no arXiv version established). The paper's cluster (Table 2) is 4 nodes x 8 GPUs with 400 GB/s
NVLink and 100 GB/s InfiniBand. :class:`ClaimConfig` sizes the checks: the headline on the real
routing of a Mixtral trained on mixed-domain token streams (the ``dom_*`` fields) and the second
source, a byte-level MoE LM trained on local package text (the ``lm_*`` fields), both traced at
the paper's shape (``eval_*``: S = 1024, E = 2J, I / J = 4), the report-only locality sweep on
synthetic traces (``samples``, ``seq_len``, ``num_experts``, ``beta*``), G2 (solver optimality)
and G3 (a placed multi-layer stack on gloo processes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from iclr25._core.config import param

__all__ = ["ClaimConfig"]


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the NetMoE claim check.

    Example:
        >>> ClaimConfig().nodes, ClaimConfig().gpus_per_node
        (2, 4)
    """

    nodes: int = param(2, doc="N nodes of the modelled cluster", source="deviation: 2 of the paper's 4 nodes")
    gpus_per_node: int = param(4, doc="G devices per node", source="deviation: 4 of the paper's 8 GPUs")
    bw_intra: float = param(
        400e9, doc="B_intra, NVLink bytes/s per device", source="paper: Table 2, 400 GB/s"
    )
    bw_inter: float = param(
        100e9, doc="B_inter, InfiniBand bytes/s per device", source="paper: Table 2, 100 GB/s"
    )
    bytes_per_token: int = param(
        2048, doc="s, bytes per token copy (d = 1024 in bf16)", source="paper: GPT-MoE hidden 1024, bf16"
    )
    num_experts: int = param(
        32, doc="synthetic sweep: E experts, round-robin over devices", source="deviation: spec G1, E = 32"
    )
    samples: int = param(
        64, doc="synthetic sweep: I samples per iteration (global batch)", source="deviation: spec G1, I = 64"
    )
    seq_len: int = param(
        256, doc="synthetic sweep: S tokens per sample", source="deviation: spec G1, S = 256"
    )
    top_k: int = param(2, doc="k experts per token", source="paper: top-2 gating")
    beta: float = param(
        0.1,
        doc="synthetic: Dirichlet concentration of per-sample routing (strong locality)",
        source="deviation: spec, 0.1",
    )
    trace_seeds: int = param(5, doc="synthetic: traces per beta", source="deviation: spec, 5 trace seeds")
    beta_sweep: tuple[float, ...] = param(
        (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0),
        doc="synthetic figure: beta values of the gain-vs-locality curve",
        source="deviation: log grid over strong to no locality",
    )
    opt_instances: int = param(50, doc="G2: random small instances", source="deviation: spec G2, 50")
    opt_max_samples: int = param(16, doc="G2: largest I of an instance", source="deviation: spec G2, I <= 16")
    g3_nodes: int = param(
        2, doc="G3: nodes of the gloo run", source="deviation: spec G3, 2 x 2 on 4 processes"
    )
    g3_gpus_per_node: int = param(2, doc="G3: processes per node", source="deviation: spec G3, 2 x 2")
    g3_seeds: int = param(
        2, doc="G3: data/parameter seeds", source="deviation: 2 seeds (plus one migrate run)"
    )
    g3_d_model: int = param(32, doc="G3: d of the block", source="deviation: spec G3, d = 32")
    g3_experts: int = param(
        4, doc="G3: experts (one per rank at 2 x 2)", source="deviation: spec G3, 4 experts"
    )
    g3_layers: int = param(
        2, doc="G3: MoE layers of the placed stack", source="deviation: smallest stack with a next layer"
    )
    g3_samples: int = param(8, doc="G3: I global batch", source="deviation: spec G3, I = 8")
    g3_seq_len: int = param(16, doc="G3: S", source="deviation: spec G3, S = 16")
    lm_layers: int = param(4, doc="text LM: MoE layers L", source="deviation: 4 of the paper's 12-24")
    lm_experts: int = param(
        16,
        doc="text LM: experts E (E = 2J on the 2 x 4 cluster)",
        source="paper: E = 2J (its experiments' shape)",
    )
    lm_d_model: int = param(64, doc="text LM: width", source="deviation: CPU scale")
    lm_d_ff: int = param(128, doc="text LM: expert hidden width", source="deviation: CPU scale")
    lm_context: int = param(64, doc="text LM: training context (bytes)", source="deviation: CPU scale")
    lm_steps: int = param(300, doc="text LM: Adam steps", source="deviation: about a minute on one thread")
    lm_batch: int = param(32, doc="text LM: windows per step", source="deviation: CPU scale")
    lm_aux_weight: float = param(
        0.01, doc="text LM: weight of the Switch balance loss", source="deviation: the Switch default"
    )
    dom_domains: int = param(
        8, doc="mixed-domain LM: D Markov-chain domains", source="deviation: spec, synthetic domains"
    )
    dom_vocab: int = param(
        256, doc="mixed-domain LM: vocabulary shared by the domains", source="deviation: CPU scale"
    )
    dom_tokens_per_domain: int = param(
        32,
        doc="mixed-domain LM: tokens of each domain's vocabulary subset",
        source="deviation: spec, vocabulary subsets",
    )
    dom_concentration: float = param(
        0.3,
        doc="mixed-domain LM: Dirichlet concentration of the transition rows",
        source="deviation: peaked chains",
    )
    dom_layers: int = param(4, doc="mixed-domain LM: MoE layers", source="deviation: as the text LM")
    dom_d_model: int = param(64, doc="mixed-domain LM: width", source="deviation: CPU scale")
    dom_d_ff: int = param(128, doc="mixed-domain LM: expert hidden width", source="deviation: CPU scale")
    dom_heads: int = param(4, doc="mixed-domain LM: attention heads", source="deviation: CPU scale")
    dom_context: int = param(
        64, doc="mixed-domain LM: training context (tokens)", source="deviation: CPU scale"
    )
    dom_steps: int = param(
        300, doc="mixed-domain LM: Adam steps", source="deviation: about 30 s on one thread"
    )
    dom_batch: int = param(32, doc="mixed-domain LM: documents per step", source="deviation: CPU scale")
    dom_aux_weight: float = param(
        0.0,
        doc="mixed-domain LM: weight of the balance loss (0: none)",
        source="deviation: the paper gives no balance weight; none keeps the domains' routing apart",
    )
    eval_samples: int = param(
        32,
        doc="real routing: I per global batch (I / J = 4)",
        source="paper: I / J = 4 (its experiments' shape)",
    )
    eval_seq_len: int = param(
        1024, doc="real routing: S bytes per sample", source="paper: S = 1024 (its experiments' shape)"
    )
    eval_batches: int = param(
        8,
        doc="real routing: global batches drawn from held-out files",
        source="deviation: averages 8 batches",
    )
    solver_samples: int = param(512, doc="solver timing: I", source="paper: global batch up to 512")
    solver_nodes: int = param(4, doc="solver timing: N", source="paper: 4 nodes")
    solver_gpus_per_node: int = param(8, doc="solver timing: G", source="paper: 8 GPUs per node")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or f.name in ("beta_sweep", "dom_aux_weight"):
                continue
            if isinstance(v, (int, float)) and v <= 0:
                raise ValueError(f"{f.name} must be > 0, got {v}")
        if not self.beta_sweep or min(self.beta_sweep) <= 0:
            raise ValueError(f"beta_sweep must hold positive values, got {self.beta_sweep}")
        j = self.nodes * self.gpus_per_node
        if self.samples % j or self.num_experts % j:
            raise ValueError(f"samples and num_experts must be divisible by nodes * gpus_per_node = {j}")
        if self.eval_samples % j or self.lm_experts % j:
            raise ValueError(f"eval_samples and lm_experts must be divisible by nodes * gpus_per_node = {j}")
        g3 = self.g3_nodes * self.g3_gpus_per_node
        if self.g3_samples % g3 or self.g3_experts % g3:
            raise ValueError(f"g3_samples and g3_experts must be divisible by g3 world size {g3}")
        if self.solver_samples % (self.solver_nodes * self.solver_gpus_per_node):
            raise ValueError("solver_samples must be divisible by solver_nodes * solver_gpus_per_node")
        if self.top_k > min(self.num_experts, self.g3_experts, self.lm_experts):
            raise ValueError(f"top_k={self.top_k} exceeds the number of experts")
        if self.dom_aux_weight < 0:
            raise ValueError(f"dom_aux_weight must be >= 0, got {self.dom_aux_weight}")
        if self.dom_tokens_per_domain > self.dom_vocab:
            raise ValueError("dom_tokens_per_domain must not exceed dom_vocab")
        if self.dom_layers < 2:
            raise ValueError(
                f"dom_layers must be >= 2 (the objective needs a next layer), got {self.dom_layers}"
            )
        if self.lm_layers < 2:
            raise ValueError(
                f"lm_layers must be >= 2 (the objective needs a next layer), got {self.lm_layers}"
            )
