# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
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
# **5.2 % error** (both digits right) against the paper's **8.1 %** for a CNN baseline. Its
# decoder could also redraw each digit on its own by masking all capsules but one (the paper's
# Figure 5): the capsules had *segmented* the two digits. The reconstruction loss gave each digit
# alone as a target, but no pixel was ever labelled with the digit it belongs to.
#
# In this lesson you build the dataset and train a CapsNet on it for a moment. Then you take the
# two networks shipped with the course — a narrowed CapsNet and the lesson-08 CNN with one sigmoid
# per class, trained on the same pairs — and measure, draw and break them. Compared after the same
# number of training pairs, the CNN is ahead; the lesson then measures what more training bought
# the CapsNet, and where the paper's claim stands.

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
#   "at least one right", for a CapsNet and a CNN, and compare them at equal pairs seen, paired,
#   with standard errors that count the digits the pairs share;
# - reproduce **Figure 5**: each digit reconstructed alone, and what the decoder draws for a class
#   that is not in the image;
# - find **where it fails**: the class pairs hardest to separate; use the **pair explorer**.
#
# ## Prerequisites and time
#
# Lessons 04 (margin loss, multi-hot targets), 05 (decoder and masking), 06 (training) and 08 (the
# baseline CNN); the clustered standard error of pairs that share digits is on [the statistics page](statistics.md). **Time:** about 60 minutes, of which the computations take under 3 minutes on two CPU
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
from capsedu.data.multimnist import MULTIMNIST_TEST, MULTIMNIST_VALIDATION, random_pair
from capsedu.data.splits import load_split
from capsedu.explore.figures import image_rows
from capsedu.explore.pairs import pair_accuracy_matrix, pair_explorer, pair_figure, pair_matrix_figure
from capsedu.explore.palette import COURSE_STYLE
from capsedu.nets.multi_digit import pair_hits

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)

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
# 36 × 36 canvas, four pixels of padding on each side. Move it by a random whole-pixel shift of
# up to ±4 pixels in x and in y. Take a second digit of a *different* class, shift it
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
# `(image, pair_labels, digits)`. These are the merged image (1, 36, 36), the two classes (2,) in
# the order of the digits, and the two digits alone as placed (2, 1, 36, 36), the reconstruction
# targets.
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

# %% mystnb={"image": {"alt": "Four panels: a 1 and a 9, each shifted on its own canvas, then the two merged by the clipped sum min(a + b, 1) and by the pixel-wise maximum max(a, b). The 1's slanted stroke runs through the 9's loop. The two merges look almost identical; they differ only where both digits have ink."}}
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
# Two of the sources this course drew on weight a *mean* squared error by 0.0005 (the blog post
# and the "Advanced Capsule Networks" notebook, on 28 × 28 digits: 784 times too weak). On 36 × 36
# pairs the same slip makes the reconstruction term 1,296 times too weak, and the check names it.
# `capsedu.TwoDigitObjective` is this loss as the
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
# two-digit objective. Here `capsedu.pair_accuracy` counts the test pairs whose two longest capsules are exactly their
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
# Both networks were trained by `python -m coursetools.train_zoo` on 60,000 pairs drawn afresh
# every epoch from the 55,000 digits of the train split, with a one-cycle learning-rate schedule;
# [the training record](training_record.md) tells how each run went. The CapsNet is the network
# built above; the CNN is lesson 08's with a sigmoid per class and binary cross-entropy
# (`CNNConfig(multi_label=True)`). Both were measured after every epoch on 10,000 validation
# pairs, drawn once from the 5,000 validation digits, and once at the end on the fixed test pairs.
# They did not train for the same number of epochs:

