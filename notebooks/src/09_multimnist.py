# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 09 — MultiMNIST: two overlapping digits, recognised and pulled apart
#
# Section 6 of Sabour et al. (2017) is the result that made capsules famous. Two MNIST digits of
# different classes are drawn on top of each other — their bounding boxes overlap by 80 % on
# average, the paper says — and the network must name both. In the paper the CapsNet reached
# **5.2 % error** (both digits right) against the paper's **8.1 %** for a CNN baseline, and its
# decoder could redraw each digit on its own by masking all capsules but one (the paper's Figure 5):
# the capsules had *segmented* the two digits — the reconstruction loss gave each digit alone as
# a target, but no pixel was ever labelled with the digit it belongs to. In this lesson you build
# the dataset, train a CapsNet on it for a moment, then take the two networks shipped with the
# course — a CapsNet and the lesson-08 CNN with one sigmoid per class, trained on the same pairs —
# and measure, draw and break them. The paper trained on 60 million pairs from 60,000 digits with
# its full-size network; ours drew their pairs from the 55,000 digits of the train split, 60,000
# fresh pairs an epoch — the CapsNet for 150 epochs on two CPU cores (9 million pairs), the CNN for
# 32 on a GPU (1.92 million) — with a narrowed CapsNet. The lesson reports what that gives.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - build a **MultiMNIST** image by hand — two digits of different classes, each shifted on a
#   36 × 36 canvas, merged — and with `capsedu.MultiMNIST` (fixed test pairs) and
#   `capsedu.FreshPairs` (new training pairs every epoch);
# - explain why a softmax cannot say "a 3 and a 5" and capsule lengths can, and write the
#   **two-digit loss** of the paper's Section 6;
# - measure accuracy **as the paper counts it** (both labels are the two longest capsules) and
#   "at least one right", for a CapsNet and a CNN, and compare them at equal pairs seen;
# - reproduce **Figure 5**: each digit reconstructed alone, and what the decoder draws for a class
#   that is not in the image;
# - find **where it fails**: the class pairs hardest to separate; use the **pair explorer**.
#
# ## Prerequisites and time
#
# Lessons 04 (margin loss, multi-hot targets), 05 (decoder and masking), 06 (training) and 08 (the
# baseline CNN). About 45 minutes, of which the computations take under 3 minutes on two CPU
# cores: the networks are shipped (`capsedu.pretrained("multimnist")` and
# `capsedu.pretrained("multimnist_cnn")`, trained by `python -m coursetools.train_zoo multimnist
# multimnist_cnn`, which on a GPU takes `--device cuda`), so the lesson trains only for a few
# seconds.

# %%
# %matplotlib inline

import copy

import matplotlib.pyplot as plt
import torch

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.multimnist import (
    check_own_share,
    check_pair,
    check_two_digit_loss,
    reference_two_digit_loss,
)
from capsedu.data.multimnist import MULTIMNIST_TEST, random_pair
from capsedu.explore.figures import image_rows
from capsedu.explore.pairs import pair_accuracy_matrix, pair_explorer, pair_figure, pair_matrix_figure
from capsedu.nets.multi_digit import pair_hits
from capsedu.zoo.shipped import study

# %%
capsedu.set_seed(0)
train_digits = capsedu.load_mnist("train")  # digits for the short training run below
test_digits = capsedu.load_mnist("test")  # the official 10,000 test digits where present

# %% [markdown]
# ## Build it
#
# ### Two digits on one canvas, by hand
#
# The paper's recipe (its Section 6 and official code): put each 28 × 28 digit in the middle of a
# 36 × 36 canvas — four pixels of padding on each side — and move it by a random whole-pixel
# shift of up to ±4 pixels in x and in y. Take a second digit of a *different* class, shift it
# the same way, and merge the two: the official code adds them and clips at 1,
# $\min(a + b, 1)$; some re-implementations take the pixel-wise maximum instead.
#
# `place_by_hand` puts one digit on the canvas, moved by a shift you give it:

# %%
def place_by_hand(digit: torch.Tensor, dx: int, dy: int, canvas: int = 36) -> torch.Tensor:
    """A (1, 28, 28) digit on a (1, canvas, canvas) frame, moved dx right and dy down."""
    frame = torch.zeros(1, canvas, canvas)
    top, left = (canvas - 28) // 2 + dy, (canvas - 28) // 2 + dx
    frame[:, top:top + 28, left:left + 28] = digit
    return frame


# %% [markdown]
# **Build it.** Write `my_pair(images, labels, generator)`: draw one MultiMNIST pair from the
# digits `images` (N, 1, 28, 28) with their `labels` (N,), following the recipe above, and return
# `(image, pair_labels, digits)`: the merged image (1, 36, 36), the two classes (2,) in the order
# of the digits, and the two digits alone as placed (2, 1, 36, 36) — the reconstruction targets.
# Draw every random number from `generator` (`torch.randint(..., generator=generator)`), so that
# a seed gives the same pair on every machine.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_pair(images: torch.Tensor, labels: torch.Tensor,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One pair from images (N, 1, 28, 28), labels (N,): image (1, 36, 36), labels (2,), digits (2, 1, 36, 36)."""
    ### BEGIN SOLUTION
    first = int(torch.randint(len(images), (1,), generator=generator))
    second = int(torch.randint(len(images), (1,), generator=generator))
    while labels[second] == labels[first]:  # a different class
        second = int(torch.randint(len(images), (1,), generator=generator))
    shifts = torch.randint(-4, 5, (2, 2), generator=generator)  # (digit, (dx, dy)), each its own
    digits = torch.stack([place_by_hand(images[k], *shift.tolist())
                          for k, shift in zip((first, second), shifts)])  # (2, 1, 36, 36)
    image = (digits[0] + digits[1]).clamp(max=1.0)  # (1, 36, 36)
    return image, labels[[first, second]], digits
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_pair(my_pair)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
make_pair = yours_or_reference(check_pair, my_pair, random_pair, name="my_pair")

# %% [markdown]
# One pair drawn by `make_pair` from the test digits, with both merges:

