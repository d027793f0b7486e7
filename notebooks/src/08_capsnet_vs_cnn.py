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
# # Lesson 08 — CapsNet against a CNN: transformed digits and equivariance
#
# Lesson 00 promised that capsules keep the *pose* of what they detect where a CNN's pooling throws
# it away, and that this should help a CapsNet recognise digits in poses it never saw. Section 5.2
# of Sabour et al. (2017) tests it: trained only on shifted MNIST digits, their CapsNet reached
# **79 %** on affNIST (affine-transformed MNIST digits) against **66 %** for a CNN that was as
# accurate on the clean test set (the paper gives 99.23 % and 99.22 %). Re-implementations do not
# always reproduce that gap. In this lesson you measure it yourself, on the two networks shipped
# with the course — a CapsNet and a CNN of the same size, trained by the same recipe on the same
# 55,000 digits and, like the paper's pair, equally accurate on the clean test split (a tie,
# printed below) — and then look at *how* each network's internal representation moves when a digit
# turns. Whatever the numbers say, the lesson reports them as they are.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - describe the **baseline CNN** (convolutions, max-pooling, fully connected layers, dropout,
#   softmax) and why a fair comparison needs the same size, data and training recipe;
# - **turn digits yourself** with `affine_grid` and `grid_sample`, and build transformed test
#   sets — rotated, scaled, sheared, shifted, and an affNIST-like set — and say how they differ
#   from the real affNIST;
# - measure and plot **accuracy per transformation** for both networks, and read the result
#   against the paper's, knowing which protocol differs;
# - test **equivariance** on trained networks: follow the winning capsule's pose vector, its
#   length and its reconstruction while a digit turns, and compare with the CNN's features;
# - run the paper's **own robustness protocol** (40 × 40 translated training, an affNIST-like
#   test) and read its per-transformation breakdown and its accuracy-against-accuracy curve;
# - use the **transform explorer** (`capsedu.explore.transform_explorer`).
#
# ## Prerequisites and time
#
# Lessons 00 (pose and pooling), 05 (the decoder), 06 (training, the shipped recipe) and 07
# (exploring capsules). About an hour, of which the computations take a few minutes on two CPU
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
from capsedu.course.checks.robustness import (check_orientation, check_probe_error, check_rotate,
                                              reference_orientation, reference_probe_error)
from capsedu.data.transforms import ROTATIONS, transform_images
from capsedu.explore.equivariance import (capsule_trajectory, feature_trajectory, projection_2d,
                                          smoothness)
from capsedu.explore.figures import image_rows
from capsedu.explore.transform_explorer import transform_explorer, transform_strip
from capsedu.zoo.shipped import study

# %%
capsedu.set_seed(0)
capsnet = capsedu.pretrained("capsnet")  # the default: capsedu.pretrained() is the same network
cnn = capsedu.pretrained("cnn")
networks = {"CapsNet": capsnet, "CNN": cnn}
for name, key in (("CapsNet", "capsnet"), ("CNN", "cnn")):
    parameters = sum(p.numel() for p in networks[name].parameters())
    print(f"{name:8s} {parameters:>10,} parameters; {capsedu.shipped_summary(key)}")
n_test = capsedu.pretrained_metrics("capsnet")["test_data"]["images"]
print("on the test split:", capsedu.compare_accuracies("CapsNet", capsedu.pretrained_metrics("capsnet")["test_accuracy"], n_test,
                                                       "CNN", capsedu.pretrained_metrics("cnn")["test_accuracy"], n_test))

test = capsedu.load_mnist("test")
n_live = capsedu.choose(learner=2000, fast=200)  # test images for the live measurements
live = test.subset(min(n_live, len(test)), seed=0)  # class-balanced, seeded

# %% [markdown]
# ## Build it
#
# ### A CNN in the paper's style, of the CapsNet's size
#
# The paper's baseline is "a standard CNN with three convolutional layers of 256, 256, 128
# channels. Each has 5x5 kernels and stride of 1. The last convolutional layers are followed by two
# fully connected layers of size 328, 192. The last fully connected layer is connected with dropout
# to a 10 class softmax layer with cross entropy loss" (`capsedu.CNNConfig.paper()` builds it). The
# paper counts 35.4 M parameters in that baseline, against the paper's 8.2 M for its CapsNet. That
# count implies no pooling: with the paper's layer sizes, the first fully connected layer alone
# holds 28 · 28 · 128 · 328 = 32.9 M weights. The course's CNN keeps the structure, with changes
# (printed below): far narrower convolutions (32, 64, 64 channels), a *wider* first fully connected
# layer (512 instead of 328), dropout after both hidden layers, and 2 × 2 max-pooling after the
# first two convolutions, which is how it fits the shipped CPU CapsNet's size: within 10 % of its parameters **including its decoder**,
# so that neither network wins by being bigger. (Pooling also makes a CNN more tolerant of small
# shifts — keep that in mind when you read the results.) Both were trained by the same recipe — the
# same 55,000 training images, the same two-pixel random shifts, the same epochs of Adam with a
# one-cycle learning rate; only the network differs:

# %%
print(cnn)
for key in ("capsnet", "cnn"):
    recipe = capsedu.pretrained_metrics(key)["recipe"]  # the recipe that trained the shipped weights
    same = {k: v for k, v in recipe.items() if k not in ("kind", "config", "objective", "pairs")}
    print(f"{key}: {same}")