# %%
capsnet = capsedu.pretrained("multimnist")
cnn = capsedu.pretrained("multimnist_cnn")
networks = {"CapsNet": (capsnet, "multimnist"), "CNN": (cnn, "multimnist_cnn")}
pairs_per_epoch = capsedu.pretrained_metrics("multimnist")["recipe"]["pairs"]["pairs_per_epoch"]
for name, (network, key) in networks.items():
    recipe = capsedu.pretrained_metrics(key)["recipe"]
    assert recipe["pairs"]["pairs_per_epoch"] == pairs_per_epoch  # the same fresh pairs, epoch for epoch
    print(f"{name:8s} {sum(p.numel() for p in network.parameters()):>9,} parameters, batch {recipe['batch_size']}, "
          f"{recipe['epochs']} epochs of {pairs_per_epoch:,} pairs: {recipe['epochs'] * pairs_per_epoch / 1e6:.2f} M pairs seen")


def labels_found(network: torch.nn.Module, some_pairs: capsedu.MultiMNIST) -> torch.Tensor:
    """(N,) how many of each pair's two labels are among the network's two highest scores: 0, 1 or 2."""
    with torch.no_grad():
        return torch.cat([pair_hits(network.class_scores(images), targets.labels)
                          for images, targets in some_pairs.batches(500)])

# %% [markdown]
# ### Equal budgets first
#
# The two shipped networks differ in architecture *and* in how long they trained, so comparing
# them compares both at once. To compare the architectures, give both the same training. The
# CapsNet recipe was also run for the CNN's 32 epochs, schedule and all: the *32-epoch CapsNet*.
# Its weights were not kept, but the shipped CapsNet's record keeps its validation accuracy after
# every epoch (`capsedu.pretrained_metrics("multimnist")["tries"]`), as it does for a *100-epoch
# CapsNet*. All four runs drew the same pairs, epoch for epoch, as far as each ran. The left
# panel shows the two runs with equal budgets; the right panel shows all four, on a logarithmic
# axis of pairs seen.

# %% mystnb={"image": {"alt": "Two line charts of the share of MultiMNIST validation pairs with both digits right against training pairs seen, in millions. Left, equal budgets: the CNN stays above the 32-epoch CapsNet after every epoch, 3.64 plus or minus 0.47 points ahead after 32 epochs (1.92 million pairs). Right, log axis: the 100- and 150-epoch CapsNet runs climb more slowly but keep rising, the 150-epoch one ending near the CNN; all stay below the paper's lines at 94.8 and 91.9 per cent."}}
runs = {name: capsedu.pretrained_metrics(key)["history"]["validation_accuracy"] for name, (_, key) in networks.items()}
for run in capsedu.pretrained_metrics("multimnist")["tries"]:  # the CapsNet recipe's other long runs
    if run["epochs"] >= 32 and "precision" not in run["changes"]:
        runs[f"{run['epochs']}-epoch CapsNet"] = run["validation_accuracy"]
curves = {label: (torch.arange(1, len(accuracies) + 1) * pairs_per_epoch / 1e6, torch.tensor(accuracies) * 100)
          for label, accuracies in runs.items()}  # label -> (millions of pairs seen, validation accuracy %)
equal = ("32-epoch CapsNet", "CNN")  # the same pairs and the same 32-epoch schedule
fig, (ax_equal, ax_all) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
for (label, (seen, accuracy)), style, colour in zip(curves.items(), ("o-", "s--", "^:", "v-."), ("C0", "C1", "C2", "C3")):
    shown = f"{label} ({len(seen)} epochs{', shipped' if label in networks else ''})"
    for ax in (ax_equal, ax_all) if label in equal else (ax_all,):
        ax.plot(seen, accuracy, style, color=colour, ms=2.5, label=shown)
for value, name, above in ((94.8, "paper's CapsNet, 60 M pairs", True), (91.9, "paper's CNN", False)):
    ax_all.axhline(value, color="0.6", lw=0.8, ls=":")  # the CapsNet's label above its line, the CNN's below
    ax_all.text(0.02, value + (0.5 if above else -0.5), name, fontsize=8, color="0.4",
                va="bottom" if above else "top", transform=ax_all.get_yaxis_transform())