# %%
image, pair_labels, digits = make_pair(test_digits.images, test_digits.labels, torch.Generator().manual_seed(3))
first, second = pair_labels.tolist()
image_rows({"": torch.stack([digits[0], digits[1], image, torch.maximum(digits[0], digits[1])])},
           column_titles=[f"a {first}, shifted", f"a {second}, shifted", "min(a + b, 1)", "max(a, b)"],
           title="A MultiMNIST image built by hand")

# %% [markdown]
# The two merges differ only where both digits have ink: the clipped sum saturates there, the
# maximum keeps the brighter stroke. How much do the digits overlap? The paper gives 80 % for the
# bounding boxes; here is the same measure on 1,000 pairs drawn as `capsedu` draws them (the
# share of the smaller box covered by the other):

# %%
def ink_box(image: torch.Tensor) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the pixels with ink, bottom/right exclusive."""
    rows, cols = image[0].nonzero(as_tuple=True)
    return int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1


def box_overlap(a: torch.Tensor, b: torch.Tensor) -> float:
    (t1, b1, l1, r1), (t2, b2, l2, r2) = ink_box(a), ink_box(b)
    inter = max(0, min(b1, b2) - max(t1, t2)) * max(0, min(r1, r2) - max(l1, l2))
    return inter / min((b1 - t1) * (r1 - l1), (b2 - t2) * (r2 - l2))


probe = capsedu.MultiMNIST(test_digits, 1_000, seed=1)
_, probe_targets = probe.batch(torch.arange(len(probe)))
overlaps = torch.tensor([box_overlap(*pair) for pair in probe_targets.digits])
print(f"bounding-box overlap over 1,000 pairs: mean {overlaps.mean():.0%}, "
      f"median {overlaps.median():.0%}, under 50 % in {(overlaps < 0.5).float().mean():.1%} of pairs")
offsets = torch.arange(-4, 5)  # each digit's shift in x (and in y), up to 4 pixels either way
apart = (offsets.view(-1, 1) - offsets.view(1, -1)).abs().float()  # (9, 9): distance between the two
print(f"two 20 x 20 boxes shifted the same way overlap by {(1 - apart / 20).mean() ** 2:.0%} on average")

# %% [markdown]
# About three quarters on average by this measure — somewhat below the paper's 80 %, which it
# reasons from a nominal 20 × 20 box per digit without showing the average. Boxes of exactly
# 20 × 20 with our shifts give the second figure printed above, close to what the real digits give;
# one pair in twelve overlaps by less than half.
#
# ## Check it
#
# `capsedu.MultiMNIST(digits, num_pairs, seed=...)` draws the pairs once — which digits, which
# shifts — and builds images when asked. The course's test set is 10,000 pairs of the official test
# digits with seed 0, the same on every machine that has that split. Each item's target is a
# `capsedu.PairTargets`: the multi-hot classes, both labels, and both digits alone exactly as
# placed (the reconstruction targets). Rebuild a few of its images with `place_by_hand`:

# %% tags=["nbval-check-output"]
pairs = capsedu.MultiMNIST(test_digits, MULTIMNIST_TEST["num_pairs"], seed=MULTIMNIST_TEST["seed"])
images, targets = pairs.batch(torch.arange(5))
worst = 0.0
for k in range(5):
    (i, j), ((dx1, dy1), (dx2, dy2)) = pairs.pairs[k].tolist(), pairs.shifts[k].tolist()
    by_hand = (place_by_hand(test_digits.images[i], dx1, dy1)
               + place_by_hand(test_digits.images[j], dx2, dy2)).clamp(max=1.0)
    worst = max(worst, float((by_hand - images[k]).abs().max()))
print(f"{len(pairs):,} test pairs; 5 rebuilt by hand, largest pixel difference {worst:.1e}")
print("labels of the first five:", targets.labels.tolist())

# %% [markdown]
# ### Why a softmax cannot say "a 3 and a 5"
#
# Lesson 04 showed it with numbers: a softmax's probabilities sum to 1, so with two digits present
# the best it can do is ½ each, and "which classes are present?" becomes a question of thresholds.
# Capsule lengths are squashed one by one: two of them can both be near 1. The margin loss (Eq. 4)
# takes the multi-hot target as it is — both present capsules pushed above $m^+ = 0.9$, the other
# eight below $m^- = 0.1$:

# %%
lengths = torch.full((1, 10), 0.05)
lengths[0, [3, 5]] = 0.95
target = torch.zeros(1, 10)
target[0, [3, 5]] = 1.0
print(f"margin loss, both capsules long:        {capsedu.margin_loss(lengths, target):.4f}")
lengths[0, 5] = 0.05
print(f"margin loss, only the 3 long:           {capsedu.margin_loss(lengths, target):.4f}")
probabilities = torch.softmax(torch.tensor([[0.0] * 3 + [9.0] + [0.0] + [9.0] + [0.0] * 4]), dim=1)
print(f"a confident softmax on 3 and 5 gives:    p(3) = {probabilities[0, 3]:.3f}, "
      f"p(5) = {probabilities[0, 5]:.3f}")

# %% [markdown]
# ### The two-digit loss
#
# The paper adds the reconstruction loss once per digit: mask all digit capsules except the first
# digit's class, decode, compare with the first digit **alone**; the same for the second; weight
# the sum of squared errors by 0.0005. The decoder thus has to redraw each digit from its own
# capsule, with the other digit's ink removed.
#
# **Build it.** Write `my_two_digit_loss(model, images, targets)`: for a CapsNet `model`, images
# (B, 1, 36, 36) and their `targets` (a `capsedu.PairTargets`: `multi_hot` (B, 10), `labels`
# (B, 2), `digits` (B, 2, 1, 36, 36)), return the loss as a 0-d tensor, batch mean. You have
# `model.class_capsules(images)` (B, 10, 16), `model.decode(capsules, classes)` (masks all but
# `classes` (B,) and decodes, (B, 1296)), `capsedu.margin_loss(lengths, targets)` and
# `capsedu.reconstruction_loss(reconstruction, image)` (lesson 05's summed squared error).

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_two_digit_loss(model: capsedu.CapsNet, images: torch.Tensor, targets: capsedu.PairTargets) -> torch.Tensor:
    """Section 6's loss of a batch of pairs: a 0-d tensor."""
    ### BEGIN SOLUTION
    capsules = model.class_capsules(images)  # (B, J, D)
    margin = capsedu.margin_loss(capsules.norm(dim=-1), targets.multi_hot)  # both classes present
    reconstruction = sum(capsedu.reconstruction_loss(model.decode(capsules, targets.labels[:, k]),
                                                     targets.digits[:, k])  # each digit alone
                         for k in (0, 1))
    return margin + 0.0005 * reconstruction
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_two_digit_loss(my_two_digit_loss)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
two_digit_loss = yours_or_reference(check_two_digit_loss, my_two_digit_loss, reference_two_digit_loss,
                                    name="my_two_digit_loss")

