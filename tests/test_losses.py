import pytest
import torch

from capsedu import margin_loss, reconstruction_loss

pytestmark = pytest.mark.unit


def test_margin_loss_hand_computed_single_label():
    lengths = torch.tensor([[0.95, 0.05, 0.5], [0.3, 0.2, 0.0]])
    labels = torch.tensor([0, 2])
    # image 0: present 0.95 >= 0.9 -> 0; absent 0.05 <= 0.1 -> 0; absent 0.5 -> 0.5*0.4^2 = 0.08
    # image 1: absent 0.3 -> 0.5*0.2^2 = 0.02; absent 0.2 -> 0.5*0.1^2 = 0.005; present 0.0 -> 0.81
    expected = (0.08 + (0.02 + 0.005 + 0.81)) / 2
    torch.testing.assert_close(margin_loss(lengths, labels), torch.tensor(expected))


def test_margin_loss_hand_computed_multi_label():
    lengths = torch.tensor([[0.8, 0.7, 0.3]])
    targets = torch.tensor([[1, 1, 0]])
    expected = 0.1**2 + 0.2**2 + 0.5 * 0.2**2
    torch.testing.assert_close(margin_loss(lengths, targets), torch.tensor(expected))
    torch.testing.assert_close(margin_loss(lengths, targets.bool()), torch.tensor(expected))


def test_margin_loss_parameters_and_indices_equal_one_hot():
    lengths = torch.rand(5, 10, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 3, 9, 3, 1])
    one_hot = torch.nn.functional.one_hot(labels, 10)
    torch.testing.assert_close(margin_loss(lengths, labels), margin_loss(lengths, one_hot))
    assert margin_loss(lengths, labels, lam=0.0) < margin_loss(lengths, labels, lam=1.0)
    perfect = torch.nn.functional.one_hot(labels, 10).float() * 0.95 + 0.01
    assert margin_loss(perfect, labels) == 0


def test_margin_loss_gradient():
    lengths = torch.tensor([[0.5, 0.5]], requires_grad=True)
    margin_loss(lengths, torch.tensor([0])).backward()
    # d/dl (0.9 - l)^2 = -2*0.4 ; d/dl 0.5*(l - 0.1)^2 = 0.4
    torch.testing.assert_close(lengths.grad, torch.tensor([[-0.8, 0.4]]))


@pytest.mark.parametrize("lengths, targets, error, words", [
    (torch.rand(4), torch.tensor([0]), ValueError, r"lengths must be a 2-D tensor \(B, J\)"),
    (torch.rand(0, 10), torch.zeros(0, dtype=torch.long), ValueError, "empty batch"),
    (torch.rand(2, 10), torch.tensor([0, 10]), ValueError, r"targets must be in \[0, 9\]"),
    (torch.rand(2, 10), torch.tensor([0, -1]), ValueError, r"targets must be in \[0, 9\]"),
    (torch.rand(2, 10), torch.tensor([0, 1, 2]), ValueError, "3 labels but the batch has 2"),
    (torch.rand(2, 10), torch.tensor([0.0, 1.0]), TypeError, "integer class indices"),
    (torch.rand(2, 10), torch.zeros(2, 9), ValueError, r"multi-hot, got shape \(2, 9\)"),
    (torch.rand(2, 10), torch.full((2, 10), 0.5), ValueError, "only 0 and 1"),
    (torch.rand(2, 10), [0, 1], TypeError, "targets must be a torch.Tensor"),
])
def test_margin_loss_bad_inputs(lengths, targets, error, words):
    with pytest.raises(error, match=words):
        margin_loss(lengths, targets)


def test_reconstruction_loss_sum_per_image_mean_over_batch():
    images = torch.zeros(2, 1, 28, 28)
    recon = torch.zeros(2, 784)
    recon[0, :4] = 0.5  # SSE 1.0
    recon[1, :] = 0.1  # SSE 7.84
    torch.testing.assert_close(reconstruction_loss(recon, images), torch.tensor((1.0 + 7.84) / 2))
    torch.testing.assert_close(reconstruction_loss(recon.view(2, 1, 28, 28), images),
                               reconstruction_loss(recon, images))


def test_reconstruction_loss_bad_inputs():
    with pytest.raises(ValueError, match=r"recon must have shape \(B, 784\)"):
        reconstruction_loss(torch.zeros(2, 100), torch.zeros(2, 1, 28, 28))
    with pytest.raises(ValueError, match="empty batch"):
        reconstruction_loss(torch.zeros(0, 784), torch.zeros(0, 1, 28, 28))
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        reconstruction_loss(torch.zeros(2, 784), torch.zeros(2, 784, dtype=torch.uint8))