ax_equal.set(xlabel="training pairs seen (millions)", xlim=(0, float(curves["CNN"][0][-1]) * 1.03),
             title="equal budgets: the same pairs, the same schedule")
ax_all.set(xscale="log", xlabel="training pairs seen (millions, logarithmic)", title="what more training bought")
for ax in (ax_equal, ax_all):
    ax.set(ylabel="both digits right (%)", ylim=(20, 100))
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
fig.suptitle("MultiMNIST validation pairs: both digits right, after every epoch")
plt.show()

n_validation = capsedu.pretrained_metrics("multimnist")["validation_data"]["images"]
print("32-epoch CapsNet against the CNN on the validation pairs (unpaired: the records keep accuracies only)")
for epoch in (3, 10, len(runs["CNN"])):
    print(f"  after {epoch:2d} epochs ({epoch * pairs_per_epoch / 1e6:.2f} M pairs): " + capsedu.compare_accuracies(
        "32-epoch CapsNet", runs["32-epoch CapsNet"][epoch - 1], n_validation, "CNN", runs["CNN"][epoch - 1], n_validation))

# %% [markdown]
# At equal budgets the CNN is ahead after every epoch (left panel), and after the 32 epochs by
# **3.64 ± 0.47 points** (printed above): in these runs the CNN learned more from the same pairs.
# Three limits on that ±. It is unpaired, because the records keep each run's accuracy but not
# which pairs it got right. It comes from one run of each network, so it covers the sampling of
# validation pairs only, not how much a second run with another seed would differ. And it treats
# the validation pairs as independent, though they share digits.
#
# Each validation digit is in several pairs, and a badly written digit spoils every pair it is in.
# `capsedu.shared_source_se(correct, sources)` gives the standard error of an accuracy when items
# share sources. It needs which pairs a network got right (`correct`, one boolean per pair) and the
# two digits of each pair (`sources`, here `validation_pairs.pairs`). The shipped networks, run on
# the validation pairs now, show how much wider that makes the errors:

# %%
validation_digits = load_split("validation", verbose=False)  # the 5,000 digits the validation pairs are made of
validation_pairs = capsedu.MultiMNIST(validation_digits, capsedu.choose(learner=MULTIMNIST_VALIDATION["num_pairs"], fast=300),
                                      seed=MULTIMNIST_VALIDATION["seed"])
print(f"{len(validation_pairs):,} validation pairs from {len(validation_digits):,} digits: "
      f"each digit in {2 * len(validation_pairs) / len(validation_digits):.1f} pairs on average")
on_validation = {name: labels_found(network, validation_pairs) == 2 for name, (network, _) in networks.items()}  # (N,) each
widening = {}
for name, right in on_validation.items():
    shared = capsedu.shared_source_se(right, validation_pairs.pairs)
    independent = capsedu.standard_error(right.float().mean().item(), len(right))
    widening[name] = shared / independent
    print(f"{name:8s} both right {right.float().mean():.2%}; standard error {100 * shared:.2f} points counting the shared "
          f"digits, {100 * independent:.2f} if the pairs were independent: {widening[name]:.2f} times wider")

# %% [markdown]
# Even widened by that factor, a gap of 3.64 points stays far beyond two standard errors: at
# equal budgets the CNN is ahead. The rest of this section asks what more training bought the
# CapsNet.
#
# ### What more training bought
#
# At the same pairs, the longer CapsNet runs lag *further* behind the CNN (right panel), for a
# reason of schedule, not of capsules: a point of a curve is a moment of a run, not a network
# trained for that budget. The one-cycle schedule warms the learning rate up over the first fifth
# of a run and anneals it over the rest. After the CNN's 32 epochs, the 150-epoch run was still at
# its peak learning rate (printed below), where the 32-epoch run had annealed to zero. Run to
# their ends, the longer runs rose higher:

