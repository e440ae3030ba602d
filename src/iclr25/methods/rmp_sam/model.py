"""RMP-SAM: one real-time model for panoptic, video-instance and interactive segmentation.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Shilin Xu, Haobo Yuan, Qingyu
Shi, Lu Qi, Jingbo Wang, Yibo Yang, Yining Li, Kai Chen, Yunhai Tong, Bernard Ghanem, Xiangtai Li,
Ming-Hsuan Yang, ICLR 2025, arXiv:2401.10228. Fig. 2 / Sec. 3: a backbone and lite neck give one
stride-4 map F; object queries (or prompt queries) go through shared dynamic-convolution stages and
then one decoupled adapter per task. :class:`RMPSAMPredictor` is a SAM-like click interface.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.rmp_sam.adapters import ObjectAdapter, PromptAdapter
from iclr25.methods.rmp_sam.config import LossConfig, RMPSAMConfig
from iclr25.methods.rmp_sam.decoder import DecoderStage, dynamic_masks
from iclr25.methods.rmp_sam.encoder import LiteNeck, build_backbone
from iclr25.methods.rmp_sam.losses import prompt_loss, set_loss
from iclr25.methods.rmp_sam.postprocess import panoptic_inference
from iclr25.methods.rmp_sam.prompts import PromptEncoder, point_to_box
from iclr25.methods.rmp_sam.video import frames_to_tube, link_clips, tube_to_frames

__all__ = ["RMPSAM", "RMPSAMPredictor", "build_text_classifier", "tracks_to_ytvis"]

_TASKS = ("panoptic", "video", "interactive")


def build_text_classifier(class_names, text_encoder, templates) -> torch.Tensor:
    """Class embeddings for the cosine head: each template filled with each class name, encoded,
    L2-normalised, averaged over templates and normalised again (ViLD-style).

    Args:
        class_names: K names.
        text_encoder: callable ``list[str] -> (n, D)`` tensor (e.g. an ``open_clip`` text tower).
        templates: strings with one ``{}``.

    Returns:
        (K, 1, D) embeddings (one prototype per class).

    Example:
        >>> enc = lambda texts: torch.tensor([[float(len(t)), 1.0] for t in texts])
        >>> build_text_classifier(["a", "bb"], enc, ["a {}."]).shape
        torch.Size([2, 1, 2])
    """
    if not class_names or not templates:
        raise ValueError("need at least one class name and one template")
    out = []
    for name in class_names:
        e = F.normalize(text_encoder([t.format(name) for t in templates]).float(), dim=-1).mean(0)
        out.append(F.normalize(e, dim=-1))
    return torch.stack(out)[:, None, :]


class RMPSAM(nn.Module):
    """The network.

    Args:
        config: the architecture.
        class_embed: (K, P, D) fixed class embeddings for the cosine head (None: a seeded random
            orthonormal-ish stand-in is registered when ``class_head == "cosine"``).

    Example:
        >>> torch.manual_seed(0)
        <torch._C.Generator object at ...>
        >>> model = RMPSAM(RMPSAMConfig()).eval()
        >>> out = model(torch.rand(1, 3, 32, 32), task="panoptic")
        >>> out["logits"].shape, out["masks"].shape
        (torch.Size([1, 16, 7]), torch.Size([1, 16, 8, 8]))
    """

    def __init__(self, config: RMPSAMConfig, class_embed: torch.Tensor | None = None) -> None:
        super().__init__()
        self.config = cfg = config
        c = cfg.channels
        self.backbone = build_backbone(cfg)
        # the released neck gives each level half its backbone width
        widths = tuple(ci // 2 for ci in self.backbone.channels) if cfg.neck_widths == "official" else None
        self.neck = LiteNeck(
            self.backbone.channels,
            c,
            cfg.agg_channels,
            cfg.deform,
            level_channels=widths,
            output_relu=cfg.neck_output_relu,
        )
        self.query = nn.Embedding(cfg.num_queries, c)
        self.prompt_encoder = PromptEncoder(c, type_rows=cfg.prompt_type_rows)
        self.stages = nn.ModuleList(
            [
                DecoderStage(
                    c,
                    cfg.num_heads,
                    cfg.ffn_dim,
                    cfg.num_classes,
                    class_kind=cfg.class_head,
                    embed_dim=cfg.embed_dim,
                    logit_scale=cfg.logit_scale,
                    temperature=cfg.stage_temperature,
                    dynamic=cfg.dynamic_kernels,
                    threshold=cfg.mask_threshold,
                    head_bias=cfg.head_bias,
                    iou_from=cfg.iou_from,
                )
                for _ in range(cfg.num_stages)
            ]
        )
        kind = cfg.class_head
        self.object_adapter = ObjectAdapter(
            c,
            cfg.num_classes,
            kind,
            cfg.embed_dim,
            cfg.logit_scale,
            cfg.mask_threshold,
            head_layout=cfg.adapter_heads,
        )
        self.prompt_adapter = PromptAdapter(c, cfg.num_heads, cfg.num_classes, head_layout=cfg.adapter_heads)
        if kind == "cosine":
            if class_embed is None:
                g = torch.Generator().manual_seed(0)
                class_embed = F.normalize(torch.randn(cfg.num_classes, 1, cfg.embed_dim, generator=g), dim=-1)
            if class_embed.shape[0] != cfg.num_classes or class_embed.shape[-1] != cfg.embed_dim:
                raise ValueError(f"class_embed must be ({cfg.num_classes}, P, {cfg.embed_dim})")
            self.register_buffer("class_embed", class_embed.float())
        else:
            self.class_embed = None
        self.register_buffer("pixel_mean", torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1))
        self.register_buffer("pixel_std", torch.tensor([0.25, 0.25, 0.25]).view(1, 3, 1, 1))

    # ------------------------------------------------------------------ building blocks
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Backbone + neck: (B, 3, H, W) in [0, 1] -> F (B, C, H/4, W/4)."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (B, 3, H, W), got {tuple(images.shape)}")
        _check_pixels(images, "images")
        if images.shape[-1] % 32 or images.shape[-2] % 32:
            raise ValueError(
                f"image height and width must be multiples of 32, got {tuple(images.shape[-2:])}"
            )
        return self.neck(self.backbone((images - self.pixel_mean) / self.pixel_std))

    def encode_prompts(
        self, boxes: torch.Tensor, kinds: torch.Tensor, height: int, width: int
    ) -> torch.Tensor:
        """Prompt queries (B, P, C) from XYXY pixel boxes (B, P, 4) and kinds (B, P)."""
        return self.prompt_encoder(boxes, kinds, height, width)

    def decode(
        self,
        features: torch.Tensor,
        *,
        task: str,
        prompt_queries: torch.Tensor | None = None,
        prompt_valid: torch.Tensor | None = None,
    ) -> dict[str, object]:
        """Shared stages + the task's adapter on a feature map (a frame or a tube).

        Returns:
            ``{"logits", "masks", "iou", "queries"}`` of the final output and ``"aux"``: the list of
            supervised outputs (every stage, then the adapter).
        """
        cfg = self.config
        b = features.shape[0]
        attn_mask = None
        if task == "interactive":
            if prompt_queries is None:
                raise ValueError("the interactive task needs prompt queries")
            kernels = prompt_queries
            p = kernels.shape[1]
            if p == 0:
                raise ValueError("empty prompts: give at least one point or box")
            valid = prompt_valid
            if valid is None:
                valid = torch.ones(b, p, dtype=torch.bool, device=kernels.device)
            eye = torch.eye(p, dtype=torch.bool, device=kernels.device)
            allowed = valid[:, None, :].expand(b, p, p) | eye  # without isolation: every real prompt
            if cfg.prompt_isolation:
                allowed = eye.expand(b, p, p)  # prompt isolation: each prompt sees only itself
            attn_mask = (~allowed).repeat_interleave(cfg.num_heads, dim=0)  # (B * heads, P, P), True blocks
        else:
            kernels = self.query.weight[None].expand(b, -1, -1)
        masks = dynamic_masks(kernels, features)
        aux: list[dict[str, torch.Tensor]] = []
        q = kernels
        for stage in self.stages:
            out = stage(q, masks, features, attn_mask=attn_mask, class_embed=self.class_embed)
            aux.append(out)
            q, masks = out["queries"], out["masks"]
        if cfg.adapters:
            if task == "interactive":
                aux.append(self.prompt_adapter(q, features))
            else:
                aux.append(self.object_adapter(q, masks, features, self.class_embed))
        final = aux[-1]
        return {**final, "aux": aux}

    def forward(
        self, images: torch.Tensor, *, task: str = "panoptic", prompts: dict[str, torch.Tensor] | None = None
    ) -> dict[str, object]:
        """Run one task.

        Args:
            images: (B, 3, H, W) in [0, 1], or (B, T, 3, H, W) for ``task="video"`` (a tube).
            task: "panoptic", "video" or "interactive".
            prompts: for "interactive": ``points`` (B, P, 2) as (x, y) pixels or ``boxes`` (B, P, 4)
                XYXY, optional ``valid`` (B, P) bool.

        Returns:
            ``logits`` (B, N, K + 1), ``masks`` (B, N, h, w) (video: (B, N, T * h, w)), ``iou`` (B, N),
            ``queries`` (B, N, C), ``aux`` (per-stage and adapter outputs), ``features``.
        """
        if task not in _TASKS:
            raise ValueError(f"unknown task {task!r}; known: {', '.join(_TASKS)}")
        _check_pixels(images, "images")  # before the neck: DeformConv2d crashes on NaN input
        if task == "video":
            if images.ndim != 5:
                raise ValueError(f"video input must be (B, T, 3, H, W), got {tuple(images.shape)}")
            b, t = images.shape[:2]
            feats = self.encode(images.flatten(0, 1))
            feats = frames_to_tube(feats.view(b, t, *feats.shape[1:]))  # (B, C, T * h, w)
        else:
            feats = self.encode(images)
        pq, valid = None, None
        if task == "interactive":
            if not prompts:
                raise ValueError("the interactive task needs prompts (points or boxes)")
            h, w = images.shape[-2:]
            pq, valid = self._prompt_queries(prompts, h, w)
        out = self.decode(feats, task=task, prompt_queries=pq, prompt_valid=valid)
        out["features"] = feats
        return out

    def _prompt_queries(
        self, prompts: dict[str, torch.Tensor], h: int, w: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if "points" in prompts:
            pts = prompts["points"]
            if pts.ndim != 3 or pts.shape[-1] != 2:
                raise ValueError(f"points must be (B, P, 2), got {tuple(pts.shape)}")
            _check_inside(pts, h, w, "points")
            boxes = point_to_box(pts, self.config.box_half, h, w)
            kinds = torch.zeros(pts.shape[:2], dtype=torch.long, device=pts.device)
        elif "boxes" in prompts:
            boxes = prompts["boxes"]
            if boxes.ndim != 3 or boxes.shape[-1] != 4:
                raise ValueError(f"boxes must be (B, P, 4), got {tuple(boxes.shape)}")
            _check_finite(boxes, "boxes")
            kinds = torch.ones(boxes.shape[:2], dtype=torch.long, device=boxes.device)
        else:
            raise ValueError("prompts need 'points' or 'boxes'")
        if boxes.shape[1] == 0:
            raise ValueError("empty prompts: give at least one point or box")
        valid = prompts.get("valid", torch.ones(boxes.shape[:2], dtype=torch.bool, device=boxes.device))
        return self.encode_prompts(boxes, kinds, h, w), valid

    # ------------------------------------------------------------------ training
    def loss(
        self,
        outputs: dict[str, object],
        targets,
        task: str,
        config: LossConfig | None = None,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """Losses of one batch.

        Args:
            outputs: from :meth:`forward`.
            targets: "panoptic"/"video": per image ``{"labels" (M,), "masks" (M, H, W) bool}`` (video: tube
                masks (M, T * H, W)); "interactive": ``{"masks" (B, P, H, W), "valid" (B, P)}``.
            task: the batch's task.
            config: loss weights.
            generator: randomness of the sampled points.
        """
        cfg = config or LossConfig()
        aux = outputs["aux"]
        if task == "interactive":
            return prompt_loss(aux, targets["masks"], targets["valid"], cfg, generator)  # type: ignore[arg-type]
        return set_loss(aux, targets, cfg, self.config.num_classes, generator)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def panoptic(
        self, images: torch.Tensor, *, object_mask_threshold: float = 0.8, overlap_threshold: float = 0.8
    ) -> list[dict[str, object]]:
        """Panoptic segmentation in the shape of ``transformers``' ``post_process_panoptic_segmentation``.

        Args:
            images: (B, 3, H, W) in [0, 1].
            object_mask_threshold: minimum class score of a kept query (Mask2Former default 0.8).
            overlap_threshold: minimum visible fraction of a kept mask.

        Returns:
            Per image ``{"segmentation": (H, W) int32, "segments_info": [...]}`` (COCO ``category_id``).
        """
        out = self(images, task="panoptic")
        masks = F.interpolate(out["masks"], size=images.shape[-2:], mode="bilinear", align_corners=False)
        return [
            panoptic_inference(
                out["logits"][i],
                masks[i],
                self.config.num_things,
                object_mask_threshold=object_mask_threshold,
                overlap_threshold=overlap_threshold,
            )
            for i in range(images.shape[0])
        ]

    @torch.no_grad()
    def track(
        self, frames: torch.Tensor, *, clip_size: int = 5, max_tracks: int | None = None
    ) -> list[dict[str, object]]:
        """Video instance segmentation: clips as tubes, queries linked across clips (MinVIS).

        Args:
            frames: (T, 3, H, W) in [0, 1].
            clip_size: frames per clip (the last clip may be shorter).
            max_tracks: keep the best-scoring tracks (default: every query).

        Returns:
            Tracks sorted by score: ``{"id", "label_id", "category_id" (1-based), "score", "masks" (T, H, W)
            bool tensor}``; :func:`tracks_to_ytvis` writes YouTube-VIS result records.
        """
        if frames.ndim != 4 or frames.shape[1] != 3:
            raise ValueError(f"frames must be (T, 3, H, W), got {tuple(frames.shape)}")
        if clip_size < 1:
            raise ValueError(f"clip_size must be >= 1, got {clip_size}")
        _check_pixels(frames, "frames")
        t_all, _, h, w = frames.shape
        nt = self.config.num_things
        probs_sum = None
        per_frame: list[torch.Tensor] = []
        prev_q = None
        n_clips = 0
        for s in range(0, t_all, clip_size):
            clip = frames[s : s + clip_size]
            t = clip.shape[0]
            out = self(clip[None], task="video")
            q, logits = out["queries"][0], out["logits"][0]
            masks = tube_to_frames(out["masks"], t)[0]  # (t, N, h', w')
            if prev_q is not None:
                perm = link_clips(prev_q, q)
                q, logits, masks = q[perm], logits[perm], masks[:, perm]
            prev_q = q
            p = logits.softmax(-1)
            probs_sum = p if probs_sum is None else probs_sum + p
            n_clips += 1
            up = F.interpolate(masks, size=(h, w), mode="bilinear", align_corners=False)
            per_frame.extend(list(up.sigmoid() >= 0.5))
        assert probs_sum is not None
        probs = probs_sum / n_clips
        scores, labels = probs[:, :nt].max(-1)
        all_masks = torch.stack(per_frame, dim=1)  # (N, T, H, W)
        order = scores.argsort(descending=True, stable=True)
        if max_tracks is not None:
            order = order[:max_tracks]
        return [
            {
                "id": int(k),
                "label_id": int(labels[k]),
                "category_id": int(labels[k]) + 1,
                "score": float(scores[k]),
                "masks": all_masks[k],
            }
            for k in order.tolist()
        ]


def tracks_to_ytvis(tracks: list[dict[str, object]], video_id: int) -> list[dict[str, object]]:
    """YouTube-VIS result records (``segmentations``: per-frame COCO RLE, None where empty)."""
    from pycocotools import mask as mask_utils

    recs = []
    for tr in tracks:
        segs = []
        for m in tr["masks"]:  # type: ignore[attr-defined]
            arr = np.asfortranarray(m.cpu().numpy().astype(np.uint8))
            if arr.any():
                rle = mask_utils.encode(arr)
                rle["counts"] = rle["counts"].decode("ascii")
                segs.append(rle)
            else:
                segs.append(None)
        recs.append(
            {
                "video_id": video_id,
                "category_id": tr["category_id"],
                "score": tr["score"],
                "segmentations": segs,
            }
        )
    return recs


def _check_finite(x: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite, found NaN or infinite values")


def _check_pixels(images: torch.Tensor, name: str) -> None:
    """Float pixels in [0, 1], all finite (NaN would reach ``DeformConv2d``, which crashes on it)."""
    if not torch.is_floating_point(images):
        raise TypeError(
            f"{name} must be a float tensor with values in [0, 1], got dtype {images.dtype} "
            "(divide uint8 images by 255)"
        )
    _check_finite(images, name)
    if images.numel() and (float(images.min()) < 0.0 or float(images.max()) > 1.0):
        raise ValueError(
            f"{name} must have values in [0, 1], got [{float(images.min()):g}, {float(images.max()):g}]"
        )


def _check_inside(points: torch.Tensor, h: int, w: int, name: str = "points") -> None:
    _check_finite(points, name)
    x, y = points[..., 0], points[..., 1]
    if bool(((x < 0) | (x > w) | (y < 0) | (y > h)).any()):
        raise ValueError(f"{name} must lie inside the {w} x {h} image (x in [0, {w}], y in [0, {h}])")


class RMPSAMPredictor:
    """SAM-like interface: ``set_image`` once, then ``predict`` for clicks or boxes.

    Several points in one call describe one object: their prompt encodings (positive label 1,
    negative label 0) are averaged into one query. Many independent single-click prompts go
    through :meth:`predict_points` in one pass (prompt isolation keeps them independent).

    Example:
        >>> torch.manual_seed(0)
        <torch._C.Generator object at ...>
        >>> pred = RMPSAMPredictor(RMPSAM(RMPSAMConfig()).eval())
        >>> pred.set_image(np.zeros((32, 32, 3), np.uint8))
        >>> masks, iou, low = pred.predict(point_coords=np.array([[10.5, 12.5]]), point_labels=np.array([1]))
        >>> masks.shape, iou.shape, low.shape
        (torch.Size([1, 32, 32]), torch.Size([1]), torch.Size([1, 8, 8]))
    """

    def __init__(self, model: RMPSAM) -> None:
        self.model = model
        self.features: torch.Tensor | None = None
        self.size: tuple[int, int] = (0, 0)

    @torch.no_grad()
    def set_image(self, image: np.ndarray | torch.Tensor) -> None:
        """Compute the image's feature map.

        Args:
            image: uint8 (H, W, 3) array with values in [0, 255] (SAM's convention), or a float
                (3, H, W) tensor with values in [0, 1].

        Raises:
            TypeError: a numpy array that is not uint8, or a tensor that is not float.
            ValueError: a wrong shape, or a tensor with NaN, infinite or out-of-range values.
        """
        if isinstance(image, np.ndarray):
            if image.ndim != 3 or image.shape[-1] != 3:
                raise ValueError(f"a numpy image must be (H, W, 3), got {image.shape}")
            if image.dtype != np.uint8:
                raise TypeError(
                    f"a numpy image must be uint8 with values in [0, 255], got dtype {image.dtype} "
                    "(pass float images as a (3, H, W) tensor in [0, 1])"
                )
            x = torch.from_numpy(image).permute(2, 0, 1).float() / 255.0
        elif isinstance(image, torch.Tensor):
            if image.ndim != 3 or image.shape[0] != 3:
                raise ValueError(f"a tensor image must be (3, H, W), got {tuple(image.shape)}")
            _check_pixels(image, "image")
            x = image.float()
        else:
            raise TypeError(f"image must be a numpy array or a torch tensor, got {type(image).__name__}")
        dev = next(self.model.parameters()).device
        x = x.to(dev)
        self.size = (int(x.shape[-2]), int(x.shape[-1]))
        self.features = self.model.encode(x[None])

    def _run(self, queries: torch.Tensor, multimask: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        assert self.features is not None
        out = self.model.decode(self.features, task="interactive", prompt_queries=queries)
        low = out["masks"][0]  # type: ignore[index]
        up = F.interpolate(low[None], size=self.size, mode="bilinear", align_corners=False)[0]
        return up > 0, out["iou"][0], low  # type: ignore[index]

    @torch.no_grad()
    def predict(
        self,
        point_coords: np.ndarray | None = None,
        point_labels: np.ndarray | None = None,
        boxes: np.ndarray | None = None,
        multimask_output: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Mask of one object from its clicks (x, y pixels; labels 1 positive / 0 negative) or one box.

        Returns:
            ``(masks (1, H, W) bool, iou_scores (1,), low_res_logits (1, H/4, W/4))``; one mask whatever
            ``multimask_output`` (the model has one output per prompt).
        """
        if self.features is None:
            raise RuntimeError("call set_image before predict")
        h, w = self.size
        dev = self.features.device
        if boxes is not None:
            b = torch.as_tensor(np.asarray(boxes, dtype=np.float32), device=dev).view(1, -1, 4)
            _check_finite(b, "boxes")
            kinds = torch.ones(b.shape[:2], dtype=torch.long, device=dev)
        else:
            if point_coords is None or len(point_coords) == 0:
                raise ValueError("empty prompts: give point_coords or boxes")
            pts = torch.as_tensor(np.asarray(point_coords, dtype=np.float32), device=dev).view(1, -1, 2)
            labels = np.ones(pts.shape[1]) if point_labels is None else np.asarray(point_labels)
            if labels.shape != (pts.shape[1],):
                raise ValueError(f"point_labels must have shape ({pts.shape[1]},), got {labels.shape}")
            _check_inside(pts, h, w, "point_coords")
            b = point_to_box(pts, self.model.config.box_half, h, w)
            kinds = torch.as_tensor(np.where(labels > 0, 0, 2), dtype=torch.long, device=dev)[None]
        q = self.model.encode_prompts(b, kinds, h, w).mean(1, keepdim=True)  # (1, 1, C)
        return self._run(q, multimask_output)

    @torch.no_grad()
    def predict_points(self, point_coords: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One mask per positive click, all clicks isolated from each other in one pass.

        Returns:
            ``(masks (P, H, W) bool, iou_scores (P,), low_res_logits (P, h, w))``.
        """
        if self.features is None:
            raise RuntimeError("call set_image before predict_points")
        h, w = self.size
        dev = self.features.device
        pts = torch.as_tensor(np.asarray(point_coords, dtype=np.float32), device=dev).view(1, -1, 2)
        if pts.shape[1] == 0:
            raise ValueError("empty prompts: give at least one point")
        _check_inside(pts, h, w, "point_coords")
        b = point_to_box(pts, self.model.config.box_half, h, w)
        q = self.model.encode_prompts(b, torch.zeros(pts.shape[:2], dtype=torch.long, device=dev), h, w)
        return self._run(q, False)