# %% [markdown]
# Where the parameters are: the CapsNet spends most of its on the decoder, which only helps
# training (and draws reconstructions); the CNN spends most of its on the first fully connected
# layer.

# %%
def parameters_by_part(model: torch.nn.Module) -> dict[str, int]:
    """Parameter counts per top-level child module."""
    return {name: sum(p.numel() for p in child.parameters()) for name, child in model.named_children()}


for name, model in networks.items():
    parts = parameters_by_part(model)
    print(f"{name}: " + ", ".join(f"{part} {count:,}" for part, count in parts.items()))

# %% [markdown]
# Both shipped networks were measured on the validation split (5,000 training images they never
# learned from) after every epoch of their training; the test split was used once, at the end.
# The histories are in their metrics.

# %%
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
# each side, affNIST's size): the networks see its central 28 × 28 — exactly what turning the
# 28 × 28 image gives — and the canvas tells how much of the digit's ink that frame keeps.

# %%
digit = test.images[:1]  # (1, 1, 28, 28), a 7
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

# %%
live_accuracy = {name: [] for name in networks}
for angle in ROTATIONS:
    rotated = rotate(live.images, float(angle))
    for name, model in networks.items():
        live_accuracy[name].append(float((capsedu.predict(model, rotated) == live.labels).float().mean()))
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

# %% [markdown]
# Both networks lose accuracy fast beyond ±15°: at −45° and +45° the CapsNet keeps 52.0 % and
# 62.5 % of these 2,000 digits, the CNN 48.6 % and 63.0 %. On this sample the two stay within a
# few points of each other at every angle — gaps that 2,000 digits cannot tell from chance; the
# full table below says which are real — and both networks do worse on clockwise (negative) turns
# of 30° or more than on anticlockwise ones.
#
# ### The whole table: every transformation, every test image
#
# `benchmarks/robustness.py` measured both networks on all test images under every
# transformation — rotation, scale (about the centre), horizontal shear, shifts beyond the two
# training pixels — and on an **affNIST-like** set: every test image under its own random affine
# transformation drawn from ranges close to affNIST's (rotation ±20°, shear ±0.2, one scale
# 0.8–1.2 for both axes) plus a shift of up to two pixels (`capsedu.data.transforms.affnist_like`,
# seeded). It differs from the real affNIST: affNIST's images are 40 × 40 with "significant
# translations", while ours stay in the 28 × 28 frame the networks were trained on. (With real affNIST files you
# would crop or resize them to 28 × 28, wrap them in `capsedu.MNISTData` and call
# `capsedu.predict` the same way.)

# %%
robustness = study("robustness")
table = robustness["table"]
print(f"{robustness['test_data']['images']:,} test images ({robustness['test_data']['source']})")
print(f"{'':24s} {'CapsNet':>8s} {'CNN':>8s} {'ink kept':>9s}")
for name, row in table.items():
    kept_text = f"{row['ink_kept']:9.1%}" if row["ink_kept"] is not None else ""
    print(f"{name:24s} {row['capsnet']:8.2%} {row['cnn']:8.2%} {kept_text}")


# %%
def family(kind: str, identity: float) -> tuple[list[float], list[float], list[float]]:
    """Values of one family of transformations (with the clean test at ``identity``) and both
    networks' accuracies (%) at each, sorted by value."""
    rows = [(row["value"], row) for row in table.values() if row["family"] == kind]
    if identity not in [value for value, _ in rows]:
        rows.append((identity, table["clean"]))
    rows.sort(key=lambda item: item[0])
    return ([x for x, _ in rows], [100 * r["capsnet"] for _, r in rows], [100 * r["cnn"] for _, r in rows])


families = {"rotation (degrees)": family("rotation", 0.0), "scale": family("scale", 1.0),
            "shear (x += shear · y)": family("shear", 0.0),
            "shift right (pixels)": family("shift right", 0.0),
            "shift right and down (pixels)": family("shift diagonal", 0.0)}
fig, axes = plt.subplots(2, 3, figsize=(11, 6.6), layout="constrained")
for ax, (label, (xs, caps, net)) in zip(axes.flat, families.items()):
    ax.plot(xs, caps, "o-", label="CapsNet")
    ax.plot(xs, net, "s--", label="CNN")
    ax.set(xlabel=label, ylabel="accuracy (%)", ylim=(0, 100))  # one scale: a gap looks its size
    ax.grid(alpha=0.3)
axes[0, 0].legend()
ours = table["affNIST-like"]
bars = axes[1, 2].bar([0, 1, 3, 4], [100 * ours["capsnet"], 100 * ours["cnn"], 79, 66],
                      color=["C0", "C1", "C0", "C1"])
for bar in bars[2:]:
    bar.set_hatch("//")
    bar.set_alpha(0.5)
axes[1, 2].set_xticks([0.5, 3.5], ["affNIST-like\n(measured here)", "affNIST, paper §5.2\n(other protocol)"])
axes[1, 2].bar_label(bars, fmt="%.1f", fontsize=10)
axes[1, 2].set(ylim=(0, 105), ylabel="accuracy (%)", title="blue CapsNet, orange CNN")
fig.suptitle(f"Accuracy on transformed test digits ({robustness['test_data']['images']:,} images; "
             f"clean: CapsNet {table['clean']['capsnet']:.2%}, CNN {table['clean']['cnn']:.2%})")
