r"""A baseline CNN in the style of the paper's: convolutions, max-pooling, fully connected layers,
dropout, and a softmax with cross-entropy (lesson 08), or independent sigmoids (lesson 09).

The paper compares CapsNet with "a standard CNN with three convolutional layers of 256, 256, 128
channels. Each has 5x5 kernels and stride of 1. The last convolutional layers are followed by two
fully connected layers of size 328, 192. The last fully connected layer is connected with dropout
to a 10 class softmax layer with cross entropy loss" (35.4 M parameters against CapsNet's 8.2 M).
:meth:`CNNConfig.cpu` is the same design narrowed to the size of the course's CPU CapsNet
*including its decoder* (about 1.95 M parameters), so that the two can be compared at equal size.

Shape legend:
    B      batch size
    C, H, W   channels, height, width (H = W = ``image_size``)
    F      features of the last fully connected layer (the "penultimate" features)
    J      classes (10)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from capsedu._validate import require_images
from capsedu.nets.contract import NetworkConfig


@dataclass(frozen=True)
class CNNConfig(NetworkConfig):
    r"""Sizes of the baseline CNN; the defaults are the paper's (:meth:`paper`). Each convolution
    keeps the size (padding) and is followed by a 2x2 max-pooling when its entry in ``pool`` is
    True. ``multi_label`` reads the head as independent sigmoids (several classes per image)
    instead of a softmax."""

    image_size: int = 28
    in_channels: int = 1
    channels: tuple[int, ...] = (256, 256, 128)
    kernel: int = 5
    pool: tuple[bool, ...] = (False, False, False)
    hidden: tuple[int, ...] = (328, 192)
    dropout: float = 0.5
    num_classes: int = 10
    multi_label: bool = False

    @classmethod
    def paper(cls) -> CNNConfig:
        r"""The paper's baseline: no pooling, so the first fully connected layer alone holds
        28*28*128*328 = 32.9 M weights (35.4 M parameters in all, as the paper reports)."""
        return cls()

    @classmethod
    def cpu(cls, image_size: int = 28, multi_label: bool = False) -> CNNConfig:
        r"""About the CPU CapsNet's 1.95 M parameters (with its decoder) at 28x28 input: narrow
        convolutions (32, 64, 64) and a wide first dense layer (512, 192). Chosen on validation
        over (64, 128, 128) with (192, 96): 1.84 M parameters, about three times the step time,
        and a tie after 3 epochs (benchmarks/tries.json)."""
        return cls(image_size=image_size, channels=(32, 64, 64), pool=(True, True, False),
                   hidden=(512, 192), multi_label=multi_label)

    @property
    def feature_side(self) -> int:
        side = self.image_size
        for pooled in self.pool:
            side //= 2 if pooled else 1
        return side


class BaselineCNN(nn.Module):
    r"""conv (5x5, ReLU, max-pool) x 3 -> fully connected (ReLU, dropout) x 2 -> class logits."""

    kind = "cnn"
    config_class = CNNConfig

    def __init__(self, config: CNNConfig | None = None) -> None:
        super().__init__()
        config = CNNConfig.paper() if config is None else config
        if not isinstance(config, CNNConfig):
            raise TypeError(f"config must be a CNNConfig, got {type(config).__name__}")
        if len(config.pool) != len(config.channels) or config.feature_side < 1:
            raise ValueError(f"config needs one pool flag per convolution and an image_size that "
                             f"survives the pooling, got {config}")
        self.config = config
        layers: list[nn.Module] = []
        width = config.in_channels
        for channels, pooled in zip(config.channels, config.pool):
            layers += [nn.Conv2d(width, channels, config.kernel, padding=config.kernel // 2), nn.ReLU()]
            layers += [nn.MaxPool2d(2)] if pooled else []
            width = channels
        self.convolutions = nn.Sequential(*layers)
        sizes = [width * config.feature_side ** 2, *config.hidden]
        dense: list[nn.Module] = [nn.Flatten()]
        for size_in, size_out in zip(sizes[:-1], sizes[1:]):
            dense += [nn.Linear(size_in, size_out), nn.ReLU(), nn.Dropout(config.dropout)]
        self.dense = nn.Sequential(*dense)
        self.head = nn.Linear(sizes[-1], config.num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> the last fully connected layer's features (B, F)."""
        require_images("x", x, channels=self.config.in_channels, size=self.config.image_size)
        return self.dense(self.convolutions(x))  # (B, F)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r"""Class logits (B, J): a softmax (or, with ``multi_label``, sigmoids) gives probabilities."""
        return self.head(self.features(x))  # (B, J)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        r"""Class probabilities (B, J): softmax, or independent sigmoids with ``multi_label``."""
        logits = self(x)
        return torch.sigmoid(logits) if self.config.multi_label else torch.softmax(logits, dim=1)

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Images (B, C, H, W) -> class probabilities (B, J), as :meth:`probabilities`."""
        return self.probabilities(x)


def require_cnn(model: object, name: str = "cnn") -> BaselineCNN:
    r"""Raise ``TypeError`` naming ``name`` unless ``model`` is a :class:`BaselineCNN`."""
    if not isinstance(model, BaselineCNN):
        raise TypeError(f"{name} must be a capsedu.BaselineCNN (capsedu.pretrained('cnn')), "
                        f"got {type(model).__name__}")
    return model
