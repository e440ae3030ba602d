"""DeepInversion: the BN-statistics data-free baseline (Yin et al., CVPR 2020).

x is optimised so that the batch statistics at every BatchNorm input match the layer's running
statistics, sum_l ||mu_l(x) - mu_l^BN||_2 + ||sigma^2_l(x) - sigma^2_l^BN||_2, plus CE of the
teacher's zero-shot head to the target class and a total-variation prior. CLIP-DFKD's diagnosis
(Sec. 3): on a CLIP teacher these statistics carry whatever the pre-training images held, and a
ViT has no BatchNorm at all, so the method is inapplicable there (a clear error here).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.clip_dfkd.augment import random_augment
from iclr25.methods.clip_dfkd.inversion import SyntheticSet, ccm_loss, tv_loss
from iclr25.methods.clip_dfkd.parameterization import PixelParam
from iclr25.methods.clip_dfkd.teacher import CLIPTeacher, ZeroShotClassifier, check_names

__all__ = ["BNStatsHook", "deep_inversion"]


class BNStatsHook:
    """Forward hooks on every ``BatchNorm2d`` of a model that record the BN-statistics loss.

    After a forward pass, :attr:`loss` is sum_l ||mu_l - running_mean_l||_2 + ||var_l - running_var_l||_2
    over the BN inputs of that pass (biased batch variance, as BN uses in training).

    Raises:
        ValueError: the model has no BatchNorm layer (e.g. a ViT).
    """

    def __init__(self, model: nn.Module) -> None:
        self.layers = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        if not self.layers:
            raise ValueError(
                "DeepInversion is inapplicable: the model has no BatchNorm2d layer (e.g. a ViT teacher)"
            )
        self.terms: list[torch.Tensor] = []
        self.handles = [m.register_forward_hook(self._hook) for m in self.layers]

    def _hook(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        x = inputs[0]
        mean = x.mean(dim=(0, 2, 3))
        var = x.var(dim=(0, 2, 3), unbiased=False)
        self.terms.append(
            torch.linalg.vector_norm(mean - module.running_mean)
            + torch.linalg.vector_norm(var - module.running_var)
        )

    @property
    def loss(self) -> torch.Tensor:
        """The BN loss of the last forward pass (then cleared)."""
        out = torch.stack(self.terms).sum() if self.terms else torch.zeros(())
        self.terms = []
        return out

    def remove(self) -> None:
        """Detach the hooks."""
        for h in self.handles:
            h.remove()


def deep_inversion(
    teacher: CLIPTeacher,
    class_names: Sequence[str],
    *,
    image_size: int,
    images_per_class: int,
    steps: int,
    lr: float = 0.1,
    bn_weight: float = 1.0,
    ce_weight: float = 1.0,
    tv_weight: float = 0.05,
    batch_size: int = 96,
    base_size: int = 16,
    init_std: float = 0.5,
    class_template: str = "a {}",
    generator: torch.Generator | None = None,
    progress: ProgressFn = no_progress,
) -> SyntheticSet:
    """DeepInversion through the teacher's image tower, with CE on its zero-shot head.

    Same parameterisation, augmentations, image count and step budget as :func:`invert_dataset`.

    Raises:
        ValueError: the teacher's image tower has no BatchNorm.
    """
    check_names(class_names)
    teacher.freeze()
    hook = BNStatsHook(teacher.model.visual)
    try:
        zs = ZeroShotClassifier(teacher, class_names, (class_template,))
        n_cls = len(class_names)
        n = images_per_class * n_cls
        labels = torch.arange(n) % n_cls
        out = []
        batches = range(0, n, batch_size)
        for b_i, start in enumerate(batches):
            y = labels[start : start + batch_size]
            param = PixelParam(
                len(y),
                size=image_size,
                base=min(base_size, image_size),
                init_std=init_std,
                generator=generator,
            ).to(teacher.mean.device)  # drawn with the generator, optimised where the teacher lives
            y = y.to(teacher.mean.device)
            opt = torch.optim.Adam(param.parameters(), lr=lr)
            for step in range(steps):
                x = param()
                hook.terms = []
                v = F.normalize(teacher.encode_image(random_augment(x, generator=generator)), dim=-1)
                loss = bn_weight * hook.loss + ce_weight * ccm_loss(
                    v, zs.text_features, y, teacher.logit_scale
                )
                loss = loss + tv_weight * tv_loss(x)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % 20 == 0:
                    progress("deep inversion", b_i * steps + step, len(batches) * steps)
            with torch.no_grad():
                out.append(param().detach().cpu())
    finally:
        hook.remove()
    return SyntheticSet(torch.cat(out), labels, torch.zeros(n, dtype=torch.long), ("none",))