plt.show()

# %%
n_table = robustness["test_data"]["images"]
for name, row in table.items():  # which network is ahead on each set, and whether it is a tie
    print(f"{name:24s} " + capsedu.compare_accuracies("CapsNet", row["capsnet"], n_table, "CNN",
                                                      row["cnn"], n_table))

# %% [markdown]
# The same study was recorded when both networks learned from 4,000 digits for 30 epochs
# (`robustness_4000`). Side by side, the columns show what changed with about 14 times more
# training images — and with two other changes: 15 epochs instead of 30, and a CNN reshaped at
# about the same size (it then had wider convolutions and narrower fully connected layers, as the
# docstring of `CNNConfig.cpu` records). The standard errors above are for the 55,000-digit columns
# only:

# %%
earlier_study = study("robustness_4000")
earlier, n_earlier = earlier_study["table"], earlier_study["test_data"]["images"]
print(f"{'':24s} {'4,000 digits':>17s}   {'55,000 digits':>17s}   the 4,000-digit gap")
print(f"{'':24s} {'CapsNet':>8s} {'CNN':>8s}   {'CapsNet':>8s} {'CNN':>8s}")
for name, row in table.items():
    if name in earlier:
        print(f"{name:24s} {earlier[name]['capsnet']:8.2%} {earlier[name]['cnn']:8.2%}   "
              f"{row['capsnet']:8.2%} {row['cnn']:8.2%}   "
              + capsedu.compare_accuracies("CapsNet", earlier[name]["capsnet"], n_earlier,
                                           "CNN", earlier[name]["cnn"], n_earlier))

# %% [markdown]
# **Neither network is more robust across the board: the CapsNet is ahead on turned and rescaled
# digits, the CNN on digits shifted beyond the training range, and on the affNIST-like set the two
# tie.** The CapsNet is ahead by two or more standard errors from −60° to −30° and at +15° and
# +30° (by 2.81 ± 0.71 points at −45°, 1.39 ± 0.43 at +30°), at scales 0.7, 0.9, 1.2 and 1.3 (by
# 1.47 ± 0.19 points at 1.3) and at shear −0.2. The CNN is ahead at +60° (3.07 ± 0.69 points),
# at 3 px or more to the right and at 3 px or more diagonally (2.89 ± 0.25 points at 5 px to the
# right, 24.52 ± 0.67 at 5 px diagonally). Everywhere else the two tie: on clean digits, at −15°
# and +45°, at scales 0.8 and 1.1, at every other shear, at 2 px to the right and diagonally, and
# on the affNIST-like set (CapsNet 98.14 %, CNN 98.28 %: 0.14 ± 0.19 points). The CapsNet's leads
# are small — under three points on rotations, under one and a half on scales — and several sit
# just past the threshold (2.0 standard errors at −60°, 2.2 at +15° and at shear −0.2): over this
# many rows, one or two such gaps can come from chance alone. Both networks fall off together
# with the angle, both tolerate anticlockwise turns of 30° or more better than clockwise ones — so
# that asymmetry likely comes from the digits (handwriting's slant), not from either architecture
# — and the rotated digits keep all their ink in the frame (the last column), so what the networks
# lose there is recognition, not pixels.
#
# Beside the 4,000-digit study: with about 14 times more training digits, neither network scores
# lower on any row, and the CapsNet gained more than the CNN at every scale and every rotation
# but +60°.
#
# - **What held**: the CNN still leads at shifts beyond the training range, and the diagonal
#   shifts still open the largest gaps (at 5 px, CNN 58.24 % against CapsNet 32.43 % with 4,000
#   digits, 71.94 % against 47.42 % now); clean digits are a tie then and now.
# - **What changed**: with 4,000 digits the CNN led by more than two standard errors at every
#   rotation from −60° to −15°, at +30° and +45°, at scales 0.7, 0.8 and 1.3 and at shears −0.3 and
#   −0.2; the CapsNet led nowhere. Now the CapsNet leads at −60°, −45°, −30° and +30°, at scales 0.7
#   and 1.3 and at shear −0.2, where the CNN had led (at −45°, CapsNet 40.54 % against CNN 45.08 % then, 51.74 % against
#   48.93 % now; at scale 0.7, 91.07 % against 94.58 % then, 97.93 % against 97.22 % now). At +60°
#   it went the other way: a tie then, a CNN lead now. The CapsNet also leads now where the two had
#   tied (at +15° and at scales 0.9 and 1.2). The affNIST-like set, a CNN lead of
#   1.07 ± 0.28 points then, is a tie now. The shift gaps moved both ways: at 6 px to the right the
#   CNN's lead narrowed (15.23 ± 0.54 points then, 9.44 ± 0.42 now), at 6 px diagonally it widened
#   (12.31 ± 0.53 then, 20.72 ± 0.61 now).
#
# So this lesson still does **not** reproduce the paper's 79 % against 66 %: on the affNIST-like
# set the two networks tie. What differs, each a reason the result may not transfer — of them only
# the training (the amount of data, with the epochs and the CNN's shape, as said above) changed
# between the two studies, and it moved rotations and scales towards the CapsNet but did not put
# it ahead on the affNIST-like set:
#
# - **data and training**: for this test the paper trained on all 60,000 digits, each placed at a
#   random position on a 40 × 40 canvas (shifts of up to 6 pixels); both networks here saw 55,000
#   digits — nearly as many — shifted by up to 2 pixels in their 28 × 28 frame, for 15 epochs
#   (a budget of CPU time, not a choice made on validation);
# - **the test set**: the real affNIST puts each digit anywhere on a 40 × 40 canvas; ours keeps
#   the transformations milder and the digits in the 28 × 28 frame;
# - **the CNN**: ours pools (see *Build it*), which buys tolerance to small shifts — the rows where
#   it leads most. The paper's affNIST baseline was "a traditional convolutional network (with
#   MaxPooling and DropOut)" too, but its size and training are not given, so how close ours is to
#   it cannot be known;
# - **one trained network each**: lesson 03's recorded 4,000-digit study found about 0.1 points
#   between seeds on clean digits; the spread between seeds at 55,000 digits, and on transformed
#   digits, was not measured. The CNN's leads of 9.44 to 24.52 points at the largest shifts (6 px
#   to the right, 4 to 6 px diagonally) are far beyond that; the leads of up to about three
#   points at rotations, either network's, and the CapsNet's leads of under one and a half points
#   on scales are nearer to what another seed might change.
#
# A CapsNet's routing-by-agreement is a claim about viewpoint; this measurement is one honest data
# point at this size, data and training length: small CapsNet leads on turned and rescaled digits,
# in the paper's direction but far from its 79 % against 66 %, larger CNN leads on digits shifted
# beyond training, and a tie on the affNIST-like set — not a verdict on capsules. The section *The
# paper's own experiment* below brings the first two differences in the list above, the training
# data and the test set, as close to the paper's protocol as these machines allow (the test is
# still not the real affNIST).
#
# The live measurement above used a sample; the table used every test image. They should agree
# within the sample's error: on 2,000 images its standard error is 0.7 points at 90 % accuracy
# and 1.1 points at 40 %, so gaps of one or two points are expected:

