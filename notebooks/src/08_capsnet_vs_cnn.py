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
# # Lesson 08 — CapsNet against a CNN: transformed digits and equivariance
#
# Lesson 00 promised that capsules keep the *pose* of what they detect where a CNN's pooling throws
# it away, and that this should help a CapsNet recognise digits in poses it never saw. Section 5.2
# of Sabour et al. (2017) tests it: trained only on shifted MNIST digits, their CapsNet reached
# **79 %** on affNIST (affine-transformed MNIST digits) against **66 %** for a CNN that was as
# accurate on the clean test set (the paper gives 99.23 % and 99.22 %). Re-implementations do not
# always reproduce that gap. In this lesson you measure it yourself on the two networks shipped
# with the course. They have about the same number of parameters, learned from the same 55,000
# digits by the same recipe and, like the paper's pair, are equally accurate on the clean test
# split (printed below). Then you look at *how* each network's internal representation moves
# when a digit turns. Whatever the numbers say, the lesson reports them as they are.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - describe the **baseline CNN** (convolutions, max-pooling, fully connected layers, dropout,
#   softmax), and say what the comparison holds equal (data, recipe, parameter count) and what
#   it does not;
# - **turn digits yourself** with `affine_grid` and `grid_sample`, and build transformed test
#   sets — rotated, scaled, sheared, shifted, and an affNIST-like set — and say how they differ
#   from the real affNIST;
# - measure and plot **accuracy per transformation** for both networks, compare them **paired**
#   on the same images, and read the result against the paper's, knowing which protocol differs;
# - test **equivariance** on trained networks: follow the winning capsule's pose vector, its
#   length and its reconstruction while a digit turns, and compare with the CNN's features;
# - run the paper's **own robustness protocol** (40 × 40 translated training, an affNIST-like
#   test) and read its per-transformation breakdown and its accuracy-against-accuracy curve;
# - use the **transform explorer** (`capsedu.explore.transform_explorer`).
#
# ## Prerequisites and time
#
# Lessons 00 (pose and pooling), 05 (the decoder), 06 (training, the shipped recipe) and 07
# (exploring capsules; paired comparisons: [the statistics page](statistics.md)). **Time:** about 90 minutes, of which the computations take a few minutes on two CPU
# cores: all four networks are shipped (`capsedu.pretrained("capsnet")`, `capsedu.pretrained("cnn")`,
# and for the paper's protocol `"capsnet40"` and `"cnn40"`), so nothing is trained here. The full
# tables over all 10,000 test images come from `benchmarks/robustness.py` and
# `benchmarks/affnist_study.py`; the lesson re-measures part of them live.

# %%
# %matplotlib inline
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.robustness import (check_class_probe, check_orientation, check_rotate,
                                              class_probe_error, reference_orientation)
from capsedu.data.transforms import ROTATIONS, transform_images
from capsedu.explore.equivariance import (capsule_trajectory, feature_trajectory, projection_2d,
                                          smoothness)
from capsedu.explore.figures import image_rows
from capsedu.explore.probes import linear_probe_error
from capsedu.explore.palette import BLUE, COURSE_STYLE, MUTED_TEXT
from capsedu.explore.transform_explorer import transform_explorer, transform_strip
from capsedu.zoo.shipped import study

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)

# %%
capsedu.set_seed(0)
capsnet = capsedu.pretrained("capsnet")  # the default: capsedu.pretrained() is the same network
cnn = capsedu.pretrained("cnn")
networks = {"CapsNet": capsnet, "CNN": cnn}
for name, key in (("CapsNet", "capsnet"), ("CNN", "cnn")):
    parameters = sum(p.numel() for p in networks[name].parameters())
    print(f"{name:8s} {parameters:>10,} parameters; {capsedu.shipped_summary(key)}")
# which official test images each network got right, from its record: the same images, so paired
print("on the test split:", capsedu.compare_paired("CapsNet", capsedu.correct_on_test("capsnet"),
                                                   "CNN", capsedu.correct_on_test("cnn")))

test = capsedu.load_mnist("test")
n_live = capsedu.choose(learner=2000, fast=200)  # test images for the live measurements
live = test.subset(min(n_live, len(test)), seed=0)  # class-balanced, seeded

# %% [markdown]
# ## Build it
#
# ### A CNN in the paper's style, with the CapsNet's parameter count
#
# The paper's baseline is "a standard CNN with three convolutional layers of 256, 256, 128
# channels. Each has 5x5 kernels and stride of 1. The last convolutional layers are followed by two
# fully connected layers of size 328, 192. The last fully connected layer is connected with dropout
# to a 10 class softmax layer with cross entropy loss" (`capsedu.CNNConfig.paper()` builds it). The
# paper counts 35.4 M parameters in that baseline, against the paper's 8.2 M for its CapsNet. That
# count implies no pooling: with the paper's layer sizes, the first fully connected layer alone
# holds 28 · 28 · 128 · 328 = 32.9 M weights. The course's CNN keeps the structure with four
# changes (printed below): far narrower convolutions (32, 64, 64 channels), a *wider* first fully
# connected layer (512 instead of 328), dropout after both hidden layers, and 2 × 2 max-pooling
# after the first two convolutions. Pooling is how it fits the CapsNet's parameter count,
# decoder included; it also makes a CNN more tolerant of small shifts, worth remembering when you
# read the results. Both networks learned by the same recipe from the same 55,000 training images
# with the same two-pixel random shifts; only the network differs:

# %%
print(cnn)
for key in ("capsnet", "cnn"):
    recipe = capsedu.pretrained_metrics(key)["recipe"]  # the recipe that trained the shipped weights
    same = {k: v for k, v in recipe.items() if k not in ("kind", "config", "objective", "pairs")}
    print(f"{key}: {same}")

# %% [markdown]
# Where the parameters are, and how many each network uses to classify:

# %%
def parameters_by_part(model: torch.nn.Module) -> dict[str, int]:
    """Parameter counts per top-level child module."""
    return {name: sum(p.numel() for p in child.parameters()) for name, child in model.named_children()}


for name, model in networks.items():
    parts = parameters_by_part(model)
    print(f"{name}: " + ", ".join(f"{part} {count:,}" for part, count in parts.items()))
    classify = sum(count for part, count in parts.items() if part != "decoder")  # the decoder only redraws
    print(f"{'':8s} used to classify: {classify:,}")

# %% [markdown]
# The totals match only because the CapsNet's decoder counts. The decoder helps training and
# draws reconstructions, but the class comes from the capsule lengths, so the CapsNet classifies
# with under a third of the CNN's parameters (the last lines). Where the CapsNet leads below, it
# does not lead by being bigger; where the CNN leads, its larger classifier may be part of the
# reason.

# %% [markdown]
# Both shipped networks were measured on the validation split (5,000 training images they never
# learned from) after every epoch; the test split was used once, at the end. How each was trained
# is in [the training record](training_record.md).

# %% mystnb={"image": {"alt": "Line chart of validation accuracy (%) on 5,000 held-out digits after each of 15 training epochs, y axis from 90 to 100; CapsNet solid with circles, CNN dashed with squares. Both curves start between 97 and 98 % after the first epoch, climb together with small dips and level off between about 99.3 and 99.5 % from epoch 9; no epoch falls below the 90 % frame."}}
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for (name, key), style in zip((("CapsNet", "capsnet"), ("CNN", "cnn")), ("o-", "s--")):
    history = capsedu.pretrained_metrics(key)["history"]
    ax.plot(history["epoch"], [100 * a for a in history["validation_accuracy"]], style, ms=3, label=name)
    below = [f"{a:.1%}" for a in history["validation_accuracy"] if a < 0.9]
    print(f"{name}: first epochs below the frame (under 90 %): {', '.join(below) or 'none'}")
ax.set(xlabel="epoch", ylabel="validation accuracy (%)", ylim=(90, 100),
       title="Validation accuracy during training (same recipe, same images)")
