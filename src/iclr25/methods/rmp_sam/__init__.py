"""RMP-SAM: one real-time dynamic-convolution model for panoptic, video-instance and click segmentation.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Shilin Xu, Haobo Yuan, Qingyu
Shi, Lu Qi, Jingbo Wang, Yibo Yang, Yining Li, Kai Chen, Yunhai Tong, Bernard Ghanem, Xiangtai Li,
Ming-Hsuan Yang, ICLR 2025, arXiv:2401.10228. Official code (model and evaluation only):
xushilin1/RMP-SAM. This package also ships the training code.
"""

from iclr25.methods.rmp_sam.adapters import ObjectAdapter, PromptAdapter
from iclr25.methods.rmp_sam.baselines import (
    Mask2FormerDecoder,
    attention_flops_counted,
    decoder_flops,
    decoder_latency,
)
from iclr25.methods.rmp_sam.checkpoint import (
    from_official_state_dict,
    official_key_report,
    to_official_state_dict,
)
from iclr25.methods.rmp_sam.config import (
    ClaimConfig,
    LossConfig,
    RMPSAMConfig,
    TrainConfig,
    convnext_l,
    r18,
    r50,
    tiny,
)
from iclr25.methods.rmp_sam.data import SegData, from_shapes_world, panoptic_targets
from iclr25.methods.rmp_sam.datasets import COCOInstances, COCOPanoptic, YouTubeVIS, rgb_to_id
from iclr25.methods.rmp_sam.decoder import DecoderStage, KernelUpdate, dynamic_masks, hard_mask_pool
from iclr25.methods.rmp_sam.demo import demo
from iclr25.methods.rmp_sam.encoder import DCNv2, LiteNeck, build_backbone
from iclr25.methods.rmp_sam.evaluation import (
    evaluate_clicks,
    evaluate_panoptic,
    evaluate_video,
    validation_losses,
)
from iclr25.methods.rmp_sam.losses import dice_loss, prompt_loss, set_loss, sigmoid_bce
from iclr25.methods.rmp_sam.matching import (
    fixed_assignment,
    hungarian_match,
    importance_points,
    match_cost,
    point_sample,
)
from iclr25.methods.rmp_sam.metrics import VideoMaskAP, click_iou, noc, panoptic_quality, tube_iou
from iclr25.methods.rmp_sam.model import RMPSAM, RMPSAMPredictor, build_text_classifier, tracks_to_ytvis
from iclr25.methods.rmp_sam.postprocess import panoptic_inference, to_torchmetrics
from iclr25.methods.rmp_sam.prompts import PromptEncoder, point_to_box
from iclr25.methods.rmp_sam.train import co_train
from iclr25.methods.rmp_sam.video import frames_to_tube, link_clips, tube_to_frames

__all__ = [
    "RMPSAM",
    "COCOInstances",
    "COCOPanoptic",
    "ClaimConfig",
    "DCNv2",
    "DecoderStage",
    "KernelUpdate",
    "LiteNeck",
    "LossConfig",
    "Mask2FormerDecoder",
    "ObjectAdapter",
    "PromptAdapter",
    "PromptEncoder",
    "RMPSAMConfig",
    "RMPSAMPredictor",
    "SegData",
    "TrainConfig",
    "VideoMaskAP",
    "YouTubeVIS",
    "attention_flops_counted",
    "build_backbone",
    "build_text_classifier",
    "click_iou",
    "co_train",
    "convnext_l",
    "decoder_flops",
    "decoder_latency",
    "demo",
    "dice_loss",
    "dynamic_masks",
    "evaluate_clicks",
    "evaluate_panoptic",
    "evaluate_video",
    "fixed_assignment",
    "frames_to_tube",
    "from_official_state_dict",
    "from_shapes_world",
    "hard_mask_pool",
    "hungarian_match",
    "importance_points",
    "link_clips",
    "match_cost",
    "noc",
    "official_key_report",
    "panoptic_inference",
    "panoptic_quality",
    "panoptic_targets",
    "point_sample",
    "point_to_box",
    "prompt_loss",
    "r18",
    "r50",
    "rgb_to_id",
    "set_loss",
    "sigmoid_bce",
    "tiny",
    "to_official_state_dict",
    "to_torchmetrics",
    "tracks_to_ytvis",
    "tube_iou",
    "tube_to_frames",
    "validation_losses",
]