# %%
for name, key in (("CapsNet", "capsnet"), ("CNN", "cnn")):
    gaps = [100 * (live_accuracy[name][k] - table[f"rotation {a:+d}°"][key]) for k, a in enumerate(ROTATIONS)]
    print(f"{name}: live minus full table, per angle (points): " + " ".join(f"{g:+.1f}" for g in gaps))

# %% [markdown]
# ## The paper's own experiment: 40 × 40 translated training, an affNIST-like test
#
# Everything above used networks trained on 28 × 28 digits shifted by up to two pixels. Section 5.2
# of the paper trained differently: "a CapsNet and a traditional convolutional network (with
# MaxPooling and DropOut) on a padded and translated MNIST training set, in which each example is
# an MNIST digit placed randomly on a black background of 40 × 40 pixels", and tested them on
# affNIST: an under-trained CapsNet, stopped early at 99.23 % on the expanded (40 × 40 translated)
# test set, against a CNN with a similar number of parameters and a similar 99.22 %. Here is that
# protocol, run on the course's networks, as close as these machines allow (the test is still not
# the real affNIST):
#
# - **training**: the 55,000 training digits, each placed at a random position on a black 40 × 40
#   canvas (its 28 × 28 frame moved by up to 6 pixels each way, fresh every epoch), nothing else;
#   the shipped `capsnet40` (the course's CapsNet at 40 × 40 input) and `cnn40` (the course's CNN,
#   with max-pooling and dropout, of about the same size), the same recipe for both, 16 epochs
#   (what one session's lent GPU time fitted for both, with a second seed; not chosen on validation);
# - **the expanded test**: the 10,000 test digits placed the same way (`capsedu.data.transforms.on_canvas`);
# - **the affNIST-like test**: the real affNIST is not on these machines, so
#   `capsedu.data.transforms.affnist_like_40` makes one from the test digits, seeded and identical
#   on every machine: each digit rotated within ±20°, sheared (x += s · y, |s| ≤ 0.2), scaled
#   independently in x and y by 0.8–1.25 (drawn log-uniformly), then moved to a random place on the
#   40 × 40 canvas where all its ink stays on it — often further than the training digits moved. These ranges are those that TensorFlow Federated's affNIST-like
#   transform states as "approximately equivalent" to the affNIST page's
#   (<https://www.cs.toronto.edu/~tijmen/affNIST/>, whose own table could not be read here); the
#   translation follows the page's description — "significant translations", a digit "in the upper
#   right corner" as well as "in the lower left corner" — which is exactly where this test is
#   least certain to match the real set. (This is a different set from the 28 × 28 affNIST-like
#   set of the table above, whose digits stay in their frame and move by at most two pixels.)
#
# Both networks were trained on a GPU lent to the course for one session (printed below, with the
# minutes each took); `python -m coursetools.train_zoo capsnet40 cnn40` trains them again on any
# machine.

# %%
from capsedu.data.transforms import AFFNIST_RANGES, affnist_like_40, on_canvas  # noqa: E402