ax.legend()
ax.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ### Turning a digit: your rotation
#
# Every robustness test below starts from turned digits, and you write the turn. Write
# `my_rotate(images, angle)`: each image of the batch (N, C, H, W) turned by `angle` **degrees,
# anticlockwise** as you look at it, about the centre of the image, keeping its frame, sampling
# bilinearly, with zeros where nothing comes in. Use `torch.nn.functional.affine_grid` (it takes
# a batch of 2 × 3 matrices in coordinates that run from −1 to 1 across the image) and
# `torch.nn.functional.grid_sample`.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_rotate(images: torch.Tensor, angle: float) -> torch.Tensor:
    """Images (N, C, H, W) turned angle degrees anticlockwise about their centre, bilinear: (N, C, H, W)."""
    ### BEGIN SOLUTION
    a = math.radians(angle)
    # grid_sample asks, for each OUTPUT pixel, where to read the input: the inverse turn. With
    # rows growing downwards, that inverse of an anticlockwise turn is this matrix.
    theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0],
                          [math.sin(a), math.cos(a), 0.0]], dtype=images.dtype)  # (2, 3)
    grid = F.affine_grid(theta.expand(len(images), 2, 3), list(images.shape),
                         align_corners=False)  # (N, H, W, 2)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False)  # (N, C, H, W)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_rotate(my_rotate)

# %% tags=["nbval-check-output"]
rotate = yours_or_reference(check_rotate, my_rotate,
                            lambda images, angle: transform_images(images, angle=angle),
                            name="my_rotate")

# %% [markdown]
# The check turned two pictures with no symmetry by 30° and compared with capsedu's
# `transform_images`. The classic slips each give a different picture: degrees passed to `cos`
# and `sin`, the forward turn where `grid_sample` needs the inverse (the digit turns clockwise),
# a turn about the corner instead of the centre, `align_corners` set differently in the two calls,
# nearest-neighbour sampling.
#
# A turned digit keeps its 28 × 28 frame, so a large turn can push the ends of a stroke out of
# it. `capsedu.data.transforms` therefore works on a 40 × 40 canvas (six pixels of padding on
# each side, affNIST's size). The networks see its central 28 × 28, exactly what turning the
# 28 × 28 image gives; the canvas tells how much of the digit's ink that frame keeps.

# %% mystnb={"image": {"alt": "A row of nine copies of one handwritten test 7, turned from -60 to +60 degrees in 15-degree steps (negative clockwise, positive anticlockwise), upright in the middle. At -60 degrees it lies almost flat like a backwards L, at -30 it looks like an arrowhead pointing right, and at +60 like an upside-down V. Every turned digit stays whole inside its frame."}} tags=["example-digits"]
seven = test.first_index(7)  # the first 7 of the test split, chosen by class: a 7 for every learner
print(test.describe_examples([seven]))
digit = test.images[seven:seven + 1]  # (1, 1, 28, 28)
turned = torch.cat([rotate(digit, float(a)) for a in ROTATIONS])  # (A, 1, 28, 28)
image_rows({"rotated": turned}, column_titles=[f"{a:+d}°" for a in ROTATIONS],
           title="One test digit, rotated by your rotate")

# %% [markdown]
# ## Check it
#
# Your turn must agree with capsedu's `transform_images` and with torchvision's
# `transforms.functional.rotate` (bilinear) at every angle of the tables below.

# %% tags=["nbval-check-output"]
for angle, mine in zip(ROTATIONS, turned):
    torch.testing.assert_close(mine[None], transform_images(digit, angle=float(angle)), atol=1e-5,
                               rtol=0)
    torch.testing.assert_close(mine[None], TF.rotate(digit, float(angle), InterpolationMode.BILINEAR),
                               atol=1e-5, rtol=0)
_, kept = zip(*(transform_images(digit, angle=float(a), return_ink_kept=True) for a in ROTATIONS))
print("your rotations equal capsedu's transform_images and torchvision's rotate ✅; ink kept in the "
      "frame: " + " ".join(f"{float(k):.0%}" for k in kept))

# %% [markdown]
# ## Use capsedu
#
# ### Accuracy against the rotation angle, live
#
# `capsedu.predict(model, images)` returns the predicted classes of any capsedu network: the
# longest capsule for the CapsNet, the most probable class for the CNN. On a class-balanced,
# seeded sample of the test split:

# %% mystnb={"image": {"alt": "Line chart of accuracy (%) against rotation from -60 to +60 degrees anticlockwise, on 2,000 test digits; CapsNet solid, CNN dashed. The two curves nearly coincide: about 99.5 % upright, about 98 % or more at plus or minus 15 degrees, then falling steeply, to 23.7 and 23.6 % at -60 degrees and 37.5 and 39.4 % at +60. Both fall faster for clockwise (negative) turns."}}
live_right = {name: [] for name in networks}  # network -> per angle, (N,) right or wrong per image
for angle in ROTATIONS:
    rotated = rotate(live.images, float(angle))
    for name, model in networks.items():
        live_right[name].append(capsedu.predict(model, rotated) == live.labels)
live_accuracy = {name: [float(right.float().mean()) for right in rights] for name, rights in live_right.items()}
fig, ax = plt.subplots(figsize=(6.4, 3.4))
for (name, values), style in zip(live_accuracy.items(), ("o-", "s--")):
    ax.plot(ROTATIONS, [100 * v for v in values], style, label=name)
ax.set(xlabel="rotation (degrees, anticlockwise)", ylabel="accuracy (%)", ylim=(0, 100),
       title=f"Rotated test digits ({len(live):,} images, measured now)")
ax.legend()
ax.grid(alpha=0.3)
plt.show()
print("angle    " + " ".join(f"{a:+6d}" for a in ROTATIONS))
for name, values in live_accuracy.items():
    print(f"{name:8s} " + " ".join(f"{100 * v:6.1f}" for v in values))
for k, angle in enumerate(ROTATIONS):  # both networks answered the same turned digits: paired
    print(f"{angle:+4d}°  " + str(capsedu.compare_paired("CapsNet", live_right["CapsNet"][k],
                                                         "CNN", live_right["CNN"][k], digits=1)))

# %% [markdown]
# Both networks lose accuracy fast beyond ±15°, and both do worse on clockwise (negative) turns
# of 30° or more than on anticlockwise ones. The two networks answered the **same** turned
# digits, so each gap is judged paired, as in lesson 07: only the digits one network gets right
# and the other wrong count, and McNemar's exact test asks whether their split could be a coin's.
# On this sample of 2,000 digits the paired test separates the two only at −45°, +30° and +60°:
# the CapsNet is ahead by 3.4 ± 0.8 points at −45° and 1.4 ± 0.6 at +30°, the CNN by 1.9 ± 0.8 at
# +60°. The other gaps are ties at this sample size; the full table below says which gaps hold on
# all 10,000 test images.
#
# ### The whole table: every transformation, every test image
#
# `benchmarks/robustness.py` measured both networks on all test images under every
# transformation: rotation, scale (about the centre), horizontal shear, and shifts beyond the two
# training pixels. It also measured an **affNIST-like** set: every test image under its own
# random affine transformation, drawn from ranges close to affNIST's (rotation ±20°, shear ±0.2,
# one scale 0.8–1.2 for both axes), plus a shift of up to two pixels
# (`capsedu.data.transforms.affnist_like`, seeded). The real affNIST differs: its images are
# 40 × 40 with "significant translations", while ours stay in the 28 × 28 frame the networks were
# trained on. (With real affNIST files you would crop or resize them to 28 × 28, wrap them in
# `capsedu.MNISTData` and call `capsedu.predict` the same way.)

# %%
robustness = study("robustness")
table, n_table = robustness["table"], robustness["test_data"]["images"]
print(f"{n_table:,} test images ({robustness['test_data']['source']})")
print(f"{'':24s} {'CapsNet':>8s} {'CNN':>8s} {'ink kept':>9s}")
for name, row in table.items():
    kept_text = f"{row['ink_kept']:9.1%}" if row["ink_kept"] is not None else ""
    print(f"{name:24s} {row['capsnet']:8.2%} {row['cnn']:8.2%} {kept_text}")


