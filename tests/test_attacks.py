"""Tests for capsedu.explore.attacks: FGSM, PGD and Auto-PGD through torchattacks, and accuracy under attack."""

import pytest
import torch
import torch.nn.functional as F

from capsedu import BaselineCNN, CNNConfig
from capsedu.course.checks._probe import probe_capsnet
from capsedu.explore.attacks import ScoresAsLogits, apgd, attacked_accuracy, fgsm, pgd
from capsedu.nets.losses import margin_loss

pytestmark = pytest.mark.unit


@pytest.fixture
def batch():
    generator = torch.Generator().manual_seed(0)
    return torch.rand(6, 1, 28, 28, generator=generator), torch.tensor([0, 1, 2, 3, 4, 5])


def loss(model, images, labels):
    with torch.no_grad():
        return float(F.cross_entropy(ScoresAsLogits(model)(images), labels))


def test_scores_as_logits_is_the_cnns_own_cross_entropy(batch):
    images, labels = batch
    cnn = BaselineCNN(CNNConfig.cpu()).eval()
    with torch.no_grad():
        assert torch.allclose(F.cross_entropy(ScoresAsLogits(cnn)(images), labels),
                              F.cross_entropy(cnn(images), labels), atol=1e-5)


def test_fgsm_moves_each_pixel_by_eps_within_the_image_range_and_raises_the_loss(batch):
    images, labels = batch
    model = probe_capsnet(1).train()
    attacked = fgsm(model, images, labels, 0.05)
    changed = (attacked - images).abs()
    inside = (images > 0.05) & (images < 0.95)  # pixels the clip cannot touch
    assert float(changed.max()) <= 0.05 + 1e-6
    assert float((changed[inside] > 0.05 - 1e-6).float().mean()) > 0.5  # all but zero-gradient pixels
    assert attacked.min() >= 0 and attacked.max() <= 1 and not attacked.requires_grad
    assert loss(model, attacked, labels) > loss(model, images, labels)
    assert model.training  # the mode is left as found
    assert torch.equal(fgsm(model, images, labels, 0.0), images)


class Sure(torch.nn.Module):
    """Class scores that depend on the image yet sit where the margin loss of class 0 is flat."""

    def class_scores(self, images):
        brightness = images.mean(dim=(1, 2, 3))  # (B,)
        return torch.stack([0.95 + 0.04 * brightness, 0.05 * brightness, 0.05 * (1 - brightness)], dim=1)


def test_fgsm_on_the_margin_loss_climbs_it_and_leaves_a_flat_image_alone(batch):
    images, labels = batch
    model = probe_capsnet(3).train()
    attacked = fgsm(model, images, labels, 0.05, loss="margin")
    with torch.no_grad():
        before, after = (float(margin_loss(model.class_scores(x), labels)) for x in (images, attacked))
    assert after > before and model.training and not attacked.requires_grad
    assert all(p.grad is None for p in model.parameters())
    assert float((attacked - images).abs().max()) <= 0.05 + 1e-6
    sure = Sure()  # its capsule 0 longer than m+ = 0.9, every other shorter than m- = 0.1
    assert torch.equal(fgsm(sure, images, torch.zeros(6, dtype=torch.long), 0.1, loss="margin"), images)
    assert not torch.equal(fgsm(sure, images, torch.zeros(6, dtype=torch.long), 0.1), images)
    with pytest.raises(ValueError, match="loss must be 'ce' or 'margin'"):
        fgsm(model, images, labels, 0.05, loss="dlr")


def test_pgd_stays_in_the_ball_and_climbs_at_least_as_high_as_fgsm(batch):
    images, labels = batch
    model = probe_capsnet(2)
    attacked = pgd(model, 0.05, steps=10)(images, labels)
    assert float((attacked - images).abs().max()) <= 0.05 + 1e-6
    assert attacked.min() >= 0 and attacked.max() <= 1
    assert loss(model, attacked, labels) >= loss(model, fgsm(model, images, labels, 0.05), labels) - 1e-4
    assert torch.equal(attacked, pgd(model, 0.05, steps=10)(images, labels))  # seeded random start
    assert not torch.equal(attacked, pgd(model, 0.05, steps=10, seed=1)(images, labels))


class Constant(torch.nn.Module):
    """A network that answers 0 for a dark image and 1 for a bright one."""

    def class_scores(self, images):
        bright = (images.mean(dim=(1, 2, 3)) > 0.5).float()  # (B,)
        return torch.stack([1 - bright, bright, torch.zeros_like(bright)], dim=1)  # (B, 3)


def test_attacked_accuracy_classifies_what_the_attack_returns_batch_by_batch():
    model, images, labels = Constant(), torch.zeros(6, 1, 4, 4), torch.tensor([0, 0, 0, 1, 1, 1])
    seen = []

    def brighten(x, y):
        seen.append(len(x))
        return torch.ones_like(x)
    assert attacked_accuracy(model, images, labels, None) == pytest.approx(0.5)
    assert attacked_accuracy(model, images, labels, brighten, batch_size=4) == pytest.approx(0.5)
    assert seen == [4, 2]
    assert attacked_accuracy(model, images, labels[[3, 4, 5, 0, 1, 2]] * 0 + 1, brighten) == 1.0