networks40 = {"CapsNet": capsedu.pretrained("capsnet40"), "CNN": capsedu.pretrained("cnn40")}
for name, key in (("CapsNet", "capsnet40"), ("CNN", "cnn40")):
    parameters = sum(p.numel() for p in networks40[name].parameters())
    print(f"{name:8s} {parameters:>10,} parameters; {capsedu.shipped_summary(key)}")
print("trained on:", study("affnist40")["device"])
print("affNIST-like ranges:", AFFNIST_RANGES)
expanded_live, affnist_live = on_canvas(live), affnist_like_40(live)
image_rows({"expanded": expanded_live.images[:10], "affNIST-like": affnist_live.images[:10]},
           title="the same ten test digits: placed as in training, and affNIST-like (40 × 40)")

# %% [markdown]
# Live, on the sample of the test split used above:

# %%
for set_name, data in (("expanded", expanded_live), ("affNIST-like", affnist_live)):
    scores = {name: float((capsedu.predict(model, data.images) == data.labels).float().mean())
              for name, model in networks40.items()}
    print(f"{set_name:13s} CapsNet {scores['CapsNet']:.2%}, CNN {scores['CNN']:.2%}; "
          + capsedu.compare_accuracies("CapsNet", scores["CapsNet"], len(data), "CNN", scores["CNN"], len(data)))

# %% [markdown]
# On every test image (`benchmarks/affnist_study.py` wrote `affnist40`), with the affNIST-like
# transformations also one at a time — the same random draws, the others switched off; "centred"
# is each digit untransformed in the middle of the canvas — and twice more with the moves limited
# to the 6 pixels the training digits moved:

# %%
affnist40 = study("affnist40")
n40 = affnist40["images"]
print(f"{n40:,} test images ({affnist40['source']})")
for set_name, row in affnist40["accuracy"].items():
    print(f"{set_name:32s} CapsNet {row['capsnet40']:7.2%}  CNN {row['cnn40']:7.2%}   "
          + capsedu.compare_accuracies("CapsNet", row["capsnet40"], n40, "CNN", row["cnn40"], n40))

# %% [markdown]
# Beside the published numbers (each from its source; "expanded" is the 40 × 40 translated test):

# %%
published = [  # (who, test set, CapsNet expanded, CNN expanded, CapsNet affNIST, CNN affNIST)
    ("Sabour et al. 2017, Section 5.2", "real affNIST", 99.23, 99.22, 79.0, 66.0),
    ("shinseung428/CapsNet_Tensorflow, README", "real affNIST", None, None, 75.89, 61.70),
    ("cybertronai/hinton-problems, affnist", "synthetic, ±4 px, 2,000 images", 90.45, 92.9, 85.5, 87.5),
]
ours = affnist40["accuracy"]
published.append(("this course (measured above)", "affNIST-like, moves anywhere",
                  100 * ours["expanded"]["capsnet40"], 100 * ours["expanded"]["cnn40"],
                  100 * ours["affNIST-like"]["capsnet40"], 100 * ours["affNIST-like"]["cnn40"]))
print(f"{'':40s} {'test set':32s} {'expanded':>15s}   {'affNIST':>13s}")
print(f"{'':40s} {'':32s} {'CapsNet':>7s} {'CNN':>7s}   {'CapsNet':>7s} {'CNN':>5s}")
for who, test_set, *values in published:
    print(f"{who:40s} {test_set:32s} " + " ".join("    n/a" if v is None else f"{v:7.2f}" for v in values))

# %% [markdown]
# The same question at every epoch: each point is one epoch of training, its accuracy on the
# expanded validation digits (5,000 training digits the networks never learned from) against its
# accuracy on affNIST-like versions of them — validation, not test, so that watching it chooses
# nothing on the test split. Two seeds per network (the second trained by
# `python -m coursetools.train_zoo capsnet40 cnn40 --seed 1`) show how much a run varies. The dotted
# line marks the paper's stopping point, 99.23 % — on its test set, so only a landmark here:

# %%
fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
for (net, runs), colour, marker in zip(affnist40["runs"].items(), ("C0", "C1"), ("o", "s")):
    for run in runs:
        ax.plot([100 * a for a in run["validation"]], [100 * a for a in run["validation_affnist"]],
                marker=marker, color=colour, alpha=1.0 if run["seed"] == 0 else 0.45,
                label=f"{'CapsNet' if net == 'capsnet40' else 'CNN'}, seed {run['seed']}")
ax.axvline(99.23, color="grey", lw=0.8, ls=":")
ax.text(99.2, 56, "paper's stop\n(99.23 %)", ha="right", fontsize=9, color="grey")
ax.set(xlabel="expanded validation accuracy (%)", ylabel="affNIST-like validation accuracy (%)",
       xlim=(93.5, 99.7), ylim=(55, 95), title="affNIST-like against clean accuracy, one point per epoch")
ax.grid(alpha=0.3)
ax.legend(loc="upper left")
plt.show()
for net, runs in affnist40["runs"].items():
    last = [f"seed {r['seed']}: {r['validation'][-1]:.2%} expanded, {r['validation_affnist'][-1]:.2%} affNIST-like"
            for r in runs]
    print(f"{net:10s} last epoch on validation — " + "; ".join(last))