# %%
recipe = capsedu.pretrained_metrics("multimnist")["recipe"]
learning_rates = capsedu.pretrained_metrics("multimnist")["history"]["lr"]
print(f"the shipped CapsNet's learning rate in epoch {len(runs['CNN'])} of {recipe['epochs']}: "
      f"{learning_rates[len(runs['CNN']) - 1] / recipe['lr']:.0%} of its peak")
print("validation accuracy after the last three epochs")
for label, (_, accuracy) in curves.items():
    print(f"  {label:18s} " + ", ".join(f"{a:.2f} %" for a in accuracy[-3:]))
print("at each run's end, on the validation pairs (one run of each; unpaired: the records keep accuracies only)")
capsnet_runs = sorted((label for label in runs if label != "CNN"), key=lambda label: len(runs[label]))
for longer, shorter in zip(capsnet_runs[1:], capsnet_runs[:-1]):
    print(f"  {longer} ({len(runs[longer]) / len(runs[shorter]):.1f} times the pairs) against {shorter}: "
          + capsedu.compare_accuracies(longer, runs[longer][-1], n_validation, shorter, runs[shorter][-1], n_validation))
print("the shipped networks at their ends, measured now on the same validation pairs (paired):")
print("  " + str(capsedu.compare_paired("CapsNet", on_validation["CapsNet"], "CNN", on_validation["CNN"])))

# %% [markdown]
# From 32 to 100 epochs (3.1 times the pairs) the CapsNet gained 1.92 ± 0.49 points on
# validation; from 100 to 150 (1.5 times), 1.11 ± 0.46 (printed above). Each is a difference
# between **one run of each** length: the ± covers the sampling of validation pairs, not the
# spread between runs with other seeds, and it treats the pairs as independent. Read them as
# "probably more than nothing", not as measured gains. All four curves had flattened by their
# ends: over its last three epochs each moved by under two tenths of a point (printed above).
#
# After almost five times the CNN's pairs, the shipped CapsNet comes close to the CNN on
# validation: the paired comparison above puts the gap near two standard errors. It is paired
# because both networks answered the same pairs, and it shows how many pairs each alone got
# right. It still treats the pairs as independent, so its ± is too small by something like the
# factor printed above: call it not clearly different. A network that saw five times the data
# only drew level.
#
# ### On the test pairs
#
# Each shipped network was measured once on the fixed 10,000 test pairs, drawn from the official
# test digits. They are paired too, and share digits less: each test digit is in about two pairs.

# %%
live = capsedu.choose(learner=pairs, fast=capsedu.MultiMNIST(test_digits, 500, seed=1))  # the test pairs
on_test = {name: labels_found(network, live) for name, (network, _) in networks.items()}  # (N,) each: 0, 1 or 2
for name, (_, key) in networks.items():
    metrics = capsedu.pretrained_metrics(key)
    right = on_test[name] == 2
    print(f"{name:8s} both right {right.float().mean():.2%} ± {100 * capsedu.shared_source_se(right, live.pairs):.2f} points "
          f"(counting shared digits; {100 * capsedu.standard_error(right.float().mean().item(), len(right)):.2f} if independent), "
          f"at least one right {(on_test[name] >= 1).float().mean():.2%} of {len(live):,} test pairs")
    print(f"{'':8s} recorded: {capsedu.shipped_summary(key)}")
    print(f"{'':8s} training accuracy (both right) in the last epoch {metrics['history']['train_accuracy'][-1]:.2%}")
    validation = metrics["validation_data"]
    print(f"{'':8s} validation pairs against test pairs (different pairs, unpaired): " + capsedu.compare_accuracies(
        "validation", validation["accuracy"], validation["images"], "test", metrics["test_accuracy"], metrics["test_data"]["images"]))
    print(f"{'':8s} below 90 % (the course's goal for the CapsNet) by {100 * (0.90 - metrics['test_accuracy']):.2f} points")
print(capsedu.compare_paired("CapsNet", on_test["CapsNet"] == 2, "CNN", on_test["CNN"] == 2))