# %% [markdown]
# Two of the sources this course drew on weight a *mean* squared error by 0.0005 (the blog post and the
# "Advanced Capsule Networks" notebook, on 28 × 28 digits: 784 times too weak); on 36 × 36 pairs
# the same slip makes the reconstruction term 1,296 times too weak, and the check names it. `capsedu.TwoDigitObjective` is this loss as the
# objective the `multimnist` recipe gives `capsedu.fit` (a single-digit CapsNet is trained with
# `capsedu.MarginObjective`). On the shipped network's sizes:

# %%
capsedu.set_seed(0)
config = capsedu.CapsNetConfig.from_dict(capsedu.pretrained_metrics("multimnist")["recipe"]["config"])  # the shipped sizes
model = capsedu.CapsNet(config)
by_hand = two_digit_loss(model, images, targets)
print(f"two_digit_loss {by_hand.item():.5f}   capsedu {capsedu.TwoDigitObjective()(model, images, targets).value.item():.5f}")
print(f"a 36 x 36 input gives a {config.primary_grid} x {config.primary_grid} grid of primary capsules "
      f"(6 x 6 at 28 x 28); with {config.primary_types} types, {config.num_primary_caps} capsules")

# %% [markdown]
# ## Use capsedu
#
# ### Train for a moment
#
# `capsedu.FreshPairs` gives training batches of new pairs every epoch, from a seeded generator
# (the paper drew 1,000 pairs per digit); `capsedu.fit` takes it like a `DataLoader`, with the
# two-digit objective.
# `capsedu.pair_accuracy` counts the test pairs whose two longest capsules are exactly their
# two labels (`"both"`) and those with at least one of them right.

# %%
n_pairs = capsedu.choose(learner=6_000, fast=300)
history = capsedu.fit(model, capsedu.FreshPairs(train_digits, n_pairs, 32, seed=1), epochs=1,
                      objective=capsedu.TwoDigitObjective(), lr=2e-3, lr_schedule="onecycle",
                      progress=False)
few = capsedu.MultiMNIST(test_digits, 1_000, seed=MULTIMNIST_TEST["seed"])
scores = capsedu.pair_accuracy(model, few)
print(f"after {n_pairs:,} pairs ({history['train_seconds'][0]:.0f} s): both right "
      f"{scores['both']:.1%}, at least one right {scores['at_least_one']:.1%} on 1,000 test pairs")

# %% [markdown]
# Chance is 1 in 45 for "both" (45 unordered pairs of classes). One pass over a few thousand
# pairs lifts it well above that; the shipped CapsNet saw 150 epochs of 60,000 (printed below).

# %% [markdown]
# ### The shipped networks
#
# Each was trained by one command on the 55,000 digits of the train split, on 60,000 pairs drawn
# afresh every epoch: the CapsNet (the network built above, 4 primary capsule types, batch 64) for
# 150 epochs on two CPU cores in bfloat16, and the CNN (lesson 08's, with a sigmoid per class and
# binary cross-entropy, `CNNConfig(multi_label=True)`) for 32 epochs on a GPU (an NVIDIA H200) the
# course's authors had for one short session. `precision="bfloat16"` runs the convolutions and linear layers in bfloat16 and
# keeps routing and the losses in float32; on this course's CPUs (AVX-512 BF16) it trained this
# recipe at the ratio of pairs per second printed below (the two recorded 3-epoch tries), to the
# same validation accuracy within the noise (benchmarks/README.md); the timing cell under
# *Accuracy against training minutes* measures the ratio again on your machine. The epochs are time budgets, not choices
# made on the validation pairs: 32 were what that GPU time gave both networks; the CapsNet of
# that run (the *32-epoch CapsNet* below) was then retrained for 100 epochs on two CPU cores in
# float32, and later for 150 in bfloat16 — each time what fitted, with a margin, into the course's
# two hours for this network — and each run replaced the one before by a rule fixed before it:
# ship the new network if its validation accuracy is higher (both times it was). So the two
# shipped networks did **not** see the same number of pairs: the CapsNet saw about five times as
# many.
# (The cell under *Accuracy against training minutes* times both recipes on your machine; the
# curves there compare them at equal pairs and equal minutes.) Both were measured on the
# validation pairs (from the 5,000 validation digits) after every epoch, and once at the end on the
# fixed 10,000 test pairs.

# %%
def trained_on(metrics: dict) -> str:
    """Where a shipped network trained: the GPU's name, or the CPU's with its cores."""
    device = metrics.get("device", "cpu")
    return device.removeprefix("cuda: ") if device != "cpu" else f"{metrics['cpu']}, {metrics['cpu_count']} cores"


capsnet = capsedu.pretrained("multimnist")
cnn = capsedu.pretrained("multimnist_cnn")
networks = {"CapsNet": (capsnet, "multimnist"), "CNN": (cnn, "multimnist_cnn")}
live = capsedu.choose(learner=pairs, fast=capsedu.MultiMNIST(test_digits, 500, seed=1))  # the test pairs
for name, (network, key) in networks.items():
    metrics = capsedu.pretrained_metrics(key)
    recipe = metrics["recipe"]
    measured = capsedu.pair_accuracy(network, live)
    print(f"{name:8s} {sum(p.numel() for p in network.parameters()):>9,} parameters, "
          f"{recipe['epochs']} epochs x {recipe['pairs']['pairs_per_epoch']:,} pairs in "
          f"{metrics['train_wall_seconds'] / 60:.1f} min on {trained_on(metrics)} "
          f"({metrics['train_images_per_second']:,.0f} pairs/s, {recipe['precision']})")
    print(f"{'':8s} {capsedu.shipped_summary(key)}; at least one right in "
          f"{metrics['test_at_least_one']:.2%} of the test pairs")
    print(f"{'':8s} measured now on {len(live):,} test pairs: both {measured['both']:.2%}, "
          f"at least one {measured['at_least_one']:.2%}")
    print(f"{'':8s} training accuracy (both right) in the last epoch {metrics['history']['train_accuracy'][-1]:.2%}")
    validation = metrics["validation_data"]
    print(f"{'':8s} validation pairs against test pairs: " + capsedu.compare_accuracies(
        "validation", validation["accuracy"], validation["images"],
        "test", metrics["test_accuracy"], metrics["test_data"]["images"]))
    print(f"{'':8s} below 90 % (the course's goal for the CapsNet) by {100 * (0.90 - metrics['test_accuracy']):.2f} points, "
          f"{(0.90 - metrics['test_accuracy']) / metrics['test_standard_error']:.0f} standard errors")