# %% [markdown]
# **With the paper's protocol, the CNN is the more robust network here, and by a wide margin.**
# Both networks reach the same accuracy on the expanded test (a tie, as the paper's pair did), but
# on the affNIST-like set the CNN is ahead by about nine points, far beyond two standard errors,
# and the curve shows it at every epoch: at any clean accuracy both reach, the CNN's points sit
# higher, and at the last epoch a second seed of each lands within a few tenths of a point of the
# first. The breakdown says where the gap comes from: **translation**. Sheared or rescaled alone,
# the two networks tie; rotated alone, the CNN leads by 0.39 points, just at two standard errors.
# Moved anywhere on the canvas, the digits cost the CapsNet about 18 points (expanded → translation
# rows) and the CNN about 9 — about what each loses on the whole affNIST-like set. Limit those
# moves to the 6 pixels of training and the two tie again, on translation alone and on all four
# transformations together (a gap of under half a point).
#
# This is the other side of the 28 × 28 result earlier in this lesson: there, too, the CNN led on
# digits shifted beyond the training range, and the CapsNet's small leads were on turns and
# scales (the 40 × 40 networks were trained only on the 55,000 digits, so this protocol has no
# 4,000-digit result to set beside them). The synthetic reproduction in
# the table also found the CNN ahead, but by 2 points on 2,000 test images — under two standard
# errors, with smaller networks, milder moves and a CNN more accurate on clean digits — while the
# two studies that tested on the real affNIST found the paper's direction. So our setting
# resembles the synthetic one, with a far larger gap: what it cannot tell is whether the real affNIST's digits move as far as ours
# (if they stay nearer the centre, the last two rows above are the better guide, and there the
# networks tie), and it uses the course's narrower CapsNet (8 primary capsule types, not 32)
# trained to its last epoch rather than stopped early. A likely reason for the translation gap,
# not tested here: the CapsNet learns a separate transformation matrix W for every primary capsule
# *position*, so a digit moved where training rarely put ink sends its votes through matrices
# that training hardly shaped, while the CNN applies the same shared, pooled filters everywhere.

# %% [markdown]
# ## Explore
#
# ### The transform explorer
#
# Turn and shift one test digit with the sliders: the digit the networks see, the CapsNet's
# reconstruction from its longest capsule, and both networks' class scores (capsule lengths in
# blue, CNN probabilities in orange; the shaded column is the true class). Type another index to
# change the digit; **reset** puts the sliders back to 0.

# %% tags=["remove-output"]
explorer = transform_explorer(capsnet, cnn, test, index=0)
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

# %%
explorer.angle.value = 45
picture = explorer.snapshot()
explorer.reset()
picture

# %%
transform_strip(capsnet, cnn, test.images[0], int(test.labels[0]), list(ROTATIONS))

# %% [markdown]
# This 7 is recognised by the CapsNet from −30° to +60° and by the CNN from −30° to +45°; at −45°
# and −60° both call it a 2, and at +60° the CNN calls it a 0. At −30° both scores are already far
# below their upright values, the CNN's probability even lower than the capsule's length (the
# curves under the strip). Note the reconstructions: from −30° to +15° capsule 7 redraws a 7 that
# leans roughly as the input does, but from +30° on it redraws a nearly **upright** 7 whose bar
# bends down into a hook at the left, blurred at +60° — there it no longer turns with the input —
# and its length starts to fall at +30°, the CNN's probability only at +60°, where it drops to
# about zero.
#
# ### Equivariance on the trained networks
#
# Lesson 00 drew a capsule whose vector turns with the digit while its length stays. Does the
# trained CapsNet do that? Rotate one digit in 5° steps, follow the capsule of its class — its 16
# pose numbers, its length, its reconstruction — and, for the CNN, the 192 features of its last
# hidden layer and its probability for the class.

# %%
angles = list(range(-45, 50, 5))
label = int(test.labels[0])
trajectory = capsule_trajectory(capsnet, test.images[0], label, angles=angles)
features, probabilities = feature_trajectory(cnn, test.images[0], angles=angles)


def pose_and_presence(steps, path, cnn_probabilities, xlabel):
    """The capsule's 16 coordinates, and its length beside the CNN's probability, per step."""
    fig, (ax_pose, ax_len) = plt.subplots(1, 2, figsize=(12, 3.4), width_ratios=[1.6, 1])
    ax_pose.plot(steps, path.poses, lw=1)
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
# The two paths side by side, each projected on its own two principal directions (a 2-D picture
# of a 16-D and a 192-D path; the colour runs from −45° to +45°), and how smooth each is: the
# largest step between neighbouring angles, relative to the whole path's extent (0 would be
# perfectly gradual; a path that jumps has steps close to 1).

# %%
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
# From −20° to +45°, where the capsule is present, its 16 coordinates drift steadily as the 7 turns,
# with no jump — several of them by a good part of their range. Their biggest move is between −45°
# and −20°, where the capsule switches on (its length rises from near zero to near its upright
# value): that is presence, not pose. The reconstruction turns with the digit only part of the way
# (a leaning 7 up to +15°, a nearly upright, hooked 7 from +30° on). So capsule 7 changes gradually
# with the rotation, but for this digit its drawing follows the turn only near the poses seen in
# training — shifts and handwriting's own slant, not turns of tens of degrees; whether that holds
# for other digits is the question of Exercise 2, and whether its 16 numbers keep the angle better
# than the CNN's features that of Exercise 1. In the projections the capsule's largest steps are
# where it switches on, the CNN's around the upright digit and near +30°, and the two largest steps
# are about the same fraction of their paths' extents (the panel titles). The paper's Figure 4 found
# dimensions for skew, width and stroke thickness — variations that MNIST itself contains.
#
# ### Shifting instead of turning
#
# Both networks were trained with shifts of up to two pixels, so here the question is what happens
# inside and beyond that range. The same digit, moved from 6 pixels left to 6 pixels right:

