r"""capsedu - the helper package of the Capsule Networks course.

Every piece a lesson builds is implemented here once, tested, and imported by later lessons.
"""

from capsedu.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from capsedu.data import DataFileError, MNISTData, load_mnist, random_shift
from capsedu.layers import DigitCaps, PrimaryCaps
from capsedu.losses import margin_loss, reconstruction_loss
from capsedu.model import CapsNet, CapsNetConfig, CapsNetOutput, mask_capsules
from capsedu.pretrained import pretrained, pretrained_metrics
from capsedu.routing import dynamic_routing, dynamic_routing_fast
from capsedu.runtime import choose, default_device, fast_profile, set_seed
from capsedu.squash import squash
from capsedu.train import capsnet_loss, evaluate, fit

__version__ = "0.1.0"

__all__ = [
    "CapsNet", "CapsNetConfig", "CapsNetOutput", "CheckpointError", "DataFileError", "DigitCaps",
    "MNISTData", "PrimaryCaps", "capsnet_loss", "choose", "default_device", "dynamic_routing",
    "dynamic_routing_fast",
    "evaluate", "fast_profile", "fit", "load_checkpoint", "load_mnist", "margin_loss",
    "mask_capsules", "pretrained", "pretrained_metrics", "random_shift", "reconstruction_loss",
    "save_checkpoint", "set_seed", "squash",
]