tries = {run["note"].split(",")[0].split(" ")[0]: run for run in capsedu.pretrained_metrics("multimnist")["tries"]
         if run["epochs"] == 3}  # the recorded 3-epoch tries: "float32" and "bfloat16"
print(f"recorded 3-epoch tries of the CapsNet: bfloat16 {tries['bfloat16']['images_per_second']:,.0f} pairs/s, float32 "
      f"{tries['float32']['images_per_second']:,.0f} pairs/s: "
      f"{tries['bfloat16']['images_per_second'] / tries['float32']['images_per_second']:.2f} times")

# %% [markdown]
# The CapsNet names both digits in **86.59 %** of the 10,000 test pairs, far below the paper's
# 94.8 % (5.2 % error), and the CNN in **88.23 %**, after about a fifth of the CapsNet's pairs.
# Both name at least one of the two in 99.78 % and 99.73 % of the pairs: the hard part is the
# second digit. (Chance for "both" is 1 in 45.) **The paper's claim — the CapsNet ahead of its CNN
# — is reversed on the test pairs: the CNN is ahead by 1.64 ± 0.47 points, 3.5 standard errors**
# (the verdict printed below), with 1.92 million training pairs against the CapsNet's 9 million —
# and with more parameters than the CapsNet (both counts printed above). The course's goal for
# this CapsNet, 90 % of the test pairs (benchmarks/README.md), is missed by the margin printed
# above (the CNN misses 90 % too).
#
# On the validation pairs the two end in a tie (printed under the curves below). The CapsNet
# scores measurably lower on the test pairs than on the validation pairs (by 1.72 ± 0.47 points,
# printed above); for the CNN the difference is within the noise (0.69 ± 0.45); the two drops
# cannot be told apart. One difference between the two sets is worth knowing: the validation
# digits come from MNIST's training split, whose writers are those of the 55,000 training digits,
# while the test digits were written by other people (the two sets of writers are disjoint, say
# MNIST's makers, LeCun, Cortes and Burges, on the MNIST page). Validation measures new digits of
# known writers; the test pairs, new writers. Whether that is why the CapsNet scores lower on the
# test pairs was not tested here.
#
# None of this shows a limit of capsules as such. It shows what more training of this narrowed
# network bought. The network does not memorise (training accuracy 87.35 against 88.31 % on
# validation, printed above). From 32 to 100 epochs (3.1 times the pairs) it gained 1.92 ± 0.49
# points on validation; from 100 to 150 epochs (1.5 times the pairs, now in bfloat16) 1.11 ± 0.46
# (both printed under the curves below) — but on the test pairs the 150-epoch network ties with
# the 100-epoch one (benchmarks/README.md records the 100-epoch network's test accuracy): more
# epochs bought no measurable gain there. The paper trained on 60 million pairs, about seven times these, with
# the full width; this CapsNet is narrowed for the CPU (32 conv1 channels and 4 capsule types,
# against the paper's 256 channels and 32 types), and the full width was never trained on
# MultiMNIST here. The width was tried only in short runs with 4,000 training digits (the
# MultiMNIST study in benchmarks/README.md, `benchmarks/multimnist_study.py`): 16 primary capsule
# types learned no faster per epoch than 8 and trained more slowly; 4 learned about as fast per
# epoch as 8 (within two points after each of 4 epochs, ties on 2,000 test pairs) and trained
# faster by the README's timing, so the shipped network has 4. Whether the paper's
# pairs and width would reach 90 % is untested.

# %% [markdown]
# Both networks were shipped before from 4,000 training digits (recorded in `shipped_4000`, the
# same fixed test pairs): the CapsNet with today's architecture, the CNN with wider convolutions
# and narrower hidden layers (printed below). Side by side with today's:

# %%
before = study("shipped_4000")["networks"]
for name, (_, key) in networks.items():
    old, now = before[key], capsedu.pretrained_metrics(key)
    print(f"{name:8s} 4,000 digits, {old['epochs']} epochs ({old['train_wall_seconds'] / 60:.1f} min, 2-core CPU): "
          f"both {capsedu.with_error(old['test_accuracy'], old['test_data']['images'])}   55,000 digits, "
          f"{now['epochs']} epochs ({now['train_wall_seconds'] / 60:.1f} min, "
          f"{trained_on(now)}): both "
          f"{capsedu.with_error(now['test_accuracy'], now['test_data']['images'])}")
today = {"multimnist": capsedu.pretrained_metrics("multimnist"),
         "multimnist_cnn": capsedu.pretrained_metrics("multimnist_cnn")}
old_cnn, new_cnn = (record["recipe"]["config"] for record in (before["multimnist_cnn"], today["multimnist_cnn"]))
print(f"the CNN's layers: channels {old_cnn['channels']}, hidden {old_cnn['hidden']} with 4,000 digits; "
      f"channels {new_cnn['channels']}, hidden {new_cnn['hidden']} now")
for name, (_, key) in networks.items():
    old, now = before[key], today[key]
    print(f"{name}: " + capsedu.compare_accuracies("55,000 digits", now["test_accuracy"], now["test_data"]["images"],
                                                  "4,000 digits", old["test_accuracy"], old["test_data"]["images"]))
for label, metrics in (("4,000 digits", before), ("55,000 digits", today)):
    caps, net = metrics["multimnist"], metrics["multimnist_cnn"]
    print(f"{label}: " + capsedu.compare_accuracies("CapsNet", caps["test_accuracy"], caps["test_data"]["images"],
                                                   "CNN", net["test_accuracy"], net["test_data"]["images"]))