# %%
shifts = [(float(dx), 0.0) for dx in range(-6, 7)]
moves = [dx for dx, _ in shifts]
shifted = capsule_trajectory(capsnet, test.images[0], label, shifts=shifts)
shifted_features, shifted_probabilities = feature_trajectory(cnn, test.images[0], shifts=shifts)
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
# features); the reconstruction moves with the digit, though less far than the input and blurring
# most at +6 px; and the capsule stays present — somewhat shorter at ±6 px than within the trained
# ±2 px — while the CNN's probability stays near 1 throughout. For position, a variation
# training did show it (two-pixel shifts, and digits that sit off-centre in MNIST itself), this
# capsule's pose behaves as lesson 00 drew it: it follows the digit, smoothly.
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

# %%
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
still_called = {}
for name, model in networks.items():
    same = still_called[name] = float((capsedu.predict(model, swapped) == live.labels).float().mean())
    top = batched(model.class_scores, swapped).max(dim=1).values.mean()
    print(f"  {name:8s} {same:6.1%} of them; mean top score {top:.3f} (clean: "
          f"{(capsedu.predict(model, live.images) == live.labels).float().mean():.1%})")
print("  " + capsedu.compare_accuracies("CapsNet", still_called["CapsNet"], len(live),
                                        "CNN", still_called["CNN"], len(live)))
image_rows({"swapped": swapped[:10]}, title="Top and bottom halves swapped")

# %% [markdown]
# Measured over 2,000 digits and with rotation, claims 1 and 3 do not come out as lesson 00 drew
# them (claim 2 is left to the exercises):
#
# 1. **Length is not pose-invariant here.** On the digits each network still classifies right,
#    the true class's capsule keeps 0.977 of its upright length at 15°, 0.897 at 30° and 0.816 at
#    45°, while the CNN's probability keeps 0.992, 0.968 and 0.930: the capsule's length falls
#    proportionally more than the CNN's probability.
# 2. **Does the pose keep the angle?** Exercise 1 asks linear probes, which put a 16-D capsule
#    and 192 CNN features the same question; Exercise 2 asks the decoder.
# 3. **Both networks reject rearranged parts about equally**: 10.5 % (CapsNet) and 10.1 % (CNN) of
#    the swapped digits are still called their class, a gap under two standard errors on 2,000
#    digits: a tie. This CNN's pooling (two 2 × 2 stages) does not forget where the parts are — its
#    fully connected layers still see the layout — though it is more confident on these mostly
#    misclassified digits (mean top score 0.848, a probability, against 0.568 for the CapsNet's
#    longest capsule, a length: different quantities, so only a loose comparison).
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
# ### Exercise 1: does the pose keep the angle? A linear probe
#
# Claim 2 of lesson 00: a capsule's pose should *follow* a turn of the digit (equivariance)
# where pooled features forget it. Comparing a 16-D pose with 192 CNN features directly means
# little - different spaces, different scales - so ask each representation the same question:
# how well does a straight line read the angle off it? Write
# `probe_error(train_features, train_angles, test_features, test_angles)`: fit a least-squares
# linear map with a bias from features (N, F) to angles (N,) on the training examples and return
# its root-mean-square error, in degrees, on the test examples. Low error: the representation keeps the angle; about 26°
# (the spread of angles uniform in ±45°): it forgot it.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def probe_error(train_features: torch.Tensor, train_angles: torch.Tensor,
                test_features: torch.Tensor, test_angles: torch.Tensor) -> float:
    """Test RMS error (degrees) of a linear map with a bias from features to angles."""
    ### BEGIN SOLUTION
    def with_bias(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)  # (N, F + 1)

    weights = torch.linalg.lstsq(with_bias(train_features), train_angles[:, None]).solution  # (F + 1, 1)
    return float((with_bias(test_features) @ weights - test_angles[:, None]).square().mean().sqrt())
    ### END SOLUTION


# %% tags=["nbval-check-output"]
check_probe_error(probe_error);

# %% tags=["nbval-check-output"]
read_angle = yours_or_reference(check_probe_error, probe_error, reference_probe_error, name="probe_error")

# %% [markdown]
# Now the real comparison: every digit of the sample turned by its own random angle in ±45°,
# each network's representation of it - the CapsNet's 16-D capsule of the **true** class, the
# CNN's 192 hidden features - and the probe fitted on half of the digits, tested on the other half.

# %%
generator = torch.Generator().manual_seed(5)
spin = 90 * torch.rand(len(live), generator=generator) - 45  # (N,) one angle per digit
spun = torch.cat([rotate(live.images[k:k + 1], float(a)) for k, a in enumerate(spin)])
views = {"CapsNet pose of the true class (16-D)": batched(lambda b: capsnet(b).capsules, spun)[true],
         f"CNN last hidden layer ({cnn.config.hidden[-1]}-D)": batched(cnn.features, spun)}