# %% mystnb={"image": {"alt": "Six panels on 10,000 transformed test digits, CapsNet solid blue with circles, CNN dashed vermillion with squares, each panel with its own zoomed scale and bars of plus or minus 2 standard errors. Rotation: overlapping curves fall from 99.55 % upright to 23 to 41 % at 60 degrees either way. Scale: both above 97 %, the CapsNet higher away from 1.0. Shear: within a few tenths of a point, the bars mostly overlapping. Beyond 3 pixels of shift the CNN holds up better (37 against 17 % at 6 pixels diagonally, the bars far smaller than the gap). Bars, CapsNet plain blue and CNN hatched vermillion, the paper's paler: affNIST-like here 98.1 and 98.3 %, a gap of one or two tenths of a point; the paper's affNIST 79 and 66 %."}}
def paired(row: dict) -> capsedu.PairedComparison:
    """The two networks compared on one row's images, from the per-image results the study kept."""
    return capsedu.compare_paired("CapsNet", capsedu.unpack_correct(row["correct"]["capsnet"], n_table),
                                  "CNN", capsedu.unpack_correct(row["correct"]["cnn"], n_table))


def family(kind: str, identity: float) -> tuple[list[float], list[dict]]:
    """Values of one family of transformations (with the clean test at ``identity``) and their
    rows of the table, sorted by value."""
    rows = [(row["value"], row) for row in table.values() if row["family"] == kind]
    if identity not in [value for value, _ in rows]:
        rows.append((identity, table["clean"]))
    rows.sort(key=lambda item: item[0])
    return [x for x, _ in rows], [row for _, row in rows]


families = {"rotation (degrees)": family("rotation", 0.0), "scale": family("scale", 1.0),
            "shear (x += shear · y)": family("shear", 0.0),
            "shift right (pixels)": family("shift right", 0.0),
            "shift right and down (pixels)": family("shift diagonal", 0.0)}
fig, axes = plt.subplots(2, 3, figsize=(11, 6.6), layout="constrained")
for ax, (label, (xs, rows)) in zip(axes.flat, families.items()):
    shown = []
    for key, name, style in (("capsnet", "CapsNet", "o-"), ("cnn", "CNN", "s--")):
        accuracy = [100 * row[key] for row in rows]
        two_se = [200 * capsedu.standard_error(row[key], n_table) for row in rows]  # ± 2 SE
        ax.errorbar(xs, accuracy, yerr=two_se, fmt=style, ms=4, capsize=3, label=name)
        shown += [a - e for a, e in zip(accuracy, two_se)] + [a + e for a, e in zip(accuracy, two_se)]
    margin = 0.06 * (max(shown) - min(shown)) + 0.1
    ax.set(xlabel=label, ylabel="accuracy (%)",  # each panel zoomed to its own range
           ylim=(max(0, min(shown) - margin), min(100, max(shown) + margin)))
    ax.grid(alpha=0.3)
axes[0, 0].legend()
ours = table["affNIST-like"]
bars = axes[1, 2].bar([0, 1, 3, 4], [100 * ours["capsnet"], 100 * ours["cnn"], 79, 66],
                      color=["C0", "C1", "C0", "C1"], hatch=["", "//", "", "//"])
for bar in bars[2:]:  # the paper's numbers paler
    bar.set_alpha(0.5)
axes[1, 2].set_xticks([0.5, 3.5], ["affNIST-like\n(measured here)", "affNIST, paper §5.2\n(other protocol)"])
axes[1, 2].bar_label(bars, fmt="%.1f", fontsize=10)
axes[1, 2].set(ylim=(0, 105), ylabel="accuracy (%)")
axes[1, 2].set_title("CapsNet blue, CNN vermillion hatched", fontsize=10)
fig.suptitle(f"Accuracy on transformed test digits ({n_table:,} images, ± 2 standard errors; "
             f"clean: CapsNet {table['clean']['capsnet']:.2%}, CNN {table['clean']['cnn']:.2%})")
plt.show()

# %% [markdown]
# Each panel has its own vertical scale, so the gaps on scaled and sheared digits are visible.
# The error bars are each network's own ± 2 standard errors. The two networks answered the
# same images, though, so whether they differ is a question for the *paired* gap: it has a
# smaller standard error, and bars that overlap can still hide a real difference. The gap and its
# paired error, per transformation (a bar that crosses zero is a tie):

# %% mystnb={"image": {"alt": "Five panels of the paired gap, CapsNet minus CNN in points, with 2 paired standard errors either way; hollow dots are ties, above zero the CapsNet leads. Rotation: CapsNet leads from -60 to +30 degrees except a tie upright (2.81 at -45), CNN leads at +45 and +60. Scale: CapsNet ahead except at 1.0, most at 1.3. Shear: a few tenths at most, partly ties. Shifts: ties up to 2 pixels, then CNN leads, largest at 5 pixels diagonally (24.52 points)."}}
fig, axes = plt.subplots(1, 5, figsize=(13, 3.2), layout="constrained")
for ax, (label, (xs, rows)) in zip(axes, families.items()):
    comparisons = [paired(row) for row in rows]
    for tie, face in ((False, None), (True, "white")):
        chosen = [(x, c) for x, c in zip(xs, comparisons) if c.tie == tie]
        if chosen:
            ax.errorbar([x for x, _ in chosen], [100 * c.gap for _, c in chosen],
                        yerr=[200 * c.standard_error for _, c in chosen], fmt="o", color="C2",
                        mfc=face, capsize=3, label="a tie" if tie else "a difference")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel=label)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("CapsNet minus CNN (points)")
axes[0].legend(fontsize=8)
fig.suptitle("The gap on the same images, ± 2 paired standard errors (above 0: the CapsNet ahead)")
plt.show()

# %%
for name, row in table.items():  # which network is ahead on each set, paired, and whether it is a tie
    print(f"{name:22s} {paired(row)}")
row = table["rotation +45°"]
print("\nthe +45° gap as if the two had answered different images (unpaired, wrong here):\n  "
      + capsedu.compare_accuracies("CapsNet", row["capsnet"], n_table, "CNN", row["cnn"], n_table))

# %% [markdown]
# **Neither network is more robust across the board.** Paired on the same 10,000 images:
#
# - **rotations**: the CapsNet is ahead at every angle from −60° to +30°, by 2.81 ± 0.36 points
#   at −45° and 1.39 ± 0.27 at +30°; the CNN is ahead at +45° (1.09 ± 0.37 points) and +60°
#   (3.07 ± 0.37);
# - **scales**: the CapsNet is ahead at every scale, most at 1.3 (1.47 ± 0.16 points);
# - **shears**: the CapsNet is ahead at −0.2 and −0.1, by a quarter of a point or less; the other
#   four shears are ties;
# - **shifts**: ties at 2 pixels, inside the training range; beyond it the CNN leads, up to
#   24.52 ± 0.50 points at 5 pixels diagonally;
# - **clean digits and the affNIST-like set**: ties (on the affNIST-like set the CNN is ahead by
#   0.14 ± 0.13 points, McNemar p = 0.33).
#
# Pairing changed five verdicts. The unpaired error counts the thousands of images both networks
# get right, or both wrong, as noise; the paired one uses only the images on which they
# disagree. At +45° the CNN is right on 752 images the CapsNet misses, the CapsNet on 643 the CNN
# misses: a real CNN lead, which the unpaired error (the last line) calls a tie. In the same way
# −15°, scales 0.8 and 1.1 and shear −0.1, unpaired ties, are small CapsNet leads. Those four sit
# near the threshold (McNemar p from 0.019 to 0.032), and over this many rows one or two such
# verdicts can come from chance alone.
#
# The CapsNet's leads are small: under three points on rotations, under one and a half on scales.
# The rotation panel is lopsided: the CapsNet leads on clockwise turns and small anticlockwise
# ones, the CNN on anticlockwise turns of 45° or more. Both networks also keep more of their
# accuracy on anticlockwise turns than on clockwise ones, which points to the digits
# (handwriting's slant) rather than to either architecture. The rotated digits keep all their ink
# in the frame (the last column of the table), so what the networks lose there is recognition, not
# pixels.
#
# Each network was trained once. The standard errors cover which test images were drawn, not how
# a second training run with another seed would differ. So the leads of under a point, most of
# the CapsNet's, are the ones another seed is most likely to change; the CNN's leads of several
# points on far-shifted digits are not.
#
# So this lesson does **not** reproduce the paper's 79 % against 66 %: on the affNIST-like set
# the two networks tie. What differs from the paper, each a reason the result may not transfer:
#
# - **data and training**: for this test the paper trained on all 60,000 digits, each placed at a
#   random position on a 40 × 40 canvas (shifts of up to 6 pixels). Both networks here learned
#   from 55,000 digits shifted by up to 2 pixels in their 28 × 28 frame.
# - **the test set**: the real affNIST puts each digit anywhere on a 40 × 40 canvas; ours keeps
#   the transformations milder and the digits in the 28 × 28 frame.
# - **the CNN**: ours pools (see *Build it*), which buys tolerance to small shifts, the rows where
#   it leads most. The paper's affNIST baseline was "a traditional convolutional network (with
#   MaxPooling and DropOut)" too, but the paper gives neither its size nor its training.
# - **one trained network each**, as said above.
#
# This is one data point at this size, data and training length: small CapsNet leads on turned
# and rescaled digits (in the paper's direction, far from its size), larger CNN leads on digits
# shifted beyond training, and a tie on the affNIST-like set. It is not a verdict on capsules. The
# section *The paper's own experiment* below brings the training data and the test set closer to
# the paper's protocol.
#
# The live measurement above used a sample; the table used every test image. They should agree
# within the sample's error (printed with the differences):