# %% [markdown]
# With about 14 times more training digits, both networks score higher on the test pairs than
# their 4,000-digit versions: the CNN by 5.49 points (88.23 against 82.74 %), the CapsNet by 4.28
# (86.59 against 82.31 %), both far more than two standard errors (printed above). The epochs
# changed too — 150 against 40 for the CapsNet, 32 against 5 for the CNN — and so did the CNN's
# layers, so these runs do not separate what the digits buy from what the epochs (and, for the
# CNN, its architecture) buy. The CapsNet-against-CNN verdict did change: a tie with 4,000 digits
# (the CNN ahead by 0.43 ± 0.54 points), the CNN ahead by 3.5 standard errors now, although the
# CapsNet saw about five times its pairs. (The 4,000-digit recipes were chosen on these test
# pairs, which benchmarks/README.md estimates makes the CapsNet's figure somewhat optimistic.)
#
# ### Accuracy against training minutes, and against pairs seen
#
# The recorded histories show what more training buys. All four runs were measured on the
# validation pairs (drawn from the 5,000 validation digits, never trained on) after every epoch:
# the two shipped networks and two earlier runs of the same CapsNet recipe, each replaced by the
# next, kept in the shipped one's record (`capsedu.pretrained_metrics("multimnist")["tries"]`): the
# *32-epoch CapsNet* (on the GPU, float32) and the *100-epoch CapsNet* (two CPU cores, float32).
# Two fair comparisons: at the same number of **pairs seen** (what each network makes of the same
# data — all four drew the same pairs, epoch for epoch, as far as each ran) and at the same
# **wall-clock** budget (what a learner pays). The recorded minutes are no fair clock: the CapsNets
# trained on two machines in two precisions, the CNN on a GPU. So the next cell times a few
# training steps of each recipe on *this* machine (the median of three passes of a few seconds
# each), all in the same run, on copies of the shipped networks (which stay as they are): the
# CapsNet in float32 (the earlier runs) and in its recipe's bfloat16 (on a processor without
# native bfloat16, `fit` says so and times float32 again); the pairs each curve saw, divided by
# its speed, give the minutes it would take here.

# %%
def pairs_per_second(network: torch.nn.Module, key: str, objective, steps: int, precision: str,
                     passes: int = 3) -> tuple[float, str]:
    """Training pairs per second of recipe ``key`` in ``precision`` on a copy of ``network``: the
    median of ``passes`` passes of ``steps`` steps each, after one pass to warm up; and the
    precision it trained in (``fit`` falls back to float32, saying why, without bfloat16)."""
    recipe = capsedu.pretrained_metrics(key)["recipe"]
    batch = recipe["batch_size"]
    assert objective.to_dict() == recipe["objective"], "time the recipe's own objective"
    history = capsedu.fit(copy.deepcopy(network), capsedu.FreshPairs(train_digits, steps * batch, batch, seed=2),
                          epochs=1 + passes, objective=objective, lr=recipe["lr"], precision=precision,
                          progress=False)
    return steps * batch / torch.tensor(history["train_seconds"][1:]).median().item(), history["precision"][-1]


objectives = {"CapsNet": capsedu.TwoDigitObjective(), "CNN": capsedu.MultiLabelObjective()}  # the recipes'
timed = [("CapsNet", precision) for precision in dict.fromkeys(("float32", capsedu.pretrained_metrics("multimnist")["recipe"]["precision"]))]
timed.append(("CNN", capsedu.pretrained_metrics("multimnist_cnn")["recipe"]["precision"]))
speeds = {}  # (network, precision asked for) -> training pairs per second here
for name, precision in timed:
    network, key = networks[name]
    speeds[name, precision], used = pairs_per_second(network, key, objectives[name],
                                                     capsedu.choose(learner=50, fast=2), precision)
    print(f"{name:8s} {speeds[name, precision]:,.0f} training pairs/s on this machine "
          f"(batch {capsedu.pretrained_metrics(key)['recipe']['batch_size']}, {used})")

# %%
pairs_per_epoch = capsedu.pretrained_metrics("multimnist")["recipe"]["pairs"]["pairs_per_epoch"]
assert capsedu.pretrained_metrics("multimnist_cnn")["recipe"]["pairs"]["pairs_per_epoch"] == pairs_per_epoch
runs = {name: ((name, capsedu.pretrained_metrics(key)["recipe"]["precision"]),
               capsedu.pretrained_metrics(key)["history"]["validation_accuracy"])
        for name, (_, key) in networks.items()}  # label -> ((whose speed), validation accuracy per epoch)
for run in capsedu.pretrained_metrics("multimnist")["tries"]:  # the CapsNet's earlier long runs (float32)
    if run["epochs"] >= 32 and "precision" not in run["changes"]:
        runs[f"{run['epochs']}-epoch CapsNet"] = (("CapsNet", "float32"), run["validation_accuracy"])
fig, (ax_time, ax_pairs) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
curves = {}  # label -> (minutes here, millions of pairs seen, validation accuracy %)
for (label, (whose, accuracies)), style in zip(runs.items(), ("o-", "s--", "^:", "v-.")):
    seen = torch.arange(1, len(accuracies) + 1) * pairs_per_epoch / 1e6
    minutes = seen * 1e6 / speeds[whose] / 60
    accuracy = torch.tensor(accuracies) * 100
    shown = f"{label} ({len(accuracies)} epochs, shipped)" if label in networks else f"{label} (earlier run)"
    for ax, x in ((ax_time, minutes), (ax_pairs, seen)):
        ax.plot(x, accuracy, style, ms=2, label=shown)
    curves[label] = (minutes, seen, accuracy)
for ax in (ax_time, ax_pairs):
    for value, name, side in ((94.8, "paper CapsNet", "bottom"), (91.9, "paper CNN", "top")):
        ax.axhline(value, color="0.6", lw=0.8, ls=":")
        ax.text(0.02, value + (0.4 if side == "bottom" else -0.4), name, fontsize=9, color="0.4",
                va=side, transform=ax.get_yaxis_transform())
    ax.set(ylabel="both digits right (%)", ylim=(30, 100))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
ax_time.set(xlabel="training minutes on this machine (pairs seen / pairs per second above)",
            title="against training time")