# %% [markdown]
# The CapsNet names both digits in **86.59 %** of the 10,000 test pairs, far below the paper's
# 94.8 % (5.2 % error); the CNN in **88.23 %**. Both name at least one of the two in nearly every
# pair (printed above): the hard part is the second digit. **The CNN is ahead on the test pairs,
# by 1.64 ± 0.31 points** (paired, printed above), although the CapsNet saw almost five times its
# pairs. Counting the shared digits widens each network's error by about a fifth (printed above);
# the paired gap's error would widen too, but nowhere near enough to make this a tie. The paper's
# claim, the CapsNet ahead of its CNN, is reversed here.
#
# The CapsNet's 4 primary capsule types were chosen by comparing short runs on the test pairs:
# **this setting was chosen on the test split, so the CapsNet's test number is slightly
# optimistic** (the CNN's is not). The course's goal for this CapsNet, 90 % of the test pairs
# (benchmarks/README.md), is missed by the margin printed above. The network does not memorise:
# its training accuracy is close to its validation accuracy (both printed above).
#
# The CapsNet scores measurably lower on the test pairs than on the validation pairs (printed
# above); for the CNN the difference is within the noise. The validation digits come from MNIST's
# training split, written by the writers of the training digits; the test digits were written by
# other people (the two sets of writers are disjoint, say MNIST's makers, LeCun, Cortes and
# Burges, on the MNIST page). Whether that is why the CapsNet drops was not tested here.
#
# None of this shows a limit of capsules as such: this CapsNet is narrowed (32 conv1 channels and
# 4 capsule types, against the paper's 256 channels and 32 types), and the paper trained on about
# seven times as many pairs. Whether the paper's pairs and width would reach the CNN, or 90 %, is
# left open (see *Ideas to try*).
#
# ### What the training costs on your machine
#
# Pairs seen is the fair axis for comparing architectures; minutes are what a learner pays, and
# they depend on the machine. The next cell times a few training steps of each recipe on copies
# of the shipped networks (the median of three short passes) and turns them into the minutes each
# full schedule would take here:

# %%
def pairs_per_second(network: torch.nn.Module, key: str, objective, steps: int, passes: int = 3) -> tuple[float, str]:
    """Training pairs per second of recipe ``key`` on a copy of ``network``: the median of ``passes``
    passes of ``steps`` steps, after one to warm up; and the precision used (``fit`` says why if
    it falls back to float32)."""
    recipe = capsedu.pretrained_metrics(key)["recipe"]
    history = capsedu.fit(copy.deepcopy(network), capsedu.FreshPairs(train_digits, steps * recipe["batch_size"],
                                                                     recipe["batch_size"], seed=2),
                          epochs=1 + passes, objective=objective, lr=recipe["lr"], precision=recipe["precision"],
                          progress=False)
    return steps * recipe["batch_size"] / torch.tensor(history["train_seconds"][1:]).median().item(), history["precision"][-1]


objectives = {"CapsNet": capsedu.TwoDigitObjective(), "CNN": capsedu.MultiLabelObjective()}  # the recipes'
speeds = {}
for name, (network, key) in networks.items():
    assert objectives[name].to_dict() == capsedu.pretrained_metrics(key)["recipe"]["objective"]
    speeds[name], used = pairs_per_second(network, key, objectives[name], capsedu.choose(learner=50, fast=2))
    print(f"{name:8s} {speeds[name]:,.0f} training pairs/s here ({used}): its {len(runs[name])} epochs would take "
          f"{len(runs[name]) * pairs_per_epoch / speeds[name] / 60:.0f} min")
print(f"in the same minutes here, the CNN sees {speeds['CNN'] / speeds['CapsNet']:.1f} times the CapsNet's pairs")

# %% [markdown]
# The ratio depends on the processor, its load and whether it computes in bfloat16 natively, so a
# verdict at equal minutes would be this machine's, not the course's. The pairs axis above does
# not move between machines.