@pytest.mark.parametrize("attack", [lambda m: pgd(m, 0.05, steps=2), lambda m: apgd(m, 0.05, steps=2)])
def test_pgd_and_apgd_leave_the_mode_and_the_global_random_state_as_found(batch, attack):
    images, labels = batch
    model = probe_capsnet(4).train()
    state = torch.random.get_rng_state()
    attack(model)(images, labels)  # torchattacks' APGD reseeds the global generator inside
    assert model.training and torch.equal(torch.random.get_rng_state(), state)


def margin(model, images, labels):
    """z_y - max_{j != y} z_j for each image, with z = log class_scores (negative: misclassified)."""
    with torch.no_grad():
        z = ScoresAsLogits(model)(images)
    true = z.gather(1, labels[:, None]).squeeze(1)
    return true - z.scatter(1, labels[:, None], float("-inf")).max(dim=1).values


def test_apgd_stays_in_the_ball_shrinks_the_margin_and_repeats_with_its_seed():
    generator = torch.Generator().manual_seed(1)
    model = probe_capsnet(3)
    images = torch.rand(16, 1, 28, 28, generator=generator)
    labels = ScoresAsLogits(model)(images).argmax(dim=1).detach()  # every image right at the start
    attacked = apgd(model, 0.05, steps=10)(images, labels)
    assert float((attacked - images).abs().max()) <= 0.05 + 1e-6
    assert attacked.min() >= 0 and attacked.max() <= 1
    assert torch.all(margin(model, attacked, labels) <= margin(model, images, labels) + 1e-6)
    assert margin(model, attacked, labels).mean() < margin(model, images, labels).mean()
    assert torch.equal(attacked, apgd(model, 0.05, steps=10)(images, labels))
    assert not torch.equal(attacked, apgd(model, 0.05, steps=10, seed=1)(images, labels))


def test_apgd_leaves_images_it_cannot_improve_on_as_they_are():
    """Auto-PGD attacks only the images the network gets right: a wrong answer stays as given."""
    generator = torch.Generator().manual_seed(2)
    model = probe_capsnet(3)
    images = torch.rand(8, 1, 28, 28, generator=generator)
    wrong = (ScoresAsLogits(model)(images).argmax(dim=1).detach() + 1) % 10
    assert torch.equal(apgd(model, 0.1, steps=5)(images, wrong), images)


def test_a_softmax_cnns_attack_loss_keeps_its_gradient_when_it_is_sure(batch):
    """Logits 40 apart: the probabilities round to 0 and 1 in float32, the logits' loss still has
    a gradient (a logarithm of the rounded probabilities would have none)."""
    x = batch[0][:1].clone().requires_grad_(True)
    cnn = BaselineCNN(CNNConfig.cpu()).eval()
    last = [m for m in cnn.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        top2 = cnn(x).topk(2).values[0]
        last.weight.mul_(40 / float(top2[0] - top2[1]))
        last.bias.mul_(40 / float(top2[0] - top2[1]))
        assert float(cnn.class_scores(x).max()) == 1.0  # rounded
    F.cross_entropy(ScoresAsLogits(cnn)(x), cnn(x).argmax(dim=1)).backward()
    assert float(x.grad.abs().sum()) > 0


def test_a_softmax_cnn_is_attacked_through_its_own_logits(batch):
    cnn = BaselineCNN(CNNConfig.cpu()).eval()
    with torch.no_grad():
        assert torch.equal(ScoresAsLogits(cnn)(batch[0]), cnn(batch[0]))


@pytest.mark.parametrize("call, message", [
    (lambda m, x, y: fgsm(m, x, y, -0.1), "eps must be a number in [0.0, 1.0]"),
    (lambda m, x, y: pgd(m, 0.1, steps=0), "steps must be"),
    (lambda m, x, y: pgd(m, 0.1, step_size=-1.0), "step_size"),
    (lambda m, x, y: apgd(m, 0.1, restarts=0), "restarts must be"),
    (lambda m, x, y: apgd(m, 0.1, loss="hinge"), "loss must be 'dlr' or 'ce'"),
    (lambda m, x, y: apgd(m, 1.5), "eps must be a number in [0.0, 1.0]"),
    (lambda m, x, y: attacked_accuracy(m, x, y[:2], None), "as long"),
    (lambda m, x, y: attacked_accuracy(torch.nn.Linear(2, 2), x, y, None), "class_scores"),
])
def test_bad_arguments_are_named(batch, call, message):
    images, labels = batch
    with pytest.raises((ValueError, TypeError), match=message.replace("[", r"\[").replace("]", r"\]")):
        call(probe_capsnet(0), images, labels)