ax_pairs.set(xlabel="training pairs seen (millions)", title="against pairs seen")
fig.suptitle("MultiMNIST validation pairs: both digits right")
plt.show()
n_validation = capsedu.pretrained_metrics("multimnist")["validation_data"]["images"]


def at(label: str, axis: int, budget: float) -> float:
    """A run's last validation accuracy within ``budget`` minutes (axis 0) or M pairs (axis 1)."""
    within = curves[label][axis] <= budget + 1e-9
    return float(curves[label][2][within][-1]) / 100 if within.any() else float("nan")


minutes_budget = min(float(curves[label][0][-1]) for label in curves)  # the shortest run, in minutes here
for label in (label for label in curves if label != "CNN"):
    print(f"{label} against the CNN on validation, within")
    for axis, budget, unit in ((0, minutes_budget, "min here"), (1, 0.18, "M pairs"), (1, 0.6, "M pairs"),
                               (1, float(curves["CNN"][1][-1]), "M pairs")):
        print(f"  {budget:5.2f} {unit}: " + capsedu.compare_accuracies(
            label, at(label, axis, budget), n_validation, "CNN", at("CNN", axis, budget), n_validation))
print("validation after the last three epochs")
for label, (_, _, accuracy) in curves.items():
    print(f"  {label:18s} " + ", ".join(f"{a:.2f} %" for a in accuracy[-3:]))
final = {label: float(accuracy[-1]) / 100 for label, (_, _, accuracy) in curves.items()}
print("at each run's end, on validation")
capsnet_runs = sorted((label for label in curves if label != "CNN"), key=lambda label: len(curves[label][1]))
for a, b in [*zip(capsnet_runs[1:], capsnet_runs[:-1]), ("CapsNet", "CNN")]:  # each longer run, then the CNN
    ratio = len(curves[a][1]) / len(curves[b][1])  # both drew 60,000 pairs an epoch
    print(f"  {a} ({ratio:.1f} times the pairs) against {b}: "
        + capsedu.compare_accuracies(a, final[a], n_validation, b, final[b], n_validation))
recipe = capsedu.pretrained_metrics("multimnist")["recipe"]
learning_rates = capsedu.pretrained_metrics("multimnist")["history"]["lr"]
print(f"the CapsNet's learning rate in epoch {len(curves['CNN'][1])} of {recipe['epochs']}: "
      f"{learning_rates[len(curves['CNN'][1]) - 1] / recipe['lr']:.0%} of its peak")

# %% [markdown]
# Against pairs seen the CNN is ahead of every CapsNet run at every epoch it ran (the figure; the
# verdicts at three budgets are printed above). The fair comparison at equal pairs is the
# 32-epoch CapsNet, whose 32 epochs are the CNN's: behind by 7.44 ± 0.67 points after 3 epochs
# (0.18 M pairs), by 7.58 ± 0.60 after 10 (0.60 M), and at the end by 3.64 ± 0.47 points, 7.7
# standard errors. The longer runs are further behind at the same pairs (11.42 ± 0.52 points at
# 1.92 M for the shipped CapsNet) for a reason of schedule, not of capsules: a point of a curve is
# a moment of a run, not a network trained for that budget. The one-cycle schedule warms the
# learning rate up over the first fifth of a run and anneals it over the rest, so after 1.92 M
# pairs the 150-epoch run was still at its peak learning rate (printed above), where the 32-epoch
# run had annealed to zero. Run to their ends, the longer runs rose to higher plateaus on
# validation: 100 epochs over 32 (3.1 times the pairs) by 1.92 ± 0.49 points, 150 over 100 (1.5
# times) by 1.11 ± 0.46 (both printed above) — and on the test pairs the 150-epoch run ties with
# the 100-epoch one (benchmarks/README.md). At their ends the shipped
# CapsNet and the CNN tie on validation (printed above), with about five times the pairs for the
# CapsNet; on the test pairs the CNN is ahead by 3.5 standard errors (printed under *The shipped
# networks*).
#
# Against minutes on this machine, the first verdict of each CapsNet compares the runs at the
# length, in minutes here, of the shortest of them (which run that is depends on the speeds
# printed above). The CNN is ahead of every CapsNet run there (printed above). That verdict
# moves with the speeds, which change between machines, with the load, and from one run of
# the timing cell to the next (they are timed over a few seconds each): read it as this
# machine's answer, not the course's; on the pairs axis, which does not move, the CNN is ahead
# throughout. All four curves flatten as the schedule anneals: over their last three epochs each
# moved by under two tenths of a point (printed above), which 10,000 validation pairs cannot tell
# from no change (one standard error is about a third of a point). Nothing here points to the
# paper's 94.8 %. Whether about seven times the pairs, as in the paper, or the paper's width
# would reach the CNN on the test pairs, or 90 %, this course's runs cannot say. A longer or wider
# CapsNet run is left to you (see *Ideas to try*).

# %% [markdown]
# ## Explore
#
# ### Figure 5: pulling the digits apart
#
# For each test pair: the input with its labels (L) and the two longest capsules (R), the
# reconstruction from each label's capsule alone, both reconstructions over the input in two
# colours, and what the decoder draws from the longest capsule whose class is *not* in the image.
# Where the network is right, that is a class in neither the labels nor the prediction, as in the
# paper's columns marked (\*); where it is wrong, it is the wrongly predicted class, as in the
# paper's columns marked (P).

# %%
first_images, first_targets = live.batch(torch.arange(40))
with torch.no_grad():
    hits = pair_hits(capsnet.class_scores(first_images), first_targets.labels)  # (40,)
right = (hits == 2).nonzero().flatten()[:3].tolist()
wrong = (hits < 2).nonzero().flatten()[:2].tolist()
pair_figure(capsnet, live, right + wrong)