# %%
for name, key in (("CapsNet", "capsnet"), ("CNN", "cnn")):
    gaps = [100 * (live_accuracy[name][k] - table[f"rotation {a:+d}°"][key]) for k, a in enumerate(ROTATIONS)]
    print(f"{name}: live minus full table, per angle (points): " + " ".join(f"{g:+.1f}" for g in gaps))
print(f"one standard error on {len(live):,} images: {100 * capsedu.standard_error(0.9, len(live)):.1f} points "
      f"at 90 % accuracy, {100 * capsedu.standard_error(0.4, len(live)):.1f} points at 40 %")

# %% [markdown]
# ## The paper's own experiment: 40 × 40 translated training, an affNIST-like test
#
# Everything above used networks trained on 28 × 28 digits shifted by up to two pixels. Section 5.2
# of the paper trained "a CapsNet and a traditional convolutional network (with MaxPooling and
# DropOut) on a padded and translated MNIST training set, in which each example is an MNIST digit
# placed randomly on a black background of 40 × 40 pixels", and tested them on affNIST. The
# paper's CapsNet was under-trained, stopped early at 99.23 % on the expanded (40 × 40
# translated) test set; the paper's CNN had a similar number of parameters and a similar 99.22 %.
# Here is that protocol on the course's networks, with a test set that is still not the real
# affNIST:
#
# - **training**: the 55,000 training digits, each placed at a random position on a black
#   40 × 40 canvas (its 28 × 28 frame moved by up to 6 pixels each way, fresh every epoch). The
#   shipped `capsnet40` and `cnn40` are the course's CapsNet and CNN at 40 × 40 input, of about
#   the same size (the CapsNet's decoder counted), trained by the same recipe for 16 epochs (a
#   number not chosen on validation).
#   Each was trained a second time with another seed, to see how much a run varies.
# - **the expanded test**: the 10,000 test digits placed the same way (`capsedu.data.transforms.on_canvas`).
# - **the affNIST-like test**: `capsedu.data.transforms.affnist_like_40` makes one from the test
#   digits, seeded and identical on every machine. Each digit is rotated within ±20°, sheared
#   (x += s · y, |s| ≤ 0.2) and scaled independently in x and y by 0.8–1.25 (log-uniformly). Then
#   it moves to a random place on the canvas where all its ink stays on it, often further than the
#   training digits moved.
#
# These ranges are those that TensorFlow Federated's affNIST-like transform states as
# "approximately equivalent" to the affNIST page's (<https://www.cs.toronto.edu/~tijmen/affNIST/>).
# The translation follows the page's description, "significant translations", a digit "in the
# upper right corner" as well as "in the lower left corner"; that is where this test is least
# certain to match the real set. (It also differs from the 28 × 28 affNIST-like set above, whose
# digits stay in their frame.) `python -m coursetools.train_zoo capsnet40 cnn40` trains both
# networks again on any machine.

# %% mystnb={"image": {"alt": "Two rows of the same ten test digits, 0 to 9, on a 40 by 40 black canvas. Top row, expanded: each digit upright, moved by up to 6 pixels, as in training. Bottom row, affNIST-like: the same digits also rotated, sheared and rescaled (up to 20 degrees, shear 0.2, scale 0.8 to 1.25) and moved further, some to the edges, such as the 8 and 9 near the top and the 6 near the bottom."}}
from capsedu.data.transforms import AFFNIST_RANGES, affnist_like_40, on_canvas  # noqa: E402

networks40 = {"CapsNet": capsedu.pretrained("capsnet40"), "CNN": capsedu.pretrained("cnn40")}
for name, key in (("CapsNet", "capsnet40"), ("CNN", "cnn40")):
    parameters = sum(p.numel() for p in networks40[name].parameters())
    print(f"{name:8s} {parameters:>10,} parameters; {capsedu.shipped_summary(key)}")
print("affNIST-like ranges:", AFFNIST_RANGES)
expanded_live, affnist_live = on_canvas(live), affnist_like_40(live)
image_rows({"expanded": expanded_live.images[:10], "affNIST-like": affnist_live.images[:10]},
           title="the same ten test digits: placed as in training, and affNIST-like (40 × 40)")

# %% [markdown]
# Live, on the sample of the test split used above, paired:

# %%
for set_name, data in (("expanded", expanded_live), ("affNIST-like", affnist_live)):
    right = {name: capsedu.predict(model, data.images) == data.labels for name, model in networks40.items()}
    print(f"{set_name:13s} CapsNet {right['CapsNet'].float().mean():.2%}, CNN {right['CNN'].float().mean():.2%}; "
          + str(capsedu.compare_paired("CapsNet", right["CapsNet"], "CNN", right["CNN"])))

# %% [markdown]
# On every test image (`benchmarks/affnist_study.py` wrote `affnist40`), with the affNIST-like
# transformations also one at a time: the same random draws, the others switched off. "Centred"
# is each digit untransformed in the middle of the canvas. The last two rows limit the moves to
# the 6 pixels the training digits moved:

# %%
affnist40 = study("affnist40")
n40 = affnist40["images"]
print(f"{n40:,} test images ({affnist40['source']})")
for set_name, row in affnist40["accuracy"].items():
    same_images = capsedu.compare_paired("CapsNet", capsedu.unpack_correct(row["correct"]["capsnet40"], n40),
                                         "CNN", capsedu.unpack_correct(row["correct"]["cnn40"], n40))
    print(f"{set_name:32s} CapsNet {row['capsnet40']:7.2%}  CNN {row['cnn40']:7.2%}\n{'':4s}{same_images}")

# %% [markdown]
# Beside the published numbers (each from its source; "expanded" is the 40 × 40 translated test):

# %%
published = [  # (who, test set, CapsNet expanded, CNN expanded, CapsNet affNIST, CNN affNIST)
    ("Sabour et al. 2017, Section 5.2", "real affNIST", 99.23, 99.22, 79.0, 66.0),
    ("shinseung428/CapsNet_Tensorflow, README", "real affNIST", None, None, 75.89, 61.70),
]
ours = affnist40["accuracy"]
published.append(("this course (measured above)", "affNIST-like, moves anywhere",
                  100 * ours["expanded"]["capsnet40"], 100 * ours["expanded"]["cnn40"],
                  100 * ours["affNIST-like"]["capsnet40"], 100 * ours["affNIST-like"]["cnn40"]))
