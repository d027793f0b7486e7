r"""A network for checks to probe the learner's code with: :func:`probe_capsnet`.

Shape legend: none (no tensor shapes of its own).
"""

from __future__ import annotations

import torch

from capsedu.nets.capsnet import CapsNet, CapsNetConfig


def probe_capsnet(seed: int):
    r"""A tiny CapsNet (8 conv1 channels, 4 primary types, a 32-unit decoder), eval mode.

    Its weights are drawn with standard deviation 0.1 (larger than at initialisation) so that its
    capsules are long (0.2-0.3) and the decoder's input, and so its gradients, depend on which
    capsule the mask keeps. The learner's global random state is left untouched.
    """
    with torch.random.fork_rng(devices=[]):
        model = CapsNet(CapsNetConfig(conv1_channels=8, primary_types=4, decoder_hidden=(32,)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return model.eval()