# %% [markdown]
# Where the CapsNet is right, each capsule redraws its own digit and leaves the other out: the 1
# and the 5 of the first pair come apart even where their strokes cross, and in the colour overlay
# each reconstruction sits on its own strokes. The capsule of a class that is *not* in the image
# behaves less consistently than the paper's Figure 5 says. In the first and third pairs it draws
# only a faint blur (the 3, the 8), as in the paper's marked columns, whose caption says the model
# "cannot reconstruct a 7" that is absent from a (5, 0) image. In the second pair, though, the
# absent 7 comes out as a clear 7, its stem along the 1's slanted stroke: our decoder does sometimes
# draw a digit that is not there, a disagreement with the paper. In the two failures the capsule of
# the missed label still redraws it, but only faintly — the 8 of the fourth pair, the 5 of the
# fifth — and what went wrong is that another capsule — a 6, a 3, which parts of the merged strokes
# resemble — came out longer, and being long it draws its digit (blurred, but more clearly than
# the missed one).

# %% [markdown]
# ### Where it fails
#
# Which pairs of classes are hardest? The share of test pairs with both digits right, for each
# pair of classes (each cell holds about 220 pairs of the 10,000):

# %%
measured = {name: pair_accuracy_matrix(network, live) for name, (network, _) in networks.items()}
matrices = {name: shares for name, (shares, _) in measured.items()}
pair_matrix_figure(matrices, {name: counts for name, (_, counts) in measured.items()})

# %%
for name, (matrix, counts) in measured.items():  # each cell a small sample: its standard error beside it
    cells = [(float(matrix[a, b]), int(counts[a, b]), a, b) for a in range(10) for b in range(a + 1, 10)]
    hardest = ", ".join(f"{a} & {b} ({capsedu.with_error(share, n, digits=0)}, {n} pairs)"
                        for share, n, a, b in sorted(cells)[:4])
    print(f"{name:8s} hardest pairs: {hardest}")
typical = int(torch.stack([counts for _, counts in measured.values()]).float().median())
print(f"a cell of {typical} pairs at 75 % has a standard error of "
      f"{100 * capsedu.standard_error(0.75, typical):.1f} points: neighbouring ranks are mostly ties")

# %% [markdown]
# The CapsNet's four weakest cells lie between 75 and 79 %, the CNN's between 79 and 82 % (printed
# above), and a cell of 219 pairs carries a standard error of 2.9 points: neighbouring ranks are
# ties, and the matrices cannot name one hardest pair (the titles name the lowest cell, with its
# standard error). 2 & 5 is among the four weakest cells for both networks (CapsNet 75 %, CNN 81 %,
# a gap within the two cells' sampling errors); the CapsNet's other weak cells are 3 & 4, 6 & 7
# and 4 & 8, the CNN's 7 & 8, 0 & 7 and 5 & 8. A 1 with a 4 or a 7 is among the brightest cells for
# both: a thin stroke hides little of the other digit.

# %% [markdown]
# ### The pair explorer
#
# Pick a test pair; the two sliders choose the classes whose capsules are decoded (orange and
# blue), set to the pair's labels whenever you pick a pair. Slide one to a class that is not there
# and watch what the decoder invents from a short capsule. The live explorer needs a running
# kernel; below it, `explorer.frames()` holds the pictures of pair 0 for every choice of the two
# classes (100 pictures, computed in advance), which move on the course website too.

# %% tags=["remove-output"]
explorer = pair_explorer(capsnet, live, index=0)
explorer

# %%
explorer.frames()

# %% [markdown]
# ### Ideas to try
#
# - Train the CapsNet recipe for longer or wider (`capsedu.zoo.train.train_recipe` with a recipe
#   changed by `dataclasses.replace`, or from a terminal `benchmarks/multimnist_study.py --epochs 4
#   --config '{"primary_types": 16}'`) and extend the curve above; or with `merge="max"`
#   (`capsedu.FreshPairs(..., merge="max")`). Train the 55,000-digit recipes for the epochs the
#   4,000-digit networks had (40 for the CapsNet, 5 for the CNN): the side-by-side above changes the
#   digits and the epochs at once, and only such runs separate what each buys.
# - Give the CNN the CapsNet's 150 epochs (`python -m coursetools.train_zoo multimnist_cnn
#   --epochs 150 --out-dir my_runs`; divide its 9 million pairs by the CNN's pairs per second printed above to
#   know how long it takes): at equal pairs *at the end of both schedules*, is the CNN still ahead?
# - Give every training digit its own small rotation and scaling before it is placed
#   (`capsedu.FreshPairs(..., max_angle=15, max_scale=0.1)`, or the recipe fields of the same
#   names). benchmarks/README.md records one such run of the then shipped recipe, with 4,000
#   training digits: it fell about 3–7 points behind after
#   epoch 6 and was stopped. Does a smaller angle, or a longer run, do better?
# - Test on pairs with smaller shifts (`MultiMNIST(..., max_shift=0)`: the digits sit on top of
#   each other exactly). Does accuracy drop or rise?
# - Mask *two* capsules at once — both labels — and decode: does the decoder draw both digits?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: what makes the capsules segment?
#
# No pixel of a training pair is labelled with the digit it belongs to, yet the shipped CapsNet's
# capsules redraw each digit alone (Figure 5). Suppose each reconstruction were compared with the
# **merged image** instead of its own digit alone — a slip that is easy to make. Predict what
# happens to the reconstructions and to the accuracy, then measure it.
#
# (a) You need a number for "this capsule draws its own digit and not the other one". Write
# `own_share(reconstruction, own, other)`: for reconstructions (B, 1, 36, 36) and the two digits
# alone as placed (`own`, the digit whose capsule was decoded, and `other`, each (B, 1, 36, 36)),
# return (B,) numbers near 1 when a reconstruction draws its own digit only — however faintly —
# near 0 when it draws only the other digit, and in between when it draws both. The check tries
# it on reconstructions of each of these kinds.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def own_share(reconstruction: torch.Tensor, own: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """(B,) how much of each reconstruction (B, 1, S, S) lies on its own digit rather than the other."""
    ### BEGIN SOLUTION
    own_only = (own > 0.1) & (other <= 0.1)  # (B, 1, S, S): pixels only the own digit inks
    other_only = (other > 0.1) & (own <= 0.1)  # pixels only the other digit inks
    on_own = (reconstruction * own_only).flatten(1).sum(dim=1)  # (B,)
    on_other = (reconstruction * other_only).flatten(1).sum(dim=1)  # (B,)
    return on_own / (on_own + on_other + 1e-8)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
share_result = check_own_share(own_share)

