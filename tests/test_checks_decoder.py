"""Tests for capsedu.course.checks.decoder: right answers pass, typical mistakes get their own hint."""

import pytest
import torch
from conftest import assert_hint
from torch import nn

from capsedu import CapsNet, CapsNetConfig, mask_capsules, reconstruction_loss
from capsedu.course.checks.decoder import (
    check_decoder,
    check_mask,
    check_reconstruct_as,
    check_reconstruction_loss,
    check_total_loss,
)
from capsedu.nets.losses import margin_loss

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- masking

def right_mask(capsules, labels=None):
    if labels is None:
        labels = capsules.norm(dim=-1).argmax(dim=1)
    keep = torch.zeros(capsules.shape[:2])
    keep[torch.arange(len(labels)), labels] = 1
    return (capsules * keep[..., None]).reshape(len(capsules), -1)


def by_index(pick):
    def mask(capsules, labels=None):
        chosen = pick(capsules) if labels is None else labels
        return mask_capsules(capsules, chosen)
    return mask


def test_check_mask_passes(capsys):
    result = check_mask(right_mask)
    assert result.passed and result.message.startswith("✅")
    assert result.message in capsys.readouterr().out
    assert check_mask(mask_capsules)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda c, labels=None: mask_capsules(c, labels).view(c.shape), "flatten"),
    (lambda c, labels=None: c.flatten(1), "nothing was masked"),
    (lambda c, labels=None: mask_capsules(c), "TRUE class"),
    (by_index(lambda c: c.norm(dim=-1).argmin(dim=1)), "argmax, not argmin"),
    (by_index(lambda c: c.sum(dim=-1).argmax(dim=1)), "sum of its components"),
    (by_index(lambda c: c.amax(dim=-1).argmax(dim=1)), "largest component"),
    (lambda c, labels=None: 2 * mask_capsules(c, labels), "values changed"),
    (lambda c, labels: mask_capsules(c, labels), "without labels"),
    (lambda c, labels=None: mask_capsules(c, labels)[:, :16], "expected shape"),
    (lambda c, labels=None: mask_capsules(c, labels).numpy(), "return a torch.Tensor"),
])
def test_check_mask_hints(wrong, fragment):
    assert_hint(check_mask(wrong), fragment)


def test_check_mask_missing_labels_argument_is_reported():
    assert_hint(check_mask(lambda c: mask_capsules(c)), "raised TypeError")


# ---------------------------------------------------------------- decoder

def decoder(*layers):
    return nn.Sequential(*layers)


def paper_layers():
    return [nn.Linear(160, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(),
            nn.Linear(1024, 784), nn.Sigmoid()]


def test_check_decoder_passes():
    result = check_decoder(decoder(*paper_layers()))
    assert result.passed and "1,411,344" in result.message
    assert check_decoder(CapsNet(CapsNetConfig.paper()).decoder)


def test_check_decoder_hints():
    layers = paper_layers()
    assert_hint(check_decoder(decoder(nn.Linear(160, 512), nn.ReLU(), nn.Linear(512, 784),
                                      nn.Sigmoid())), "160 -> 512 -> 1024 -> 784")
    assert_hint(check_decoder(decoder(nn.Linear(16, 512), *layers[1:])), "[(16, 512)")
    assert_hint(check_decoder(decoder(layers[0], layers[2], layers[3], *layers[4:])), "ReLU")
    assert_hint(check_decoder(decoder(*layers[:5])), "Sigmoid")
    assert_hint(check_decoder(decoder(*layers[:5], nn.Tanh())), "Sigmoid")
    assert_hint(check_decoder("decoder"), "nn.Module")


# ---------------------------------------------------------------- reconstruction loss

def sse(recon, images):
    diff = recon.reshape(len(images), -1) - images.reshape(len(images), -1)
    return (diff ** 2).sum(dim=1).mean()


def test_check_reconstruction_loss_passes():
    assert check_reconstruction_loss(sse)
    assert check_reconstruction_loss(reconstruction_loss)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda r, i: ((r.reshape(len(i), -1) - i.reshape(len(i), -1)) ** 2).mean(), "mean squared"),
    (lambda r, i: ((r.reshape(len(i), -1) - i.reshape(len(i), -1)) ** 2).sum(), "AVERAGE over the batch"),
    (lambda r, i: 0.0005 * sse(r, i), "belongs to the total loss"),
    (lambda r, i: (r.reshape(len(i), -1) - i.reshape(len(i), -1)).abs().sum(dim=1).mean(), "square"),
    (lambda r, i: (r.reshape(len(i), -1) - i.reshape(len(i), -1)).norm(dim=1).mean(), "square root"),
    (lambda r, i: ((r - i) ** 2).sum(dim=1).mean(), "Reshape both"),
    (lambda r, i: sse(r, i) + 1.0, "expected"),
    (lambda r, i: sse(r, i).item(), "0-D tensor"),
])
def test_check_reconstruction_loss_hints(wrong, fragment):
    assert_hint(check_reconstruction_loss(wrong), fragment)


# ---------------------------------------------------------------- reconstruct_as

def reconstruct_as(model, images, digit):
    capsules = model(images).capsules
    return model.decode(capsules, torch.full((len(images),), digit))


def test_check_reconstruct_as_passes():
    result = check_reconstruct_as(reconstruct_as)
    assert result.passed and "capsule" in result.message


def test_check_reconstruct_as_hints():
    assert_hint(check_reconstruct_as(lambda m, x, d: m(x).reconstruction), "longest capsule")
    assert_hint(check_reconstruct_as(lambda m, x, d: reconstruct_as(m, x, d).flatten(1)), "shape")
    assert_hint(check_reconstruct_as(lambda m, x, d: reconstruct_as(m, x, (d + 1) % 10)),
                "model.decode")
    assert_hint(check_reconstruct_as(lambda m, x: m(x).reconstruction), "raised TypeError")


# ---------------------------------------------------------------- total loss

def total(lengths, recon, images, labels):
    return margin_loss(lengths, labels) + 0.0005 * reconstruction_loss(recon, images)


def test_check_total_loss_passes():
    result = check_total_loss(total)
    assert result.passed and "0.0005" in result.message


@pytest.mark.parametrize("wrong, fragment", [
    (lambda v, r, x, y: margin_loss(v, y), "only the margin"),
    (lambda v, r, x, y: margin_loss(v, y) + reconstruction_loss(r, x), "unweighted"),
    (lambda v, r, x, y: margin_loss(v, y) + 0.005 * reconstruction_loss(r, x), "not 0.005"),
    (lambda v, r, x, y: margin_loss(v, y) + 0.0005 * ((r - x) ** 2).mean(), "784x"),
    (lambda v, r, x, y: total(v, r, x, y) * 2, "expected margin"),
])
def test_check_total_loss_hints(wrong, fragment):
    assert_hint(check_total_loss(wrong), fragment)