print(f"{'':40s} {'test set':29s} {'expanded':>15s}   {'affNIST':>13s}")
print(f"{'':40s} {'':29s} {'CapsNet':>7s} {'CNN':>7s}   {'CapsNet':>7s} {'CNN':>5s}")
for who, test_set, *values in published:
    print(f"{who:40s} {test_set:29s} " + " ".join("    n/a" if v is None else f"{v:7.2f}" for v in values))

# %% [markdown]
# The same question at every epoch, for both seeds of each network: each point is one epoch of
# training, its accuracy on the expanded validation digits (5,000 training digits the networks
# never learned from) against its accuracy on affNIST-like versions of them. These are validation
# digits, not test digits, so watching the curve chooses nothing on the test split. The dotted
# line marks the paper's stopping point, 99.23 %, on its test set, so only a landmark here:

# %% mystnb={"image": {"alt": "Connected points, one per epoch: expanded (40 by 40 translated) validation accuracy across, affNIST-like validation accuracy up; CapsNet blue circles on solid lines, CNN vermillion squares on dashed lines, seed 1 paler with hollow markers. All four curves climb up and to the right, and at any clean accuracy the CNN sits higher. They end near 99.1 to 99.5 % clean, the CNN at about 90.4 % affNIST-like and the CapsNet at 82.1 % in both seeds (the CNN ahead by 8.38 and 8.24 points); a dotted line marks the paper's stop, 99.23 %."}}
fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
for (net, runs), colour, style in zip(affnist40["runs"].items(), ("C0", "C1"), ("o-", "s--")):
    for run in runs:
        ax.plot([100 * a for a in run["validation"]], [100 * a for a in run["validation_affnist"]],
                style, color=colour, alpha=1.0 if run["seed"] == 0 else 0.45,
                markerfacecolor=colour if run["seed"] == 0 else "white",  # seed 1: paler, hollow
                label=f"{'CapsNet' if net == 'capsnet40' else 'CNN'}, seed {run['seed']}")
ax.axvline(99.23, color="grey", lw=0.8, ls=":")
ax.text(99.2, 56, "paper's stop\n(99.23 %)", ha="right", fontsize=9, color=MUTED_TEXT)
ax.set(xlabel="expanded validation accuracy (%)", ylabel="affNIST-like validation accuracy (%)",
       xlim=(93.5, 99.7), ylim=(55, 95), title="affNIST-like against clean accuracy, one point per epoch")
ax.grid(alpha=0.3)
ax.legend(loc="upper left")
plt.show()
last = {net: {run["seed"]: run for run in runs} for net, runs in affnist40["runs"].items()}
for net, by_seed in last.items():
    print(f"{net:10s} last epoch: " + "; ".join(
        f"seed {seed}: {run['validation'][-1]:.2%} expanded, {run['validation_affnist'][-1]:.2%} affNIST-like "
        f"(validation), {run['test_expanded']:.2%} expanded test" for seed, run in by_seed.items()))
for seed in sorted(set(last["capsnet40"]) & set(last["cnn40"])):
    gap = last["cnn40"][seed]["validation_affnist"][-1] - last["capsnet40"][seed]["validation_affnist"][-1]
    print(f"seed {seed}: CNN minus CapsNet on the affNIST-like validation digits {100 * gap:+.2f} points")

# %% [markdown]
# **With the paper's protocol, the CNN is the more robust network here, by a wide margin.** On the
# expanded test the two tie (30 images right only by the CapsNet, 36 only by the CNN), as the
# paper's pair did. On the affNIST-like set the CNN is ahead by 8.93 ± 0.36 points: it is right on
# 1,120 images the CapsNet misses, the CapsNet on 227 the CNN misses. The curves show it at every
# epoch: at any clean accuracy both reach, the CNN's points sit higher. A second training run
# with another seed lands within a tenth of a point of the first, for each network, on the
# affNIST-like validation digits (the last lines). So the gap is not the luck of one run, though
# two seeds per network only roughly show how much a run varies.
#
# The breakdown says where the gap comes from: **translation**. Moved anywhere on the canvas, with
# nothing else changed, the digits open a gap of 9.50 ± 0.34 points, about the whole affNIST-like
# gap. Sheared or rescaled alone, the two networks tie; rotated alone, the CNN leads by
# 0.39 ± 0.14 points. With the moves limited to the 6 pixels of training, translation alone is a
# tie, and all four transformations together leave a CNN lead of 0.46 ± 0.18 points, about the
# size of the rotation gap.
#
# This is the other side of the 28 × 28 result: there, too, the CNN led on digits shifted beyond
# the training range, and the CapsNet's small leads were on turns and scales. The one study in
# the table that tested on the real affNIST (shinseung428's README) found the paper's direction.
# What our setting cannot tell is whether the real affNIST's digits move as far as ours; if they
# stay nearer the centre, the last two rows of the breakdown are the better guide. It also uses the
# course's narrower CapsNet (8 primary capsule types, not 32), trained to its last epoch rather
# than stopped early. A likely reason for the translation gap, not tested here: the CapsNet
# learns a separate transformation matrix W for every primary capsule *position*. A digit moved
# where training rarely put ink sends its votes through matrices that training hardly shaped,
# while the CNN applies the same shared, pooled filters everywhere.

# %% [markdown]
# ## Explore
#
# ### The transform explorer
#
# Turn and shift one test digit with the sliders: the digit the networks see, the CapsNet's
# reconstruction from its longest capsule, and both networks' class scores (capsule lengths in
# blue, CNN probabilities in vermillion and hatched; the shaded column is the true class). Type
# another index to change the digit; **reset** puts the sliders back to 0.

# %% tags=["remove-output"]
explorer = transform_explorer(capsnet, cnn, test, index=seven)
explorer

# %% [markdown]
# The live explorer needs a running kernel. `explorer.frames()` computes its picture in advance
# for this digit at every 15° and every 4 pixels sideways, and lets two sliders choose among them
# in the browser, so the one below moves on the course website too:

# %%
explorer.frames()

# %% [markdown]
# The explorer can also be driven from code: here it is after turning the digit by 45° (the cell
# turns it back afterwards, so the live explorer above opens at 0), and a static strip of the same
# digit at every angle of the table:

# %% mystnb={"image": {"alt": "Explorer snapshot of a test 7 turned 45 degrees anticlockwise. Left: the tilted input. Middle: the CapsNet's reconstruction, a nearly upright 7 with a hooked bar. Right: bar chart of scores for classes 0 to 9, blue capsule lengths beside hatched vermillion CNN probabilities, true class 7 shaded; both networks say 7. Capsule 7 is the longest, about twice the next, while the CNN puts almost all its probability on 7."}}
explorer.angle.value = 45
picture = explorer.snapshot()
explorer.reset()
picture

# %% mystnb={"image": {"alt": "One test 7 turned from -60 to +60 degrees in 15-degree steps, the CapsNet's reconstruction below each; titles in dark vermillion mark wrong answers: both networks say 2 at -60 and -45, the CNN 0 at +60. Reconstructions are 2-like at -60 and -45, lean with the input from -30 to +15, then stay upright and hooked. Score curves below: both near zero at -60 and -45; the capsule's length falls from +30, the CNN's probability only at +60, to zero."}}
transform_strip(capsnet, cnn, test.images[seven], 7, list(ROTATIONS))

# %% [markdown]
# The text reads the official test split's first 7 (test image 0); offline, your 7 is another
# drawing, turned the same way, and the angles where it is lost can differ.
# This 7 is recognised by the CapsNet from −30° to +60° and by the CNN from −30° to +45°; at −45°
# and −60° both call it a 2, and at +60° the CNN calls it a 0. At −30° both scores are already far
# below their upright values, the CNN's probability even lower than the capsule's length (the
# curves under the strip). Note the reconstructions. From −30° to +15° capsule 7 redraws a 7 that
# leans roughly as the input does. From +30° on it redraws a nearly **upright** 7 whose bar bends
# down into a hook at the left, blurred at +60°: there it no longer turns with the input. Its
# length starts to fall at +30°; the CNN's probability falls only at +60°, to about zero.
#
# ### Equivariance on the trained networks
#
# Lesson 00 drew a capsule whose vector turns with the digit while its length stays. Does the
# trained CapsNet do that? Rotate one digit in 5° steps, follow the capsule of its class — its 16
# pose numbers, its length, its reconstruction — and, for the CNN, the 192 features of its last
# hidden layer and its probability for the class.