half = len(live) // 2
print(f"angles uniform in ±45°: their standard deviation is {spin.std():.1f}°")
for name, view in views.items():
    error = read_angle(view[:half], spin[:half], view[half:], spin[half:])
    print(f"  {name:40s} probe error {error:5.1f}°")

# %% [markdown]
# One straight line reads every class's capsule above. Lesson 07 found that a pose dimension
# means different things in different classes. Before running the next cell, predict: will ten
# probes, one per class, each reading only that class's 16-D capsule (17 numbers each, 170 in
# all — fewer than the CNN probe's 193), read the angle better or worse than the one shared probe?

# %%
pose = views["CapsNet pose of the true class (16-D)"]  # (N, D_out)
fit, held = live.labels[:half], live.labels[half:]  # (N/2,) classes of the two halves
squared = torch.zeros(())
for k in range(capsnet.config.num_classes):
    error = read_angle(pose[:half][fit == k], spin[:half][fit == k], pose[half:][held == k],
                        spin[half:][held == k])
    squared = squared + error ** 2 * (held == k).sum()  # this class's summed squared error
per_class = float((squared / len(held)).sqrt())  # RMS over all held-out digits
print(f"  {'CapsNet pose, one probe per class (10 x 16-D)':40s} probe error {per_class:5.1f}°")

# %% [markdown]
# One probe per class reads the angle with an error of 15.3°, against 23.1° for the probe shared
# by all classes and 19.8° for the CNN's 192 features. The shared probe asked the capsules the
# wrong question: each class's capsule codes the turn in its own dimensions (lesson 07 saw
# dimension 14 thicken the 4 and thin the 7), so one straight line for all ten mixes ten codes.
# Read class by class, the pose keeps more of the angle than the CNN's features. This is one
# split of one network each: how much the errors move between splits is not measured here.

# %% [markdown]
# ### Exercise 2: what does the capsule redraw?
#
# The decoder redraws a digit from its winning capsule. If the pose kept the angle, a turned
# digit would come back turned; if the capsule forgot it, upright. Measure it: write
# `orientation(images)` returning, for each (N, 1, H, W) image, the angle in degrees
# (anticlockwise as you look at it, in (−90°, 90°]) of the principal axis of its ink, from the
# second moments of the ink about its centre of mass, as lesson 00's stroke capsules read theirs.
# Before running the cell after the check, predict: for digits turned by 30°, will the
# reconstructions' axes turn by about 30°, by about 0°, or in between?

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

# %%
turn = torch.tensor([-30.0, -15.0, 15.0, 30.0])
upright = axis_angle(live.images)  # (N,)
for angle in turn.tolist():
    rotated = rotate(live.images, angle)
    redrawn = batched(lambda b: capsnet(b).reconstruction, rotated)  # masked by the longest capsule
    kept = ((axis_angle(redrawn) - upright + 90) % 180 - 90).median()
    seen = ((axis_angle(rotated) - upright + 90) % 180 - 90).median()
    print(f"digits turned {angle:+.0f}°: the inputs' axes turn {seen:+.1f}° (median), the "
          f"reconstructions' {kept:+.1f}°")

# %% [markdown]
# The reconstructions turn with the inputs. For digits turned anticlockwise by 15° and 30°,
# their axes turn by 14.9° and 29.7° (medians), and clockwise turns come back nearly as turned
# (the first two lines). The decoder sees only the masked
# winning capsule, never the image, so those 16 numbers carry the turn: within ±30° the pose
# follows the rotation, as lesson 00 drew it, for the typical digit — though the single 7 followed
# above came back nearly upright from +30°. With Exercise 1 the picture is consistent: the angle
# is in the capsule, coded separately for each class.

# %% [markdown]
# ## Summary
#
# - The comparison is fair only at equal size, data and recipe: each pair of shipped networks was
#   trained on the same images by the same recipe, with parameter counts within 10 % of each
#   other (printed above).
# - `affine_grid` and `grid_sample` turn a batch of digits about their centre; the grid says where
#   each output pixel reads the input, so it holds the inverse turn. `capsedu.data.transforms`
#   also scales, shears and shifts, on a 40 × 40 canvas to measure the ink a 28 × 28 frame keeps,
#   and builds an affNIST-like set (not the real affNIST).
# - Which network is more robust, and by how much, is printed above per transformation with its
#   standard error - a gap under two standard errors is a tie.
# - A linear probe asks representations of different sizes the same question: how well a straight
#   line reads the angle of a turned digit off them. For capsules, ask each class's capsule on
#   its own: one probe per class read the angle better than the CNN's features, one shared probe
#   worse. The decoder shows it from the other side: turned digits come back turned.
# - With the paper's own protocol (40 × 40 translated training, an affNIST-like test), the CNN is
#   the more robust network here, by about nine points; nearly all of that gap comes from moves
#   beyond the training range (with moves kept within it, the two tie).
# - Report what you measure, with the protocol beside it - including when it disagrees with the
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
# Lesson 09 puts two digits on top of each other (MultiMNIST, Section 6 of the
# paper): there the CapsNet's per-class capsules and its reconstructions of each digit separately
# are the point, and the same CNN, with a sigmoid output per class (`CNNConfig(multi_label=True)`),
# is its baseline again.
