"""Tests for capsedu.course.checks.assembly: lesson 06's MyCapsNet against a CapsNet with the same
weights; the right assembly passes, each typical mistake gets its own hint."""

import dataclasses

import pytest
import torch
from conftest import assert_hint
from torch import nn

from capsedu.course.checks._kit import STUB_HINT
from capsedu.course.checks._probe import probe_capsnet
from capsedu.course.checks.assembly import (
    _ReferenceCapsNet,
    assembled_or_reference,
    check_assembly,
    load_capsnet_weights,
)
from capsedu.course.pieces import Pieces
from capsedu.nets.capsnet import CapsNetOutput
from capsedu.nets.contract import Loss
from capsedu.nets.routing import dynamic_routing, prediction_vectors

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def probe():
    generator = torch.Generator().manual_seed(3)
    images = torch.rand(12, 1, 28, 28, generator=generator)  # (B, 1, 28, 28) grey levels
    return probe_capsnet(0), images, torch.arange(12) % 10


def check(network_class, probe, pieces=None):
    capsnet, images, labels = probe
    return check_assembly(network_class, pieces=pieces, images=images, labels=labels, capsnet=capsnet)


def test_the_reference_assembly_passes(probe, capsys):
    assert check(_ReferenceCapsNet, probe)
    assert "✅" in capsys.readouterr().out


def test_the_mapping_gives_the_capsnets_outputs(probe):
    capsnet, images, labels = probe
    net = _ReferenceCapsNet(capsnet.config, Pieces.reference())
    load_capsnet_weights(net, capsnet)
    with torch.no_grad():
        mine, theirs = net.eval()(images, labels), capsnet(images, labels)
    assert torch.allclose(mine.capsules, theirs.capsules, atol=1e-6)
    assert torch.allclose(mine.reconstruction, theirs.reconstruction, atol=1e-6)


def test_the_mapping_names_a_wrong_attribute(probe):
    capsnet, _, _ = probe
    net = _ReferenceCapsNet(capsnet.config, Pieces.reference())
    net.W = nn.Parameter(net.W.detach().transpose(-1, -2).clone())
    with pytest.raises(ValueError, match="self.W must have shape"):
        load_capsnet_weights(net, capsnet)
    del net.primary
    with pytest.raises(ValueError, match="self.primary"):
        load_capsnet_weights(net, capsnet)


def forward_with(change):
    r"""A MyCapsNet whose forward runs ``change(self, images, labels)`` instead."""
    return type("Wrong", (_ReferenceCapsNet,), {"forward": change})


def _routed(self, images, labels, relu=True, iterations=None, votes=None, swap=False, routing=None):
    cfg, p = self.config, self.pieces
    conv = self.conv1(images)
    features = self.primary(torch.relu(conv) if relu else conv)
    types, dims = (cfg.primary_dim, cfg.primary_types) if swap else (cfg.primary_types, cfg.primary_dim)
    u = p.to_capsules(features, types, dims)
    u_hat = (votes or prediction_vectors)(self.W, u)
    return (routing or p.routing)(u_hat, iterations or cfg.routing_iterations)


def _output(self, images, v, c, labels, shape=True):
    recon = self.decoder(self.pieces.mask(v, labels))
    return CapsNetOutput(v, v.norm(dim=-1), recon.view_as(images) if shape else recon, c)


def no_relu(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels, relu=False), labels)


def votes_of_the_first_capsule(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels, votes=lambda W, u: torch.einsum(
        "ijdk,bk->bijd", W, u[:, 0])), labels)


def capsedu_routing(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels, routing=dynamic_routing), labels)


def swapped(self, images, labels=None):
    try:
        return _output(self, images, *_routed(self, images, labels, swap=True), labels)
    except RuntimeError:  # the probe's 4 types x 8 dims reshape both ways
        raise


def one_iteration(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels, iterations=1), labels)


def squared_lengths(self, images, labels=None):
    out = _output(self, images, *_routed(self, images, labels), labels)
    return out._replace(lengths=(out.capsules ** 2).sum(dim=-1))


def mask_by_prediction(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels), None)


def flat_reconstruction(self, images, labels=None):
    return _output(self, images, *_routed(self, images, labels), labels, shape=False)


def detached(self, images, labels=None):
    with torch.no_grad():
        v, c = _routed(self, images, labels)
    return _output(self, images, v, c, labels)


def changes_images(self, images, labels=None):
    out = _output(self, images, *_routed(self, images, labels), labels)
    images.clamp_(0.1, 0.9)
    return out


@pytest.mark.parametrize(("forward", "fragment"), [
    (no_relu, "a ReLU after conv1"),
    (votes_of_the_first_capsule, "the votes û you route differ"),
    (capsedu_routing, "never called self.pieces.routing"),
    (one_iteration, "routing_iterations=1"),
    (squared_lengths, "the norm of each class capsule"),
    (mask_by_prediction, "pass the labels on to pieces.mask"),
    (flat_reconstruction, "shaped like the images"),
    (detached, "torch.no_grad()"),
    (changes_images, "changed the images in place"),
])
def test_each_forward_mistake_gets_its_hint(probe, forward, fragment):
    assert_hint(check(forward_with(forward), probe), fragment)