# %% mystnb={"image": {"alt": "First, line charts against rotation, -45 to +45 degrees. Left: capsule 7's 16 pose coordinates move most from -45 to -20, then drift smoothly without jumps. Right: the capsule's length rises from near 0 to about 0.9 by -20 and sinks to about 0.6 at +45; the CNN's probability stays near 1 from -20 on. Second, input and reconstruction every 15 degrees: a blur at -45, a 7 leaning with the input up to +15, then upright and hooked."}}
angles = list(range(-45, 50, 5))
label = int(test.labels[seven])
trajectory = capsule_trajectory(capsnet, test.images[seven], label, angles=angles)
features, probabilities = feature_trajectory(cnn, test.images[seven], angles=angles)


def pose_and_presence(steps, path, cnn_probabilities, xlabel):
    """The capsule's 16 coordinates, and its length beside the CNN's probability, per step."""
    fig, (ax_pose, ax_len) = plt.subplots(1, 2, figsize=(12, 3.4), width_ratios=[1.6, 1])
    ax_pose.plot(steps, path.poses, lw=1, color=BLUE)  # one colour: the 16 together are the pose
    ax_pose.set(xlabel=xlabel, ylabel="pose coordinate", title=f"The 16 coordinates of capsule {label}")
    ax_len.plot(steps, path.lengths[:, label], "o-", label=f"CapsNet: length of capsule {label}")
    ax_len.plot(steps, cnn_probabilities[:, label], "s--", label=f"CNN: probability of {label}")
    ax_len.set(xlabel=xlabel, ylim=(0, 1.05), title="Presence of the true class")
    return fig, ax_len


fig, ax_len = pose_and_presence(angles, trajectory, probabilities, "rotation (degrees)")
ax_len.legend(fontsize=8)
fig.tight_layout()
plt.show()
step = 3  # every 15°
image_rows({"input": trajectory.images[::step], "CapsNet redraws": trajectory.reconstructions[::step, None]},
           column_titles=[f"{a:+d}°" for a in angles[::step]],
           title=f"The reconstruction from capsule {label} while the digit turns")

# %% [markdown]
# The two paths side by side, each projected on its own two principal directions: a 2-D picture
# of a 16-D and a 192-D path, coloured from −45° to +45°. The panel titles say how smooth each is:
# the largest step between neighbouring angles, relative to the whole path's extent (0 would be
# perfectly gradual; a path that jumps has steps close to 1).

# %% mystnb={"image": {"alt": "Two 2-D projections, each on its own principal axes, of the path a test 7 traces while turned from -45 to +45 degrees, dots coloured by angle from purple to yellow. Left, capsule 7's 16-D pose: a smooth arc whose widest gaps are at the purple start, where the capsule switches on. Right, the CNN's 192-D last hidden layer: a winding loop with long jumps around upright and near +30 degrees. The titles give similar largest-step-to-extent ratios for the two."}}
paths = {"CapsNet: capsule pose (16-D)": trajectory.poses,
         f"CNN: last hidden layer ({features.shape[1]}-D)": features}
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for ax, (name, path) in zip(axes, paths.items()):
    flat = projection_2d(path)  # (A, 2)
    ax.plot(flat[:, 0], flat[:, 1], color="0.7", lw=1)
    shown = ax.scatter(flat[:, 0], flat[:, 1], c=angles, cmap="viridis", s=28)
    ax.set(title=f"{name}\nlargest step / extent = {smoothness(path):.2f}", xticks=[], yticks=[])
fig.colorbar(shown, ax=axes, label="rotation (degrees)")
plt.show()

# %% [markdown]
# From −20° to +45°, where the capsule is present, its 16 coordinates drift steadily as the 7
# turns, with no jump, several of them by a good part of their range. Their biggest move is
# between −45° and −20°, where the capsule switches on (its length rises from near zero): that is
# presence, not pose. The reconstruction turns with this digit only part of the way, a leaning 7
# up to +15° and a nearly upright, hooked 7 from +30° on. One digit cannot say whether that is
# typical: Exercise 2 measures it on the whole sample, and Exercise 1 asks whether the 16 numbers
# keep the angle better than the CNN's features. In the projections the capsule's largest steps
# are where it switches on, the CNN's around the upright digit and near +30°; the two largest steps
# are about the same fraction of their paths' extents. The paper's Figure 4 found dimensions for
# skew, width and stroke thickness, variations that MNIST itself contains.
#
# ### Shifting instead of turning
#
# Both networks were trained with shifts of up to two pixels, so here the question is what happens
# inside and beyond that range. The same digit, moved from 6 pixels left to 6 pixels right:

# %% mystnb={"image": {"alt": "First, line charts as the test 7 shifts from 6 pixels left to 6 right. Left: capsule 7's 16 pose coordinates drift gradually, no jumps (largest step 0.16 of the path's extent; CNN features 0.31). Right: the capsule's length is highest within the 2 pixels either way seen in training (shaded) and dips to about 0.8 at 6; the CNN's probability stays at 1. Second: the reconstruction follows the digit, less far, blurring most at +6 pixels."}}
shifts = [(float(dx), 0.0) for dx in range(-6, 7)]
moves = [dx for dx, _ in shifts]
shifted = capsule_trajectory(capsnet, test.images[seven], label, shifts=shifts)
shifted_features, shifted_probabilities = feature_trajectory(cnn, test.images[seven], shifts=shifts)
fig, ax_len = pose_and_presence(moves, shifted, shifted_probabilities, "shift to the right (pixels)")
ax_len.axvspan(-2, 2, color="0.9", zorder=0, label="shifts seen in training")
ax_len.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"largest step / extent: capsule pose {smoothness(shifted.poses):.2f}, "
      f"CNN features {smoothness(shifted_features):.2f}")
image_rows({"input": shifted.images[::2], "CapsNet redraws": shifted.reconstructions[::2, None]},
           column_titles=[f"{dx:+.0f} px" for dx in moves[::2]],
           title=f"The reconstruction from capsule {label} while the digit moves")

# %% [markdown]
# Shifts tell a different story from turns. The 16 coordinates drift gradually across the whole
# range, with no jump (largest step 0.16 of the path's extent, against 0.31 for the CNN's
# features). The reconstruction moves with the digit, though less far than the input, blurring
# most at +6 px. The capsule stays present, somewhat shorter at ±6 px than within the trained
# ±2 px, while the CNN's probability stays near 1 throughout. Training did show this variation
# (two-pixel shifts, and digits that sit off-centre in MNIST itself), and for it this capsule's
# pose behaves as lesson 00 drew it: it follows the digit, smoothly.
#
# ### Lesson 00's claims, on trained networks
#
# Lesson 00 made three claims. Each can be measured on the shipped networks over the live sample:
#
# 1. **Length is presence, whatever the pose**: the length of the true class's capsule should stay
#    long while a digit turns, as long as it is still recognisable.
# 2. **Direction is pose**: the pose vector's direction should turn more the more the digit turns
#    (equivariance), not jump about. The CNN's hidden features are the comparison: they change
#    with the pose too, so what matters is how the two compare.
# 3. **Pooling forgets where the parts are**: a network that only pools should still see the digit
#    when its parts are rearranged; a CapsNet, whose parts must agree on the whole's pose, should
#    not. We rearrange the parts crudely: swap the top and bottom halves of each digit.

# %% mystnb={"image": {"alt": "A row of ten test digits, 0 to 9, each with its top and bottom halves swapped, so the lower part of each stroke sits above the upper part and most no longer look like digits. Only about a tenth of such swapped digits are still called their class: 10.5 % by the CapsNet and 10.1 % by the CNN, a tie."}}
def batched(fn, images: torch.Tensor, size: int = 250) -> torch.Tensor:
    """``fn`` applied to ``images`` in batches, without gradients (a few hundred MB at a time)."""
    with torch.no_grad():
        return torch.cat([fn(batch) for batch in images.split(size)])