# %% [markdown]
# ## Explore
#
# ### Figure 5: pulling the digits apart
#
# Each row is one test pair. It shows the input with its labels (L) and the two longest capsules
# (R), the reconstruction from each label's capsule alone, and both reconstructions over the input
# in two colours. The last column shows what the decoder draws from the longest capsule whose class
# is *not* in the image.
# Where the network is right, that is a class in neither the labels nor the prediction, as in the
# paper's columns marked (\*); where it is wrong, it is the wrongly predicted class, as in the
# paper's columns marked (P).

# %% mystnb={"image": {"alt": "Five test pairs, one per row: the merged input, the reconstruction from each label's capsule alone, both overlaid in orange and blue, and the capsule of a class not in the image. In the three correct pairs each capsule redraws only its own digit; the absent class gives a faint blur, except a clear 7 in the second. In the two failures the missed 8 and 5 come out faint, and the wrongly predicted 6 and 3 are drawn instead."}}
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
# the missed label still redraws it, but only faintly: the 8 of the fourth pair, the 5 of the
# fifth. What went wrong is that another capsule came out longer (a 6, a 3, which parts of the
# merged strokes resemble); being long, it draws its digit, blurred but more clearly than the
# missed one. That predicted class is what the last column shows in the failure rows (P).

# %% [markdown]
# ### Where it fails
#
# Which pairs of classes are hardest? The share of test pairs with both digits right, for each
# pair of classes (each cell holds about 220 pairs of the 10,000):

# %% mystnb={"image": {"alt": "Two 10 by 10 heat maps, CapsNet and CNN, of the share of test pairs with both digits right for each pair of classes, symmetric, blank diagonal, dark purple at the lowest cell to yellow at 1.0. The lowest cells are 2 and 5 for the CapsNet (75 plus or minus 3 per cent) and 7 and 8 for the CNN (79 plus or minus 3); a 1 with a 4 or a 7 is among the brightest for both."}}
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
# above). A cell of 219 pairs carries a standard error of 2.9 points, so neighbouring ranks are
# ties, and the matrices cannot name one hardest pair (the titles name the lowest cell, with its
# standard error). The pair 2 & 5 is among the four weakest cells for both networks. The
# CapsNet's other weak cells are 3 & 4, 6 & 7 and 4 & 8, the CNN's 7 & 8, 0 & 7 and 5 & 8. A 1 with a 4 or a 7 is among the brightest cells for
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
# - Put seeds on the equal-budget verdict: train `multimnist` with `--epochs 32` and
#   `multimnist_cnn`, each with three seeds (`python -m coursetools.train_zoo multimnist --epochs 32
#   --seed 1 --out-dir my_runs`, and so on), and compare the spread between seeds with the ±
#   above. On a GPU add `--device cuda`.
# - Train the CapsNet recipe for longer or wider (`capsedu.zoo.train.train_recipe` with a recipe
#   changed by `dataclasses.replace`, or from a terminal `benchmarks/multimnist_study.py --epochs 4
#   --config '{"primary_types": 16}'`) and extend the curve above; or with `merge="max"`
#   (`capsedu.FreshPairs(..., merge="max")`). Choose the width on the validation pairs, not the
#   test pairs.
# - Give the CNN the CapsNet's 150 epochs (`python -m coursetools.train_zoo multimnist_cnn
#   --epochs 150 --out-dir my_runs`; the timing cell above tells how long it takes here): at equal
#   pairs *at the end of both schedules*, is the CNN still ahead?
# - Give every training digit its own small rotation and scaling before it is placed
#   (`capsedu.FreshPairs(..., max_angle=15, max_scale=0.1)`, or the recipe fields of the same
#   names). Does it help the CapsNet more than the CNN?
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
# `own_share(reconstruction, own, other)`. It takes reconstructions (B, 1, 36, 36) and the two
# digits alone as placed (`own`, the digit whose capsule was decoded, and `other`, each
# (B, 1, 36, 36)). It returns (B,) numbers near 1 when a reconstruction draws its own digit only,
# however faintly, near 0 when it draws only the other digit, and in between when it draws both. The check tries
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