# %% [markdown]
# (b) The cell below fine-tunes two copies of the shipped CapsNet on the same fresh training pairs:
# one with `two_digit_loss`, one with the same loss given the merged image as both digits'
# target. Then it measures, on test pairs, your `own_share` of each label's reconstruction and
# the share of pairs with both digits right. Before you run it, write down your prediction.

# %%
def merged_target_loss(model: capsedu.CapsNet, images: torch.Tensor, targets: capsedu.PairTargets) -> torch.Tensor:
    """two_digit_loss with the merged image as the target of both reconstructions."""
    merged = images[:, None].expand_as(targets.digits)  # (B, 2, 1, S, S)
    return two_digit_loss(model, images, capsedu.PairTargets(targets.multi_hot, targets.labels, merged))


def as_objective(loss):
    """A loss function as capsedu.fit's objective: the value and how many pairs were both right."""
    def objective(model, images, targets):
        with torch.no_grad():
            right = (pair_hits(model.class_scores(images), targets.labels) == 2).sum()
        return capsedu.Loss(loss(model, images, targets), right)
    return objective


def segmentation(model: capsedu.CapsNet, pairs: capsedu.MultiMNIST) -> tuple[torch.Tensor, float]:
    """own_share of every label's reconstruction (2N,) and the share of pairs both right."""
    pair_images, pair_targets = pairs.batch(torch.arange(len(pairs)))
    with torch.no_grad():
        capsules = model.eval().class_capsules(pair_images)  # (N, J, D)
        shares = torch.cat([own_share(model.decode(capsules, pair_targets.labels[:, k]).view_as(pair_images),
                                      pair_targets.digits[:, k], pair_targets.digits[:, 1 - k])
                            for k in (0, 1)])  # (2N,)
    return shares, capsedu.pair_accuracy(model, pairs)["both"]


tuning_pairs = capsedu.choose(learner=6_000, fast=200)
measured_on = capsedu.MultiMNIST(test_digits, capsedu.choose(learner=1_000, fast=100), seed=1)
if share_result:
    tuned = {"shipped, not fine-tuned": capsnet}
    for name, loss in (("own digit as target", two_digit_loss), ("merged image as target", merged_target_loss)):
        capsedu.set_seed(0)
        tuned[name] = copy.deepcopy(capsnet)
        capsedu.fit(tuned[name], capsedu.FreshPairs(train_digits, tuning_pairs, 32, seed=5), epochs=1,
                    objective=as_objective(loss), lr=1e-3, lr_schedule="onecycle", progress=False)
    print(f"fine-tuned on {tuning_pairs:,} pairs; measured on {len(measured_on):,} test pairs")
    for name, network in tuned.items():
        shares, both = segmentation(network, measured_on)
        print(f"{name:24s} own_share {shares.mean():.3f} ± {shares.std() / len(shares) ** 0.5:.3f}, "
              f"both right {capsedu.with_error(both, len(measured_on))}")
else:
    print("→ this cell runs once own_share passes its check")

# %% [markdown]
# With the merged image as target, the share of each reconstruction's ink that lies on its own
# digit fell from 0.842 to 0.705 in 6,000 pairs, while the copy fine-tuned with each digit alone
# as its target kept the shipped network's share (0.838; the ± is one standard error over
# reconstructions, which share pairs, so read it as a rough guide). A capsule decoded alone is now
# asked to redraw both digits, so the decoder learns to draw the other digit's strokes as well:
# the pressure that kept one capsule to one digit is gone. Both right barely moves in so short a
# run (87.10 against 87.70 %, within the sampling error of 1,000 pairs): the margin loss, which
# decides which capsules are long, is the same in both. Segmentation is not a side effect of
# recognising both digits; it comes from asking each capsule to explain its own digit and nothing
# else. Whether a longer run (`tuning_pairs`) takes the share down to what a reconstruction of
# both digits scores is left to you.
#
# ## Summary
#
# - MultiMNIST overlays two digits of different classes, each shifted by up to ±4 pixels on a
#   36 × 36 canvas, merged by $\min(a + b, 1)$: `capsedu.MultiMNIST` draws a fixed, seeded test
#   set (10,000 pairs of the official test digits), `capsedu.FreshPairs` new training pairs every
#   epoch. Their bounding boxes overlap by 73 % on average here.
# - Capsule lengths are squashed one by one, so two can be long at once; the margin loss takes the
#   multi-hot target as it is. The two-digit loss adds one masked reconstruction per digit,
#   compared with that digit alone — which pushes the capsules to separate the digits.
# - Counted as the paper counts it (both labels are the two longest capsules), the shipped CapsNet
#   gets 86.59 % of the test pairs after 150 epochs of 60,000 pairs; the CNN baseline, trained on
#   the first 32 epochs of the same pairs, gets 88.23 %: ahead on the test pairs by 1.64 ± 0.47
#   points, where with 4,000 digits the two had tied on the test pairs. On the validation pairs
#   the CNN is ahead at every number of pairs both reached (up to 1.92 M), and at their ends (1.92
#   M against 9 M pairs) the two tie; at equal minutes the verdict depends on the networks' speeds
#   on your machine. The paper's 94.8 % against 91.9 % (60 M pairs, 60,000 digits, the full-size
#   network), a CapsNet ahead of its CNN, is not reproduced on this budget: on the test pairs the
#   order is reversed. The course's 90 % goal is missed too. This shows no limit of capsules as
#   such, but what more training of this narrowed network bought: 32 → 100 epochs about two points
#   on validation, 100 → 150 about one, and on the test pairs no measurable gain;
#   whether the paper's 60 million pairs or its width would reach 90 % is untested.
# - The decoder does pull the digits apart (Figure 5): each label's capsule redraws its digit
#   alone. A missing class's capsule drew only a faint blur in two of the three correct pairs shown,
#   but a clear digit of its class in the third, unlike the paper's Figure 5.
# - The hardest class pairs (2 & 5 among them for both networks) cannot be ranked: each cell's
#   sampling error is about as large as the gaps between them.

# %% [markdown]
# ## Self-check
#
# A few questions to test your understanding; click an answer to see whether it is right and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("09")

# %% [markdown]
# ## What's next
#
# Lesson 10 opens the box the other way: the backward pass of squash, Procedure 1 and the margin
# loss written by hand in NumPy, checked against finite differences and autograd, and a capsule
# classifier trained with no framework at all.