def test_types_and_dims_swapped(probe):
    capsnet, images, labels = probe
    assert capsnet.config.primary_types != capsnet.config.primary_dim
    assert_hint(check(forward_with(swapped), probe), "the order is (features, num_types, caps_dim)")


def loss_with(value_of):
    def loss(self, images, labels):
        out = self(images, labels)
        targets = nn.functional.one_hot(labels, 10).to(out.lengths)
        value = value_of(self, out, images, labels, targets)
        return Loss(value, (out.lengths.argmax(dim=1) == labels).sum())
    return type("WrongLoss", (_ReferenceCapsNet,), {"loss": loss})


@pytest.mark.parametrize(("value_of", "fragment"), [
    (lambda self, out, images, labels, t: self.pieces.margin_loss(out.lengths, t), "margin loss alone"),
    (lambda self, out, images, labels, t: self.pieces.margin_loss(out.lengths, t)
     + self.pieces.sse_loss(out.reconstruction, images), "scales it by 0.0005"),
    (lambda self, out, images, labels, t: self.pieces.margin_loss(out.lengths, t)
     + 0.0005 * self.pieces.sse_loss(self(images).reconstruction, images), "so the labels mask"),
])
def test_each_loss_mistake_gets_its_hint(probe, value_of, fragment):
    assert_hint(check(loss_with(value_of), probe), fragment)


def test_a_wrong_count_of_right_answers(probe):
    def loss(self, images, labels):
        return Loss(_ReferenceCapsNet.loss(self, images, labels).value, torch.tensor(len(labels)))
    assert_hint(check(type("WrongCount", (_ReferenceCapsNet,), {"loss": loss}), probe), "Loss.correct")


def test_a_stub_and_a_wrong_mapping(probe):
    def stub_init(self, config, pieces):
        raise NotImplementedError("write your solution here, then run the check below")
    assert_hint(check(type("Stub", (_ReferenceCapsNet,), {"__init__": stub_init}), probe), STUB_HINT)

    def narrow_init(self, config, pieces):
        _ReferenceCapsNet.__init__(self, config, pieces)
        self.conv1 = nn.Conv2d(1, 4, 9)
    assert_hint(check(type("Narrow", (_ReferenceCapsNet,), {"__init__": narrow_init}), probe), "self.conv1.weight")


def test_assembled_or_reference_says_which(probe, capsys):
    capsnet, images, labels = probe
    given = {"images": images, "labels": labels, "capsnet": capsnet}
    assert assembled_or_reference(_ReferenceCapsNet, **given) is _ReferenceCapsNet
    assert "uses your MyCapsNet" in capsys.readouterr().out
    chosen = assembled_or_reference(forward_with(no_relu), pieces=Pieces.reference(), **given)
    assert chosen is _ReferenceCapsNet and "in place of your MyCapsNet" in capsys.readouterr().out


def test_a_mistake_the_shipped_sizes_hide_shows_with_other_sizes():
    # the shipped network has as many primary capsule types as dimensions (8 and 8): swapping them
    # there changes nothing, so the check also builds a network of other sizes
    assert_hint(check_assembly(forward_with(swapped)), "the order is (features, num_types, caps_dim)",
                "on a CapsNet of other sizes")


def test_the_initial_scale_of_W(probe):
    def wide_init(self, config, pieces):
        _ReferenceCapsNet.__init__(self, config, pieces)
        self.W = nn.Parameter(torch.randn_like(self.W))
    assert_hint(check(type("Wide", (_ReferenceCapsNet,), {"__init__": wide_init}), probe), "standard deviation 0.01")


def test_a_routing_that_detaches_its_inner_iterations(probe):
    pieces = dataclasses.replace(Pieces.reference(), routing=lambda u_hat, r: dynamic_routing(u_hat, r))
    assert_hint(check(_ReferenceCapsNet, probe, pieces), "last iteration only", "lesson 03")


def test_a_forward_that_raises_names_the_first_wrong_stage(probe):
    def permuted_votes(self, images, labels=None):
        return _output(self, images, *_routed(self, images, labels, votes=lambda W, u: prediction_vectors(
            W, u).transpose(1, 2)), labels)
    assert_hint(check(forward_with(permuted_votes), probe), "the votes û you route differ", "shape")


def test_a_mean_squared_error_is_not_called_the_margin_loss_alone(probe):
    wrong = loss_with(lambda self, out, images, labels, t: self.pieces.margin_loss(out.lengths, t)
                      + 0.0005 * ((out.reconstruction - images) ** 2).mean())
    result = check(wrong, probe)
    assert_hint(result, "your loss is")
    assert "margin loss alone" not in result.message