def segmentation(model: capsedu.CapsNet, pairs: capsedu.MultiMNIST) -> tuple[torch.Tensor, torch.Tensor]:
    """Each pair's own_share, averaged over its two labels' reconstructions (N,), and whether both
    digits are right (N,)."""
    pair_images, pair_targets = pairs.batch(torch.arange(len(pairs)))
    with torch.no_grad():
        capsules = model.eval().class_capsules(pair_images)  # (N, J, D)
        shares = torch.stack([own_share(model.decode(capsules, pair_targets.labels[:, k]).view_as(pair_images),
                                        pair_targets.digits[:, k], pair_targets.digits[:, 1 - k])
                              for k in (0, 1)])  # (2, N)
    return shares.mean(dim=0), labels_found(model, pairs) == 2


tuning_pairs = capsedu.choose(learner=6_000, fast=200)
measured_on = capsedu.MultiMNIST(test_digits, capsedu.choose(learner=1_000, fast=100), seed=1)
if share_result:
    tuned = {"shipped, not fine-tuned": capsnet}
    for name, loss in (("own digit as target", two_digit_loss), ("merged image as target", merged_target_loss)):
        capsedu.set_seed(0)
        tuned[name] = copy.deepcopy(capsnet)
        capsedu.fit(tuned[name], capsedu.FreshPairs(train_digits, tuning_pairs, 32, seed=5), epochs=1,
                    objective=as_objective(loss), lr=1e-3, lr_schedule="onecycle", progress=False)
    print(f"fine-tuned on {tuning_pairs:,} pairs, one run each; measured on {len(measured_on):,} test pairs")
    segmented = {name: segmentation(network, measured_on) for name, network in tuned.items()}
    for name, (shares, both) in segmented.items():  # the ± of own_share: one standard error over pairs
        print(f"{name:24s} own_share {shares.mean():.3f} ± {shares.std() / len(shares) ** 0.5:.3f}, "
              f"both right {both.float().mean():.2%}")
    print(capsedu.compare_paired("merged", segmented["merged image as target"][1],
                                 "own digit", segmented["own digit as target"][1]))
else:
    print("→ this cell runs once own_share passes its check")

# %% [markdown]
# With the merged image as target, the share of each reconstruction's ink that lies on its own
# digit fell from 0.842 to 0.705 in 6,000 pairs. The copy fine-tuned with each digit alone as its
# target kept the shipped network's share (0.838). A capsule decoded alone is now asked to redraw
# both digits, so the decoder learns to draw the other digit's strokes as well: the pressure that
# kept one capsule to one digit is gone. "Both right" barely moves in so short a run: on the same
# 1,000 test pairs the two copies tie (paired, printed above), because the margin loss, which
# decides which capsules are long, is the same in both. Each is one fine-tuning run, so the ±
# covers the test pairs only.
#
# Segmentation is not a side effect of recognising both digits; it comes from asking each capsule
# to explain its own digit and nothing else. Whether a longer run (`tuning_pairs`) takes the share
# down to what a reconstruction of both digits scores is left to you.
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
# - At equal budgets (the same 1.92 M pairs and schedule) the CNN is ahead on the validation pairs
#   by 3.64 ± 0.47 points: one run of each, compared unpaired from the records.
# - What more training bought: the CapsNet's longer runs rose on validation, and the shipped one,
#   after about five times the CNN's pairs, came close to the CNN there. On the test pairs the CNN
#   is still ahead (86.59 against 88.23 %, paired); the CapsNet's 4 primary capsule types were
#   chosen on the test split, so its test number is slightly optimistic. The paper's order, the
#   CapsNet ahead, is reversed on this narrowed network and budget.
# - MultiMNIST pairs share their digits, so their accuracies' standard errors count the shared
#   digits (`capsedu.shared_source_se`); two networks on the same pairs are compared paired
#   (`capsedu.compare_paired`), and single training runs carry no seed spread in their ±.
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
