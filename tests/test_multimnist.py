"""MultiMNIST: the pairs (different classes, shifts, merge), their determinism, bad input, and the
two-digit loss and accuracy of the CapsNet and the multi-label CNN."""

import copy

import pytest
import torch

import capsedu
from capsedu.data.mnist import MNISTData, translate
from capsedu.data.multimnist import FreshPairs, MultiMNIST, PairTargets
from capsedu.nets.multi_digit import label_hits, pair_hits
from capsedu.training.objectives import (
    CrossEntropyObjective,
    MultiLabelObjective,
    TwoDigitObjective,
)
from capsedu.training.prediction import pair_accuracy

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def digits() -> MNISTData:
    return capsedu.load_offline("test")  # 1,000 real digits, 100 per class


def test_translate_moves_right_and_down_and_loses_what_leaves():
    image = torch.zeros(1, 1, 5, 5)
    image[0, 0, 2, 2], image[0, 0, 4, 4] = 1.0, 2.0
    moved = translate(image, torch.tensor([[1, -2]]))  # one right, two up
    assert moved[0, 0, 0, 3] == 1.0  # (row 2, col 2) -> (row 0, col 3)
    assert moved.sum() == 1.0  # (row 4, col 4) -> (row 2, col 5): off the frame, lost


def test_translate_equals_a_loop_of_slices(rng):
    images = torch.rand(6, 2, 7, 9, generator=rng)
    offsets = torch.randint(-3, 4, (6, 2), generator=rng)
    moved = translate(images, offsets)
    for image, (dx, dy), got in zip(images, offsets.tolist(), moved):
        expected = torch.zeros_like(image)
        h, w = image.shape[1:]
        expected[:, max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            image[:, max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
        torch.testing.assert_close(got, expected)


def test_pairs_have_two_classes_and_their_images_add_up(digits):
    pairs = MultiMNIST(digits, 300, seed=3)
    images, targets = pairs.batch(torch.arange(300))
    assert images.shape == (300, 1, 36, 36) and targets.digits.shape == (300, 2, 1, 36, 36)
    assert (targets.labels[:, 0] != targets.labels[:, 1]).all()
    assert (targets.multi_hot.sum(dim=1) == 2).all()
    assert torch.equal(targets.multi_hot.argsort(dim=1, descending=True)[:, :2].sort(dim=1).values,
                       targets.labels.sort(dim=1).values)
    torch.testing.assert_close(images, (targets.digits[:, 0] + targets.digits[:, 1]).clamp(max=1))
    # each digit alone keeps all its ink (a shift of up to 4 px stays on the 36 x 36 canvas)
    sources = digits.images[pairs.pairs]  # (P, 2, 1, 28, 28)
    torch.testing.assert_close(targets.digits.sum(dim=(2, 3, 4)), sources.sum(dim=(2, 3, 4)))
    assert pairs.shifts.abs().max() == 4 and pairs.shifts.min() == -4


def test_the_digits_sit_where_their_shifts_say(digits):
    pairs = MultiMNIST(digits, 20, seed=1)
    _, targets = pairs.batch(torch.arange(20))
    for (first, second), shifts, placed in zip(pairs.pairs, pairs.shifts, targets.digits):
        for index, (dx, dy), image in zip((first, second), shifts.tolist(), placed):
            window = image[0, 4 + dy:32 + dy, 4 + dx:32 + dx]
            torch.testing.assert_close(window, digits.images[index, 0])


def test_merge_by_maximum(digits):
    clip = MultiMNIST(digits, 50, seed=2)
    maximum = MultiMNIST(digits, 50, seed=2, merge="max")
    images, targets = maximum.batch(torch.arange(50))
    torch.testing.assert_close(images, torch.maximum(targets.digits[:, 0], targets.digits[:, 1]))
    assert (clip.batch(torch.arange(50))[0] >= images).all()
    assert not torch.equal(clip.batch(torch.arange(50))[0], images)


def test_equal_seeds_give_equal_sets_and_items_match_batches(digits):
    a, b, c = (MultiMNIST(digits, 40, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.pairs, b.pairs) and torch.equal(a.shifts, b.shifts)
    assert not torch.equal(a.pairs, c.pairs)
    image, target = a[7]
    images, targets = a.batch(torch.tensor([7]))
    assert isinstance(target, PairTargets)
    torch.testing.assert_close(image, images[0])
    torch.testing.assert_close(target.digits, targets.digits[0])


def test_fresh_pairs_differ_every_epoch_and_repeat_with_the_seed(digits):
    def two_epochs(seed):
        loader = FreshPairs(digits, 70, 32, seed=seed)
        assert len(loader) == 3
        return [torch.cat([t.labels for _, t in loader]) for _ in range(2)]
    first, second = two_epochs(0)
    assert len(first) == 70 and not torch.equal(first, second)
    again = two_epochs(0)
    assert torch.equal(first, again[0]) and torch.equal(second, again[1])


def test_warped_pairs_keep_their_pairs_and_shifts_and_turn_each_digit(digits):
    plain = MultiMNIST(digits, 30, seed=4)
    warped = MultiMNIST(digits, 30, seed=4, max_angle=15, max_scale=0.1)
    assert torch.equal(plain.pairs, warped.pairs) and torch.equal(plain.shifts, warped.shifts)
    assert warped.angles.shape == (30, 2) and warped.angles.abs().max() <= 15
    assert ((warped.scales - 1).abs() <= 0.1).all() and plain.angles is None
    images, targets = warped.batch(torch.arange(30))
    torch.testing.assert_close(images, (targets.digits[:, 0] + targets.digits[:, 1]).clamp(max=1))
    assert not torch.allclose(targets.digits, plain.batch(torch.arange(30))[1].digits, atol=0.05)
    loader = FreshPairs(digits, 40, 20, seed=1, max_angle=15, max_scale=0.1)
    first = torch.cat([images for images, _ in loader])
    assert first.shape == (40, 1, 36, 36)


@pytest.mark.parametrize("options, match", [
    ({"max_angle": 100}, "max_angle must be a number in \\[0.0, 90.0\\]"),
    ({"max_scale": 0.9}, "max_scale must be a number in \\[0.0, 0.5\\]"),
    ({"max_shift": 5}, "max_shift must be in \\[0, 4\\]"),
    ({"canvas": 27}, "canvas must be >= 28"),
    ({"merge": "sum"}, "merge must be one of"),
    ({"num_pairs": 0}, "num_pairs must be >= 1"),
])
def test_bad_options_are_named(digits, options, match):
    arguments = {"num_pairs": 10, **options}
    with pytest.raises(ValueError, match=match):
        MultiMNIST(digits, **arguments)


def test_a_split_with_one_class_is_refused(digits):
    threes = digits.labels == 3
    with pytest.raises(ValueError, match="at least two classes"):
        MultiMNIST(MNISTData(digits.images[threes], digits.labels[threes], "threes"), 10)
    with pytest.raises(TypeError, match="digits must be a capsedu.MNISTData"):
        MultiMNIST(digits.images, 10)


def test_translate_names_bad_offsets():
    with pytest.raises(ValueError, match="offsets must be an integer tensor \\(B, 2\\)"):
        translate(torch.zeros(2, 1, 4, 4), torch.zeros(2, 2))


def test_pair_hits_counts_labels_among_the_top_two():
    scores = torch.tensor([[0.9, 0.8, 0.1, 0.0], [0.9, 0.1, 0.8, 0.0], [0.1, 0.2, 0.9, 0.8]])
    labels = torch.tensor([[1, 0], [0, 1], [0, 1]])
    assert pair_hits(scores, labels).tolist() == [2, 1, 0]
    three = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 0]])  # an image with three labels: its top three
    assert label_hits(scores[:2], three).tolist() == [2, 3]


