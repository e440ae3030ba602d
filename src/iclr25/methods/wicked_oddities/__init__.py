"""Wicked Oddities: choose which target-class images carry a clean-label backdoor.

Paper: *Wicked Oddities: Selectively Poisoning for Effective Clean-Label Backdoor Attacks*,
Quang H. Nguyen, Ngoc-Hieu Nguyen, The-Anh Ta, Thanh Nguyen-Tang, Kok-Seng Wong,
Hoang Thanh-Tung, Khoa D. Doan, ICLR 2025, arXiv:2407.10825.
"""

from iclr25.methods.wicked_oddities.config import (
    ClaimConfig,
    SelectionConfig,
    SurrogateConfig,
    TriggerConfig,
    VictimConfig,
)
from iclr25.methods.wicked_oddities.data import (
    ImagePools,
    PoisonedDataset,
    TensorImageDataset,
    TriggeredTestSet,
    dataset_labels,
    digits_pools,
    load_cifar10,
    load_image_folder,
    ood_letters,
    poison_image,
    shapes_pools,
    stack_dataset,
)
from iclr25.methods.wicked_oddities.metrics import attack_success_rate, clean_accuracy, predict
from iclr25.methods.wicked_oddities.selection import (
    HardnessSelector,
    mean_similarity_scores,
    ood_loss_scores,
    poison_budget,
    select_poison,
    typicality_scores,
)
from iclr25.methods.wicked_oddities.surrogate import (
    ConvEncoder,
    Encoder,
    SklearnEncoder,
    TorchEncoder,
    nt_xent,
    simclr_views,
    train_ood_surrogate,
    train_simclr_encoder,
)
from iclr25.methods.wicked_oddities.triggers import (
    BadNetsTrigger,
    BlendTrigger,
    SIGTrigger,
    Trigger,
    load_trigger,
)
from iclr25.methods.wicked_oddities.victim import SmallCNN, random_shift, train_victim

__all__ = [
    "BadNetsTrigger",
    "BlendTrigger",
    "ClaimConfig",
    "ConvEncoder",
    "Encoder",
    "HardnessSelector",
    "ImagePools",
    "PoisonedDataset",
    "SIGTrigger",
    "SelectionConfig",
    "SklearnEncoder",
    "SmallCNN",
    "SurrogateConfig",
    "TensorImageDataset",
    "TorchEncoder",
    "Trigger",
    "TriggerConfig",
    "TriggeredTestSet",
    "VictimConfig",
    "attack_success_rate",
    "clean_accuracy",
    "dataset_labels",
    "digits_pools",
    "load_cifar10",
    "load_image_folder",
    "load_trigger",
    "mean_similarity_scores",
    "nt_xent",
    "ood_letters",
    "ood_loss_scores",
    "poison_budget",
    "poison_image",
    "predict",
    "random_shift",
    "select_poison",
    "shapes_pools",
    "simclr_views",
    "stack_dataset",
    "train_ood_surrogate",
    "train_simclr_encoder",
    "train_victim",
    "typicality_scores",
]