true = torch.arange(len(live)), live.labels  # index of each image's true class
scores = {}  # angle -> network -> (true-class score (N,), right (N,))
for angle in (0, 15, 30, 45):
    rotated = rotate(live.images, float(angle))
    scores[angle] = {name: (s[true], s.argmax(dim=1) == live.labels)
                     for name, s in (("CapsNet", batched(capsnet.class_scores, rotated)),  # lengths
                                     ("CNN", batched(cnn.class_scores, rotated)))}  # probabilities
print("claim 1: the true class's score on the rotated digits each network still classifies right,")
print("         as a fraction of its value on the upright digits (a length and a probability are")
print("         different quantities: compare how each falls, not their values)")
for angle, by_network in scores.items():
    cells = []
    for name, (score, right) in by_network.items():
        upright = scores[0][name][0][right].mean()  # the same digits, upright
        cells.append(f"{name} {score[right].mean() / upright:.3f} of upright ({int(right.sum()):,} right)")
    print(f"  {angle:+3d}°: " + "   ".join(cells))

swapped = torch.cat([live.images[:, :, 14:], live.images[:, :, :14]], dim=2)  # halves exchanged
print("claim 3: digits with their top and bottom halves swapped, still called their class:")
still_called = {}  # network -> (N,) whether each swapped digit is still called its class
for name, model in networks.items():
    same = still_called[name] = capsedu.predict(model, swapped) == live.labels
    top = batched(model.class_scores, swapped).max(dim=1).values.mean()
    print(f"  {name:8s} {same.float().mean():6.1%} of them; mean top score {top:.3f} (clean: "
          f"{(capsedu.predict(model, live.images) == live.labels).float().mean():.1%})")
print("  " + str(capsedu.compare_paired("CapsNet", still_called["CapsNet"], "CNN", still_called["CNN"])))
image_rows({"swapped": swapped[:10]}, title="Top and bottom halves swapped")

# %% [markdown]
# Measured over 2,000 digits and with rotation, claims 1 and 3 do not come out as lesson 00 drew
# them (claim 2 is left to the exercises):
#
# 1. **Length is not pose-invariant here.** On the digits each network still classifies right,
#    the true class's capsule keeps 0.977 of its upright length at 15°, 0.897 at 30° and 0.816 at
#    45°, while the CNN's probability keeps 0.992, 0.968 and 0.930. The capsule's length falls
#    proportionally more than the CNN's probability.
# 2. **Does the pose keep the angle?** Exercise 1 asks linear probes, which put the capsules and
#    the CNN's 192 features the same question; Exercise 2 asks the decoder.
# 3. **Both networks reject rearranged parts about equally**: 10.5 % (CapsNet) and 10.1 % (CNN) of
#    the swapped digits are still called their class. Paired, that is a tie: 140 swapped digits are still called their class only by the
#    CapsNet, 132 only by the CNN. This CNN's pooling (two 2 × 2
#    stages) does not forget where the parts are: its fully connected layers still see the layout.
#    It is more confident on these mostly misclassified digits (mean top score 0.848, a
#    probability, against 0.568 for the CapsNet's longest capsule, a length): different
#    quantities, so only a loose comparison.
#
# Lesson 00's pictures explain the *idea*; whether a trained network realises it depends on its
# size, data and training. Here the length is not pose-invariant and both networks reject
# rearranged parts alike; whether the pose keeps the angle (claim 2) is what the two exercises
# measure.
#
# ### Ideas to try
#
# - In the explorer, find the angle at which each network first gets a digit wrong; try a 1, a 6
#   and a 9 (what happens to a 6 at ±90°?).
# - Scale and shear are in the table but not in the explorer: plot a digit's capsule pose against
#   `scale` with `capsule_trajectory`-style code of your own (`transform_images(x, scale=s)`).
# - Retrain both networks with larger training shifts (the shipped recipes with `max_shift=4`,
#   `capsedu.zoo.train.train_recipe`; each takes about as long as the training time printed at the
#   top of this lesson) and measure the shift rows again.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: does the pose keep the angle? A probe per class
#
# Claim 2 of lesson 00: a capsule's pose should *follow* a turn of the digit (equivariance)
# where pooled features forget it. Comparing capsule numbers with 192 CNN features directly
# means little (different spaces, different scales). So ask each representation the same
# question: how well does a straight line read the angle off it? That is what `read_angle(train_features,
# train_angles, test_features, test_angles)` (`capsedu.explore.probes.linear_probe_error`)
# measures. It fits a least-squares linear map with a bias from features (N, F) to angles (N,)
# on the training examples, and returns its root-mean-square error, in degrees, on the test examples. Low error:
# the representation keeps the angle. About 26° (the spread of angles uniform in ±45°): it forgot
# it.

# %%
read_angle = linear_probe_error

# %% [markdown]
# Now the comparison. Every digit of the sample is turned by its own random angle in ±45°, and
# three representations of it are read:
#
# - all ten of the CapsNet's capsules, 160 numbers (161 weights with the bias);
# - the capsule of the true class alone, 16 numbers;
# - the CNN's last hidden layer, 192 numbers (193 weights).
#
# The first and the last are the like-for-like pair: each network's whole representation, read
# without knowing the class. The probe is fitted on half of the digits and tested on the other
# half, and ten random halvings show how much one split's error moves.

# %%
generator = torch.Generator().manual_seed(5)
spin = 90 * torch.rand(len(live), generator=generator) - 45  # (N,) one angle per digit
spun = torch.cat([rotate(live.images[k:k + 1], float(a)) for k, a in enumerate(spin)])
capsules = batched(lambda b: capsnet(b).capsules, spun)  # (N, J, D_out)
all_capsules, true_capsule = "CapsNet, all 10 capsules", "CapsNet, the true class's capsule"
cnn_features = "CNN, last hidden layer"
views = {all_capsules: capsules.flatten(1),  # (N, J * D_out)
         true_capsule: capsules[true],  # (N, D_out)
         cnn_features: batched(cnn.features, spun)}  # (N, hidden)
halvings = [torch.randperm(len(live), generator=generator) for _ in range(10)]  # random splits
half = len(live) // 2


def over_splits(error_of) -> torch.Tensor:
    """``error_of(fit, held)`` on each random halving: (S,) probe errors in degrees."""
    return torch.tensor([error_of(order[:half], order[half:]) for order in halvings])


print(f"angles uniform in ±45°: their standard deviation is {spin.std():.1f}° (a probe that reads nothing)")
errors = {}
for name, view in views.items():
    errors[name] = over_splits(lambda fit, held, v=view: read_angle(v[fit], spin[fit], v[held], spin[held]))
    print(f"  {name:34s} {view.shape[1]:4d}-D: probe error {errors[name].mean():5.1f}° "
          f"± {errors[name].std():.1f}° (mean ± standard deviation over {len(halvings)} splits)")
gap = errors[cnn_features] - errors[all_capsules]  # (S,) on the same splits: paired
print(f"CNN minus all capsules, split by split: {gap.mean():+.1f}° ± {gap.std():.1f}°; "
      f"the capsules read the angle better on {int((gap > 0).sum())} of {len(gap)} splits")

# %% [markdown]
# The splits share digits, so the spread between them shows how much one split's number moves;
# it is not the error of the mean. Both networks were trained once, so a second training run could
# move each error too.
#
# One straight line read every class's capsule in the second line above. Lesson 07 found that a
# pose dimension means different things in different classes. So read each class the way it
# codes the turn: one probe per class.
#
# Write `per_class_error(capsules, labels, angles, fit, held)`. Its inputs are the digits'
# capsules (N, J, D), their labels and angles (N,), and two index tensors: the digits to fit on
# and the digits held out. Fit one probe (`read_angle`) per class, on the pose of the class's own
# capsule (the capsule of the digit's label) for that class's digits among `fit`. Test it on the
# class's digits among `held`. Return the root-mean-square error, in degrees, over all the
# held-out digits together. Leave out a class with no digit to fit on, or none held out. Before running the
# cell after the check, predict: will ten probes, each reading only its class's 16-D capsule (17
# weights each, 170 in all), read the angle better or worse than the one shared probe?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def per_class_error(capsules: torch.Tensor, labels: torch.Tensor, angles: torch.Tensor,
                    fit: torch.Tensor, held: torch.Tensor) -> float:
    """RMS error (degrees) over the held-out digits of one probe per class on the class's own capsule."""
    ### BEGIN SOLUTION
    pose = capsules[torch.arange(len(labels)), labels]  # (N, D): each digit's own class capsule
    squared, count = 0.0, 0
    for k in labels.unique():
        f, h = fit[labels[fit] == k], held[labels[held] == k]
        if len(f) and len(h):
            squared += read_angle(pose[f], angles[f], pose[h], angles[h]) ** 2 * len(h)
            count += len(h)
    return (squared / count) ** 0.5
    ### END SOLUTION