@pytest.fixture(scope="module")
def small_capsnet(pair_capsnet):
    return pair_capsnet


def test_two_digit_loss_is_margin_plus_both_masked_reconstructions(digits, small_capsnet):
    model, two_digit_loss = small_capsnet, TwoDigitObjective()
    images, targets = MultiMNIST(digits, 8, seed=0).batch(torch.arange(8))
    loss, correct = two_digit_loss(model, images, targets)
    out = model(images)
    margin = capsedu.margin_loss(out.lengths, targets.multi_hot)
    recon = sum(capsedu.reconstruction_loss(model.decode(out.capsules, targets.labels[:, k]),
                                            targets.digits[:, k]) for k in (0, 1))
    torch.testing.assert_close(loss, margin + 0.0005 * recon)
    assert int(correct) == int((pair_hits(out.lengths, targets.labels) == 2).sum())
    # each reconstruction is compared with its digit alone, not with the merged image (a decoder
    # that draws faint images errs more on the merged image, which has more ink)
    faint = copy.deepcopy(model)
    with torch.no_grad():
        faint.decoder[-2].bias.fill_(-3.0)
    merged = PairTargets(targets.multi_hot, targets.labels, torch.stack([images, images], dim=1))
    assert two_digit_loss(faint, images, merged).value > two_digit_loss(faint, images, targets).value + 0.01
    assert TwoDigitObjective(recon_weight=0.0)(model, images, targets).value < loss  # its weight counts


