"""Save grids of synthetic images of every CLIP-DFKD inversion objective as PNGs.

Usage: python experiments/clip_dfkd_grids.py OUT_DIR [SEED]

Uses the claim's shipped BN teacher (``pretrained/teacher_bn``), synthesises 4 images per
class with each objective (SDD + CCM, SDD, matching + CCM, matching, CE only, DeepInversion) and
writes one PNG per objective: rows are classes, columns images.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from iclr25.methods.clip_dfkd import (
    TASK_SHAPES,
    InversionConfig,
    deep_inversion,
    invert_dataset,
    load_shipped_teacher,
)


def save_grid(images: torch.Tensor, labels: torch.Tensor, path: Path, title: str) -> None:
    """Rows: classes; columns: the first images of each class."""
    n_cls = int(labels.max()) + 1
    per = min(int((labels == c).sum()) for c in range(n_cls))
    fig, axes = plt.subplots(n_cls, per, figsize=(per * 1.1, n_cls * 1.1), squeeze=False)
    for c in range(n_cls):
        imgs = images[labels == c][:per]
        for j in range(per):
            axes[c][j].imshow(imgs[j].permute(1, 2, 0).clamp(0, 1).numpy())
            axes[c][j].axis("off")
        axes[c][0].set_title(TASK_SHAPES[c], fontsize=7, loc="left")
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    out = Path(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    teacher = load_shipped_teacher()
    cfg = InversionConfig.tiny().replace(images_per_class=4, batch_size=24)
    for mode in ("sdd_ccm", "sdd", "match_ccm", "match", "ce"):
        s = invert_dataset(
            teacher,
            TASK_SHAPES,
            image_size=32,
            config=cfg.replace(mode=mode),
            generator=torch.Generator().manual_seed(seed),
        )
        save_grid(s.images, s.labels, out / f"clip_dfkd-{mode}.png", f"inversion: {mode}")
    s = deep_inversion(
        teacher,
        TASK_SHAPES,
        image_size=32,
        images_per_class=4,
        steps=cfg.steps,
        batch_size=24,
        generator=torch.Generator().manual_seed(seed),
    )
    save_grid(s.images, s.labels, out / "clip_dfkd-deepinversion.png", "DeepInversion (BN teacher)")


if __name__ == "__main__":
    main()
