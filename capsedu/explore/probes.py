r"""What a trained CapsNet's digit capsules encode, and how routing settles - as plain tensors.

The pure computations behind the explorers of lessons 03 and 07 and the static Figure 4 grid:
encode an image once, perturb one dimension of the winning digit capsule and decode (Section 5.1
of the paper, Figure 4), re-run dynamic routing (Procedure 1) for 1..r iterations on predictions
``u_hat`` computed once, and summarise couplings weighted by how present each part is (vote
shares per class, maps on the primary grid), and read a quantity off features with a linear
probe. No plotting and no widgets here.

Shape legend:
    B      batch size (perturbations decoded together)
    I      primary capsules = T * G * G
    T      primary capsule types
    G      side of their grid (6 for 28-pixel images)
    J      digit capsules, one per class
    D_in   primary capsule dimension (8)
    D_out  digit capsule dimension (16)
    r      routing iterations
    P      decoder outputs (pixels, C * H * W)
    C      channels
    H      height
    W      width
    V      perturbation values
    N      examples of a probe
    F      features read by a probe
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from capsedu._validate import require_finite, require_int, require_tensor
from capsedu.nets.capsnet import CapsNet, mask_capsules, require_capsnet
from capsedu.nets.routing import dynamic_routing
from capsedu.training.hardware import model_device
from capsedu.training.modes import eval_mode

PERTURBATION_VALUES: tuple[float, ...] = tuple(round(-0.25 + 0.05 * k, 2) for k in range(11))


class Encoded(NamedTuple):
    r"""One image seen by the network: everything that does not depend on an explorer's sliders."""

    u: torch.Tensor  # (I, D_in) primary capsules
    u_hat: torch.Tensor  # (I, J, D_out) prediction vectors
    capsules: torch.Tensor  # (J, D_out) digit capsules v_j after the model's routing iterations
    lengths: torch.Tensor  # (J,) capsule lengths
    prediction: int  # the longest capsule


class RoutingTrace(NamedTuple):
    r"""Routing of one image with 1, 2, ..., r iterations."""

    lengths: torch.Tensor  # (r, J) capsule lengths after each number of iterations
    shares: torch.Tensor  # (r, J) share of the (length-weighted) votes each class receives
    couplings: torch.Tensor  # (I, J) coupling coefficients c used in the last (r-th) iteration
    prediction: int  # longest capsule after r iterations


def require_image(image: object) -> torch.Tensor:
    r"""Accept one image (1, H, W) or (H, W), or a batch of one (1, 1, H, W); return (1, 1, H, W)."""
    require_tensor("image", image, shape="(1, H, W)", floating=True)
    if image.dim() == 2:
        image = image.unsqueeze(0)
    if image.dim() == 3:
        image = image.unsqueeze(0)
    if image.dim() != 4 or image.shape[0] != 1:
        raise ValueError(f"image must be one image (1, H, W), got shape {tuple(image.shape)}")
    require_finite("image", image)
    return image  # (1, C, H, W)


@torch.no_grad()
def encode_image(model: CapsNet, image: torch.Tensor) -> Encoded:
    r"""Primary capsules, predictions :math:`\hat{\mathbf u}_{j|i}` (Eq. 2) and digit capsules of one image.

    Computed in eval mode; the model's mode is left as it was.
    """
    x = require_image(image).to(model_device(require_capsnet(model)))
    with eval_mode(model):
        u = model.encode(x)  # (1, I, D_in)
        u_hat = model.class_caps.prediction_vectors(u)  # (1, I, J, D_out)
    v, _ = dynamic_routing(u_hat, model.class_caps.routing_iterations)  # (1, J, D_out)
    lengths = v[0].norm(dim=-1)  # (J,)
    return Encoded(u[0], u_hat[0], v[0], lengths, int(lengths.argmax()))


def perturb(capsules: torch.Tensor, label: int, offsets: torch.Tensor) -> torch.Tensor:
    r"""Add ``offsets`` (B, D_out) to capsule ``label`` of ``capsules`` (J, D_out): returns (B, J, D_out).

    The input is not modified; the other capsules are copied unchanged (the decoder masks them).
    """
    require_tensor("capsules", capsules, ndim=2, shape="(J, D_out)", floating=True)
    num_classes, dim = capsules.shape
    require_int("label", label, minimum=0, maximum=num_classes - 1)
    require_tensor("offsets", offsets, ndim=2, shape=f"(B, {dim})", floating=True)
    if offsets.shape[1] != dim:
        raise ValueError(f"offsets must have shape (B, {dim}), got {tuple(offsets.shape)}")
    batch = capsules.unsqueeze(0).repeat(offsets.shape[0], 1, 1)  # (B, J, D_out)
    batch[:, label] += offsets.to(batch)
    return batch