# %% tags=["nbval-check-output"]
check_class_probe(per_class_error);

# %%
class_error = yours_or_reference(check_class_probe, per_class_error, class_probe_error, name="per_class_error")
errors["one probe per class"] = over_splits(lambda fit, held: class_error(capsules, live.labels, spin, fit, held))
print(f"  {'CapsNet, one probe per class':34s} 10x16: probe error {errors['one probe per class'].mean():5.1f}° "
      f"± {errors['one probe per class'].std():.1f}°")

# %% [markdown]
# Read as a whole, the CapsNet's capsules keep the angle better than the CNN's features, with
# fewer weights: the probe's error is 14.4° on all ten capsules against 20.6° on the CNN's 192
# features. The capsules are ahead on every one of the ten splits, by 6.2° on average, far more
# than a split moves either error. Both read far better than a probe that reads nothing (26.1°).
#
# The true class's capsule alone, read by one shared probe, does worse than the CNN (23.7°). Each
# class's capsule codes the turn in its own dimensions (lesson 07 saw dimension 14 thicken the 4
# and thin the 7), so one straight line for all ten classes mixes ten codes. Ten probes, one per
# class, recover most of the angle (15.7°). The 160-D probe can do the same without being told
# the class: only the winning capsule is long, so its weights can learn one reading per class.
# Read the way it is organised, the pose keeps more of the angle than the CNN's last hidden layer.
# This is one trained network of each; the spread between splits says nothing about another
# training run.

# %% [markdown]
# ### Exercise 2: what does the capsule redraw?
#
# The decoder redraws a digit from its winning capsule. If the pose kept the angle, a turned
# digit would come back turned; if the capsule forgot it, upright. Measure it: write
# `orientation(images)` returning, for each (N, 1, H, W) image, the angle in degrees
# (anticlockwise as you look at it, in (−90°, 90°]) of the principal axis of its ink. Compute it
# from the second moments of the ink about its centre of mass, as lesson 00's stroke capsules
# read theirs. Before running the cell after the check, predict: for digits turned by 30°, will
# the reconstructions' axes turn by about 30°, by about 0°, or in between?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def orientation(images: torch.Tensor) -> torch.Tensor:
    """Principal-axis angle (degrees, anticlockwise) of each image's ink, (N, 1, H, W) -> (N,)."""
    ### BEGIN SOLUTION
    ink = images[:, 0]  # (N, H, W)
    rows = torch.arange(ink.shape[1], dtype=ink.dtype)[:, None]  # (H, 1)
    cols = torch.arange(ink.shape[2], dtype=ink.dtype)  # (W,)
    mass = ink.sum(dim=(1, 2))  # (N,)
    x = cols - ((ink * cols).sum(dim=(1, 2)) / mass)[:, None, None]  # (N, 1, W) centred
    y = -(rows - ((ink * rows).sum(dim=(1, 2)) / mass)[:, None, None])  # (N, H, 1) centred, up
    mu20, mu02, mu11 = (ink * x * x).sum(dim=(1, 2)), (ink * y * y).sum(dim=(1, 2)), (ink * x * y).sum(dim=(1, 2))
    return torch.rad2deg(0.5 * torch.atan2(2 * mu11, mu20 - mu02))
    ### END SOLUTION


# %% tags=["nbval-check-output"]
check_orientation(orientation);

# %% tags=["nbval-check-output"]
axis_angle = yours_or_reference(check_orientation, orientation, reference_orientation, name="orientation")

# %% [markdown]
# The first line, digits not turned at all, shows the measurement's own spread: how far a
# reconstruction's axis sits from its input's without any turn.

# %%
turn = torch.tensor([0.0, -30.0, -15.0, 15.0, 30.0])
upright = axis_angle(live.images)  # (N,)
for angle in turn.tolist():
    rotated = rotate(live.images, angle)
    redrawn = batched(lambda b: capsnet(b).reconstruction, rotated)  # masked by the longest capsule
    moved = (axis_angle(redrawn) - upright + 90) % 180 - 90  # (N,) the reconstruction's turn
    seen = ((axis_angle(rotated) - upright + 90) % 180 - 90).median()
    low, middle, high = torch.quantile(moved, torch.tensor([0.25, 0.5, 0.75]))
    print(f"digits turned {angle:+3.0f}°: the inputs' axes turn {seen:+.1f}° (median), the "
          f"reconstructions' {middle:+.1f}° (median; half of the digits between {low:+.1f}° and {high:+.1f}°)")

# %% [markdown]
# The reconstructions turn with the inputs. Without a turn, a reconstruction's axis sits within a
# few degrees of its input's (half of the digits between −2.8° and +2.1°): that is the
# measurement's own spread. Turned digits come back turned by nearly the full turn, clockwise or
# anticlockwise: by +14.9° and +29.7° (medians) for turns of +15° and +30°, and likewise for the
# clockwise turns (the lines before). The spread grows
# with the turn: at +30° half of the digits lie between +23.9° and +34.9°, so some come back
# turned less, like the 7 followed above, which came back nearly upright. The decoder sees only
# the masked winning capsule, never the image, so those 16 numbers carry the turn. Within ±30°,
# then, the pose is equivariant for the typical digit, as lesson 00 drew it, and Exercise 1 found
# the same from the other side.

# %% [markdown]
# ## Summary
#
# - The two networks of each pair learned from the same images by the same recipe and have about
#   the same number of parameters, but only counting the CapsNet's decoder: to classify, the
#   CapsNet uses under a third of the CNN's parameters.
# - `affine_grid` and `grid_sample` turn a batch of digits about their centre. The grid says where
#   each output pixel reads the input, so it holds the inverse turn. `capsedu.data.transforms`
#   also scales, shears and shifts on a 40 × 40 canvas, which measures the ink a 28 × 28 frame
#   keeps, and builds affNIST-like sets (not the real affNIST).
# - Two networks measured on the same images are compared **paired**: only the images on which
#   they disagree count. Pairing turned several ties into small differences here, among them a
#   CNN lead at +45°.
# - On 28 × 28 digits the CapsNet leads a little on turned and rescaled digits, the CNN on large
#   anticlockwise turns and clearly on digits shifted beyond training; the affNIST-like set is a
#   tie. Each network was trained once, so the smallest leads are the least certain.
# - With the paper's own protocol (40 × 40 translated training, an affNIST-like test), the CNN is
#   the more robust network here, by far more than a second seed moves either network. Nearly all
#   of the gap comes from moves beyond the training range.
# - Within ±30° the capsule's pose follows a turn of the digit (equivariance): a linear probe
#   reads the angle better off all ten capsules than off the CNN's features, on every split, and
#   the decoder redraws turned digits turned. The capsule's *length* is not pose-invariant,
#   though: it falls more with the turn than the CNN's probability.
# - Report what you measure, with the protocol beside it, including when it disagrees with the
#   paper.

# %% [markdown]
# ## Self-check
#
# A few questions on what you measured (not graded; each answer explains itself):

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("08")

# %% [markdown]
# ## What's next
#
# Lesson 09 puts two digits on top of each other (MultiMNIST, Section 6 of the paper). There the
# CapsNet's per-class capsules and its reconstructions of each digit separately are the point,
# and the same CNN, with a sigmoid output per class (`CNNConfig(multi_label=True)`), is its
# baseline again.