@pytest.mark.tools  # 3 epochs of two networks on 1,000 pairs: more than a few steps
def test_a_capsnet_and_a_cnn_learn_pairs_through_fit(digits, small_capsnet):
    test = MultiMNIST(digits, 300, seed=9)
    capsedu.set_seed(0)
    cnn = capsedu.BaselineCNN(capsedu.CNNConfig(image_size=36, channels=(16, 32), pool=(True, True),
                                                hidden=(64,), multi_label=True))
    for model, objective in ((small_capsnet, TwoDigitObjective()), (cnn, MultiLabelObjective())):
        before = pair_accuracy(model, test)
        history = capsedu.fit(model, FreshPairs(digits, 1_000, 32, seed=1), epochs=3, lr=3e-3,
                              objective=objective, progress=False)
        after = pair_accuracy(model, test)
        assert history["train_loss"][-1] < history["train_loss"][0]
        assert after["at_least_one"] > before["at_least_one"] + 0.2, (type(model).__name__, before, after)
        assert 0 <= after["both"] <= after["at_least_one"] <= 1


def test_a_single_label_cnn_refuses_pairs(digits):
    cnn = capsedu.BaselineCNN(capsedu.CNNConfig(image_size=36, channels=(4,), pool=(True,),
                                                hidden=(8,)))
    images, targets = MultiMNIST(digits, 4).batch(torch.arange(4))
    with pytest.raises(TypeError, match="MultiLabelObjective"):
        CrossEntropyObjective()(cnn, images, targets)
    with pytest.raises(TypeError, match="targets.multi_hot must be a torch.Tensor"):
        MultiLabelObjective()(cnn, images, targets.labels[:, 0])


def test_targets_that_are_not_multi_hot_are_named(digits, small_capsnet):
    images, targets = MultiMNIST(digits, 4).batch(torch.arange(4))
    doubled = PairTargets(targets.multi_hot * 2, targets.labels, targets.digits)
    with pytest.raises(ValueError, match="multi-hot targets must contain only 0 and 1"):
        TwoDigitObjective()(small_capsnet, images, doubled)
    narrow = PairTargets(targets.multi_hot[:, :9], targets.labels, targets.digits)
    with pytest.raises(ValueError, match="targets must be"):
        TwoDigitObjective()(small_capsnet, images, narrow)