def perturb_and_decode(decoder: torch.nn.Module, capsules: torch.Tensor, dim: int,
                       delta: float) -> torch.Tensor:
    r"""Figure 4's probe for one image: the winning (longest) of ``capsules`` (J, D_out) with
    ``delta`` added to its dimension ``dim``, every other capsule masked to zero, flattened and
    decoded by ``decoder`` ((B, J*D_out) -> (B, P), e.g. ``model.decoder``): returns (P,).

    ``capsules`` is not modified.
    """
    require_tensor("capsules", capsules, ndim=2, shape="(J, D_out)", floating=True)
    require_int("dim", dim, minimum=0, maximum=capsules.shape[1] - 1)
    label = int(capsules.norm(dim=-1).argmax())  # the longest capsule
    offsets = torch.zeros(1, capsules.shape[1], dtype=capsules.dtype, device=capsules.device)  # (1, D_out)
    offsets[0, dim] = float(delta)
    moved = perturb(capsules, label, offsets)  # (1, J, D_out), a copy
    labels = torch.tensor([label], device=capsules.device)  # (1,)
    return decoder(mask_capsules(moved, labels))[0]  # (P,)


@torch.no_grad()
def perturbed_reconstructions(model: CapsNet, capsules: torch.Tensor, label: int,
                              offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Decode capsule ``label`` with each row of ``offsets`` (B, D_out) added to it.

    Returns ``(images, lengths)``: reconstructions (B, C, H, W) masked by ``label`` and the
    capsule lengths (B, J) of the perturbed capsules.
    """
    batch = perturb(capsules, label, offsets)  # (B, J, D_out)
    labels = torch.full((batch.shape[0],), label, dtype=torch.long, device=batch.device)
    with eval_mode(require_capsnet(model)):
        images = model.decode(batch, labels)  # (B, C, H, W)
    return images, batch.norm(dim=-1)  # (B, C, H, W), (B, J)


def sweep_offsets(dim: int, values: tuple[float, ...] = PERTURBATION_VALUES) -> torch.Tensor:
    r"""Offsets (D_out * V, D_out): row ``d*V + k`` moves dimension d by ``values[k]`` (Figure 4)."""
    require_int("dim", dim, minimum=1)
    grid = torch.tensor(values, dtype=torch.float32)  # (V,)
    offsets = torch.zeros(dim, len(values), dim)  # (D_out, V, D_out)
    offsets[torch.arange(dim), :, torch.arange(dim)] = grid
    return offsets.reshape(dim * len(values), dim)  # (D_out*V, D_out)


@torch.no_grad()
def perturbation_sweep(model: CapsNet, image: torch.Tensor,
                       values: tuple[float, ...] = PERTURBATION_VALUES) -> tuple[torch.Tensor, int]:
    r"""Every dimension of the winning capsule moved by every value, decoded in one batch.

    Returns ``(images, label)``: images (D_out, V, H, W) for V = len(values), and the predicted
    class whose capsule was perturbed.
    """
    encoded = encode_image(model, image)
    dim = encoded.capsules.shape[1]
    offsets = sweep_offsets(dim, values).to(encoded.capsules)  # (D_out*V, D_out)
    images, _ = perturbed_reconstructions(model, encoded.capsules, encoded.prediction, offsets)
    return images[:, 0].reshape(dim, len(values), *images.shape[-2:]), encoded.prediction


@torch.no_grad()
def route(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Lengths (J,) and couplings (I, J) after ``routing_iterations`` of routing one image's ``u_hat`` (I, J, D_out)."""
    require_tensor("u_hat", u_hat, ndim=3, shape="(I, J, D_out)", floating=True)
    v, c = dynamic_routing(u_hat.unsqueeze(0), routing_iterations)  # (1, J, D_out), (1, I, J)
    return v[0].norm(dim=-1), c[0]  # (J,), (I, J)


def vote_shares(c: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""The share of all votes that each output capsule receives, weighting capsule i by :math:`\lVert\mathbf u_i\rVert`.

    .. math:: \text{share}_j = \frac{\sum_i \lVert\mathbf u_i\rVert\, c_{ij}}{\sum_i \lVert\mathbf u_i\rVert}

    A short primary capsule says "my part is absent", so its vote barely counts; the shares sum
    to 1 over j (each :math:`c_i` does), and are 1/J when every coupling is uniform.

    Args:
        c: couplings (..., I, J); u: primary capsules (..., I, D_in).
    Returns:
        shares (..., J).
    """
    require_tensor("c", c, floating=True)
    require_tensor("u", u, floating=True)
    if c.dim() < 2 or u.shape[:-1] != c.shape[:-1]:
        raise ValueError(f"c (..., I, J) and u (..., I, D_in) must share their leading shape, got "
                         f"{tuple(c.shape)} and {tuple(u.shape)}")
    weight = u.norm(dim=-1)  # (..., I)
    return (weight.unsqueeze(-1) * c).sum(dim=-2) / weight.sum(dim=-1, keepdim=True)  # (..., J)


def routing_trace(u_hat: torch.Tensor, routing_iterations: int, u: torch.Tensor | None = None,
                  cache: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None) -> RoutingTrace:
    r"""Run :func:`~capsedu.nets.routing.dynamic_routing` with r = 1..``routing_iterations`` on one image's ``u_hat``.

    ``u_hat`` is (I, J, D_out), computed once per image; each r routes from scratch (b = 0), so
    row r-1 of ``lengths`` is exactly what a network with r routing iterations outputs. ``u``
    (I, D_in), the image's primary capsules, weights the vote shares (:func:`vote_shares`);
    without it every capsule counts alike. Pass the same ``cache`` dict for the same ``u_hat``
    to route each r only once.
    """
    require_int("routing_iterations", routing_iterations, minimum=1)
    cache = {} if cache is None else cache
    for r in range(1, routing_iterations + 1):
        if r not in cache:
            cache[r] = route(u_hat, r)
    weights = torch.ones(u_hat.shape[0], 1) if u is None else u
    lengths = torch.stack([cache[r][0] for r in range(1, routing_iterations + 1)])  # (r, J)
    shares = torch.stack([vote_shares(cache[r][1], weights.to(u_hat))
                          for r in range(1, routing_iterations + 1)])  # (r, J)
    return RoutingTrace(lengths, shares, cache[routing_iterations][1], int(lengths[-1].argmax()))


def couplings_on_grid(couplings: torch.Tensor, label: int, num_types: int) -> torch.Tensor:
    r"""Couplings (I, J) toward class ``label`` laid out as (T, G, G), one G x G map per capsule type.

    Primary capsules are ordered type-major (``i = t*G*G + y*G + x``, see
    :class:`~capsedu.nets.primary.PrimaryCaps`).
    """
    require_tensor("couplings", couplings, ndim=2, shape="(I, J)", floating=True)
    require_int("num_types", num_types, minimum=1)
    total = couplings.shape[0]
    side = round((total / num_types) ** 0.5)
    if num_types * side * side != total:
        raise ValueError(f"couplings has {total} primary capsules, which is not num_types={num_types} "
                         "times a square grid")
    return couplings[:, label].reshape(num_types, side, side)  # (T, G, G)


def length_maps(u: torch.Tensor, num_types: int) -> torch.Tensor:
    r"""Primary capsules' lengths on their grid: u (B, I, D_in) -> (B, T, G, G), one G x G map per
    capsule type (type-major order, as :func:`couplings_on_grid`)."""
    require_tensor("u", u, ndim=3, shape="(B, I, D_in)", floating=True)
    lengths = u.norm(dim=-1)  # (B, I)
    return torch.stack([couplings_on_grid(row[:, None], 0, num_types) for row in lengths])  # (B, T, G, G)


def coupling_map(c: torch.Tensor, u: torch.Tensor, label: int, num_types: int) -> torch.Tensor:
    r"""Couplings toward class ``label`` on the primary grid, averaged over the capsule types.

    At each grid position the T capsule types' couplings are averaged, each weighted by its
    length :math:`\lVert\mathbf u_i\rVert` (as in :func:`vote_shares`): where do the parts that
    are really there send their votes? ``c`` (I, J) and ``u`` (I, D_in) -> (G, G).
    """
    grid = couplings_on_grid(c, label, num_types)  # (T, G, G)
    weight = u.norm(dim=-1).reshape(grid.shape)  # (T, G, G)
    return (weight * grid).sum(dim=0) / weight.sum(dim=0).clamp_min(1e-12)  # (G, G)


def linear_probe_error(train_features: torch.Tensor, train_targets: torch.Tensor,
                       test_features: torch.Tensor, test_targets: torch.Tensor) -> float:
    r"""How well a straight line reads a quantity off features: the RMS error on the test examples of
    the least-squares linear map, with a bias, from features (N, F) to targets (N,) fitted on the
    training examples (lesson 08 reads a digit's angle off its capsules)."""
    def with_bias(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)  # (N, F + 1)

    weights = torch.linalg.lstsq(with_bias(train_features), train_targets[:, None]).solution  # (F + 1, 1)
    residual = with_bias(test_features) @ weights - test_targets[:, None]  # (N, 1)
    return float(residual.square().mean().sqrt())
