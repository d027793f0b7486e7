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
# # Lesson 06 — Training the full CapsNet
#
# Every piece is built: you wrote the squash, the primary capsules, dynamic routing, the margin
# loss, the mask, the decoder and the reconstruction loss in lessons 01-05. This lesson puts
# **your** pieces together into one network, `MyCapsNet`, and checks it against the CapsNet
# shipped with the course: given the same weights, it must compute the same capsules. You write
# one training step, train your network, and compare it with `capsedu.CapsNet` trained the same
# way. Then `capsedu.fit` takes over the loop: it shows a progress bar, shifts the images by up to
# two pixels as the paper does, and returns a history you turn into loss and accuracy curves. You
# measure accuracy on the test split, look at reconstructions and mistakes, and save a checkpoint
# that later lessons (and you) can load in a second instead of retraining.

# %% [markdown]
# ## Learning objectives
#
# By the end of this lesson you can
#
# - **assemble a CapsNet from your own pieces** and verify it against a trained network by
#   loading that network's weights into yours;
# - write a CapsNet **training step**: one optimisation step on a batch with the total loss
#   (margin + 0.0005 × reconstruction, decoder masked by the labels), and train your network
#   with it;
# - train with **`capsedu.fit`** using the paper's random-shift augmentation and read its history
#   as **loss and accuracy curves**;
# - measure **test accuracy** on data the network never saw, and find its mistakes;
# - **save and load a checkpoint**, and switch to the **paper configuration on a GPU**.

# %% [markdown]
# ## Prerequisites and time
#
# - Lessons 01-05, with their Build-it exercises: this lesson reads your solutions from those
#   notebooks (any piece you have not finished is replaced by `capsedu`'s). You should know what
#   `model(images, labels)` returns (`capsules`, `lengths`, `reconstruction`) and what the two
#   losses measure.
# - Standard errors and paired comparisons, short and with examples: [the statistics page](statistics.md).
# - **Time:** about 75 minutes. On the machine the course was written on, training your network
#   three times takes about three minutes. `capsedu.fit`'s training cell takes under a minute, and
#   `capsedu.CapsNet`'s two more seeds under two (the CPU configuration, 12 epochs over 4,500 MNIST
#   images; the tests run a much shorter version). Each prints how long it took on yours.
#
# MNIST comes from the official files when you have them (set `CAPSEDU_DATA` to their folder, or
# let torchvision download them); without network or files the course uses a real 5,000-image
# subset that ships with the course. The loader prints which source it used. With the 60,000 official
# training images the lesson still uses only a class-balanced 5,000 of them
# (`capsedu.learner_subset`: 4,500 to train on, 500 to validate), so that the times above hold. To
# train on all of them, set `n_train = len(train_full)` in the data cell; twelve epochs then take
# about thirteen times as long (59,500 training images instead of 4,500).

# %%
import dataclasses
import time
from pathlib import Path

# %matplotlib inline
import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import FuncFormatter, MaxNLocator
from torch import nn
from torch.utils.data import DataLoader, random_split

from IPython.display import display

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.assembly import as_capsnet, assembled_or_reference, check_assembly, load_capsnet_weights
from capsedu.course.checks.training import check_margin_violations, check_train_step, check_uniform_lengths
from capsedu.course.pieces import Pieces, collect_pieces
from capsedu.explore.figures import reconstruction_grid
from capsedu.explore.palette import COURSE_STYLE, VERMILLION
from capsedu.training.step import train_step as capsedu_train_step
from capsedu.zoo.shipped import record_summary, study

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
generator = capsedu.set_seed(0)

# %% [markdown]
# ## Build it
#
# ### The data: train, validation and test
#
# We keep a small **validation** part of the training images aside to watch for over-fitting
# during training, and use the **test** split only to measure, never to choose anything.

# %%
train_full = capsedu.load_mnist("train")
test_full = capsedu.load_mnist("test")

# images for training + validation: at most 5,000 (learner_subset), so the times above hold
n_train = capsedu.choose(learner=len(capsedu.learner_subset(train_full)), fast=1100)
n_val = capsedu.choose(learner=500, fast=100)
n_test = capsedu.choose(learner=len(test_full), fast=500)
train_part, val_part = random_split(train_full.subset(n_train, seed=0), [n_train - n_val, n_val],
                                    generator=generator)
test_part = test_full if n_test == len(test_full) else test_full.subset(n_test, seed=0)
print(f"train {len(train_part):,} | validation {len(val_part):,} | test {len(test_part):,} images")

train_loader = DataLoader(train_part, batch_size=32, shuffle=True, generator=generator)
val_loader = DataLoader(val_part, batch_size=250)
test_loader = DataLoader(test_part, batch_size=250)

# %% [markdown]
# ### Augmentation: shift by up to 2 pixels
#
# The paper's only augmentation: each training image is moved by up to 2 pixels in x and y, with
# zero padding (`capsedu.random_shift`). Every epoch sees slightly different images, which
# reduces over-fitting - important when the network learns from only 4,500 images, as here.

# %% mystnb={"image": {"alt": "Six copies of one training digit, a 5, each with thin vermillion lines crossing at the canvas centre. The first is the original; the other five are moved by random_shift by at most 2 pixels each way (dx -2 dy -2, dx -2 dy +1, dx -1 dy -2, dx -2 dy -1, and one not moved), so the digit slides against the fixed vermillion cross while its shape stays the same."}}
sample = train_full.images[:1].repeat(5, 1, 1, 1)  # (5, 1, 28, 28): one digit, five times
shifted, offsets = capsedu.random_shift(sample, max_shift=2, generator=generator,
                                        return_offsets=True)  # (5, 1, 28, 28), (5, 2)
fig, axes = plt.subplots(1, 6, figsize=(11, 2.6), layout="constrained")
titles = ["original"] + [f"dx = {int(dx):+d}, dy = {int(dy):+d}" for dx, dy in offsets]
for ax, image, title in zip(axes, torch.cat([sample[:1], shifted]), titles):
    ax.imshow(image[0], cmap="gray", vmin=0, vmax=1)
    ax.axvline(13.5, color=VERMILLION, lw=0.8)  # the centre of the canvas: the digit moves, not it
    ax.axhline(13.5, color=VERMILLION, lw=0.8)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle("random_shift: the same digit moved by up to 2 pixels (vermillion lines: the canvas centre; "
             "dx > 0 right, dy > 0 down)")
plt.show()

# %% [markdown]
# ### Your pieces
#
# The next cell reads your solutions from your own notebooks of lessons 01-05, the ones beside
# this one (in a folder of their own each, as nbgrader keeps them, works too). It does not use
# what a kernel remembers: for each piece it takes the last cell of its lesson that defines the
# function, runs that definition with the lesson's import lines, and checks it again with the
# lesson's check. A piece that is missing or does not pass is replaced by `capsedu`'s own, and
# one line per piece says which you get. Inside your routing, `squash` is your squash.
#
# | piece | your function | lesson |
# |---|---|---|
# | `squash` | `my_squash` | 01 |
# | `to_capsules` | `my_to_capsules` | 02 |
# | `routing` | `my_routing_vectorised` | 03 |
# | `margin_loss` | `my_margin_loss` | 04 |
# | `mask`, `decoder`, `sse_loss` | `my_mask`, `build_decoder`, `my_sse_loss` | 05 |
#
# Change a piece in its lesson, save that notebook, and run this cell again to pick it up.

# %% tags=["nbval-check-output"]
pieces = collect_pieces()  # reads 01_*.ipynb ... 05_*.ipynb beside this notebook

# %% [markdown]
# ### Your CapsNet
#
# Write `MyCapsNet(config, pieces)`, the network of Figures 1 and 2 built from `pieces`. The sizes
# come from `config`, a `capsedu.CapsNetConfig` (the field names are in `capsedu.CapsNetConfig?`).
#
# - `__init__` creates four attributes, with these names: the check copies the shipped CapsNet's
#   weights into them.
#   - `conv1`: an `nn.Conv2d` with a 9 × 9 kernel (28 → 20 pixels).
#   - `primary`: the primary capsules' `nn.Conv2d`, 9 × 9 with stride 2 (20 → 6), giving
#     `primary_types × primary_dim` channels.
#   - `W`: an `nn.Parameter` of shape (I, J, D, D_in) = (`num_primary_caps`, `num_classes`,
#     `digit_dim`, `primary_dim`), drawn with standard deviation 0.01.
#   - `decoder`: built by `pieces.decoder(in_features, hidden, pixels)` for the masked capsules
#     (`num_classes × digit_dim` numbers), the hidden widths `decoder_hidden` and
#     `in_channels × image_size²` pixels.
# - `forward(images, labels=None)` runs conv1 and its ReLU, the primary convolution,
#   `pieces.to_capsules`, the votes $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$ (lesson 03),
#   `pieces.routing` with `config.routing_iterations`, `pieces.mask` (by the labels when given),
#   and the decoder. It returns `capsedu.CapsNetOutput(capsules, lengths, reconstruction,
#   couplings)`, the reconstruction shaped like the images.
# - `loss(images, labels)` returns `capsedu.Loss(value, correct)`: `value` is your margin loss plus
#   0.0005 × your SSE loss, with the decoder masked by the labels; `correct` counts the images whose
#   longest capsule is the label. Your margin loss takes the targets as lesson 04 did, one-hot
#   (B, J), not the labels (B,). `capsedu.fit` and `capsedu.evaluate` use this method too.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
class MyCapsNet(nn.Module):
    """Your CapsNet (Figures 1 and 2), built from your pieces."""

    def __init__(self, config: capsedu.CapsNetConfig, pieces: Pieces) -> None:
        super().__init__()
        self.config, self.pieces = config, pieces
        ### BEGIN SOLUTION
        c = config
        self.conv1 = nn.Conv2d(c.in_channels, c.conv1_channels, c.conv1_kernel)  # 28 -> 20 pixels
        self.primary = nn.Conv2d(c.conv1_channels, c.primary_types * c.primary_dim, c.primary_kernel,
                                 stride=c.primary_stride)  # 20 -> 6 pixels
        self.W = nn.Parameter(0.01 * torch.randn(c.num_primary_caps, c.num_classes, c.digit_dim,
                                                 c.primary_dim))  # (I, J, D, D_in)
        self.decoder = pieces.decoder(c.num_classes * c.digit_dim, c.decoder_hidden,
                                      c.in_channels * c.image_size ** 2)
        ### END SOLUTION

    def forward(self, images: torch.Tensor, labels: torch.Tensor | None = None) -> capsedu.CapsNetOutput:
        ### BEGIN SOLUTION
        c = self.config
        features = self.primary(torch.relu(self.conv1(images)))  # (B, T*D_in, 6, 6)
        u = self.pieces.to_capsules(features, c.primary_types, c.primary_dim)  # (B, I, D_in)
        u_hat = torch.einsum("ijdk,bik->bijd", self.W, u)  # (B, I, J, D): u_hat_j|i = W_ij u_i
        v, couplings = self.pieces.routing(u_hat, c.routing_iterations)  # (B, J, D), (B, I, J)
        reconstruction = self.decoder(self.pieces.mask(v, labels)).view_as(images)  # (B, 1, 28, 28)
        return capsedu.CapsNetOutput(v, v.norm(dim=-1), reconstruction, couplings)
        ### END SOLUTION

    def loss(self, images: torch.Tensor, labels: torch.Tensor) -> capsedu.Loss:
        ### BEGIN SOLUTION
        out = self(images, labels)  # the decoder masked by the labels
        targets = torch.nn.functional.one_hot(labels, self.config.num_classes).float()  # (B, J)
        value = (self.pieces.margin_loss(out.lengths, targets)
                 + 0.0005 * self.pieces.sse_loss(out.reconstruction, images))
        return capsedu.Loss(value, (out.lengths.argmax(dim=1) == labels).sum())
        ### END SOLUTION


# %% [markdown]
# ## Check it
#
# The check builds your network with the shipped CapsNet's configuration, copies the shipped
# weights into it (`conv1` → `conv1`, `primary.conv` → `primary`, `class_caps.W` → `W`, the
# decoder's `nn.Linear` layers in order) and runs it on 100 test digits. Every stage must agree
# with the shipped network within 10⁻⁴. The stages are the primary capsules, the votes your
# routing receives, the class capsules and their lengths, the mask and the reconstructions; then
# come the loss, and its gradients for conv1, W and the decoder within 0.1 % of their largest entry. It does the same
# once more on a small network of other sizes with random weights, where a mix-up of sizes that
# the shipped network's happen to hide shows. When something differs, it names the first stage
# that does and how.

# %% tags=["nbval-check-output"]
shipped = capsedu.pretrained("capsnet")  # the CPU configuration, trained by the course
digits = test_full.subset(100, seed=0)  # 100 test digits
given = {"pieces": pieces, "images": digits.images, "labels": digits.labels, "capsnet": shipped}
result = check_assembly(MyCapsNet, **given)

# %% tags=["nbval-check-output"]
Net = assembled_or_reference(MyCapsNet, **given)

# %% [markdown]
# Here is how close your network came, with the shipped weights copied in the same way
# (`load_capsnet_weights` is the mapping the check uses):

# %%
yours = Net(shipped.config, pieces).eval()
load_capsnet_weights(yours, shipped)
readable = capsedu.CapsNet(dataclasses.replace(shipped.config, routing="readable")).eval()
readable.load_state_dict(shipped.state_dict())  # capsedu's other implementation of Procedure 1
with torch.no_grad():
    mine, theirs, other_way = (net(digits.images) for net in (yours, shipped, readable))  # masked by the prediction
print(f"on {len(digits.labels)} test digits, max |Δ| from the shipped network: yours "
      f"{float((mine.capsules - theirs.capsules).abs().max()):.1e} in the class capsules and "
      f"{float((mine.reconstruction - theirs.reconstruction).abs().max()):.1e} in the reconstructions; "
      f"same predictions: {bool((mine.lengths.argmax(1) == theirs.lengths.argmax(1)).all())}")
print(f"for scale, capsedu's readable routing against its factored one, same weights: "
      f"{float((other_way.capsules - theirs.capsules).abs().max()):.1e} in the class capsules")

# %% [markdown]
# Two implementations of the same sums, capsedu's readable and factored routing, already differ
# by float rounding (the second line): they add the same numbers in another order. Set your gap
# beside that one.

# %% [markdown]
# ### One training step
#
# Write `train_step(model, optimizer, images, labels)`: **one optimisation step** of `model` on
# one batch, `images` (B, 1, 28, 28) and `labels` (B,), with the CapsNet loss: your network's
# `model.loss(images, labels).value`, the margin loss plus 0.0005 × the reconstruction loss with
# the decoder masked by the **labels**. Return the batch's loss *before* the update, as a Python
# float. The function may be called many times in a row with the same optimiser.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def train_step(model: nn.Module, optimizer: torch.optim.Optimizer,
               images: torch.Tensor, labels: torch.Tensor) -> float:
    """One optimisation step on a batch; returns the batch's loss before the update."""
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    loss = model.loss(images, labels).value
    loss.backward()
    optimizer.step()
    return loss.item()
    ### END SOLUTION


# %% [markdown]
# ## Check it
#
# The check runs your step twice on a tiny CapsNet with a `loss` method like yours and compares the
# weights with a reference.

# %% tags=["nbval-check-output"]
result = check_train_step(train_step)

# %% tags=["nbval-check-output"]
step = yours_or_reference(check_train_step, train_step, capsedu_train_step, name="train_step")

# %% [markdown]
# The recipe, step by step, and why each line is there:
#
# 1. `optimizer.zero_grad()` - forget the previous batch's gradients: PyTorch *adds* each new
#    gradient to the stored one, so without it every step would also repeat all earlier ones;
# 2. `loss = model.loss(images, labels).value` - the forward pass and the loss, with the labels
#    choosing which capsule the decoder reads;
# 3. `loss.backward()` - the gradient of the loss for every weight;
# 4. `optimizer.step()` - move the weights a little against their gradients;
#
# and `loss.item()` returns a plain float, which keeps no computation graph alive.

# %% [markdown]
# A second check every practitioner uses: a network that works must be able to **memorise one
# batch**. A few steps on the same 32 images must bring the loss down; if they do not, something
# is broken (a wrong sign, a detached tensor, a learning rate of zero) and no amount of training
# will help.

# %%
capsedu.set_seed(0)
probe = Net(capsedu.CapsNetConfig.cpu(), pieces)  # your network, untrained
probe_optimizer = torch.optim.Adam(probe.parameters(), lr=1e-3)
images, labels = next(iter(train_loader))  # (32, 1, 28, 28), (32,)
losses = [step(probe, probe_optimizer, images, labels) for _ in range(15)]
print(f"loss on one batch: step 1 {losses[0]:.3f} -> step 15 {losses[-1]:.3f}")
assert losses[-1] < 0.8 * losses[0], "the loss did not go down on a single batch: check the step"

# %% [markdown]
# ## Use capsedu
#
# ### Train with `capsedu.fit`
#
# `capsedu.fit` does not call your `train_step`: it takes its own step of the same kind on every
# batch, with a guard that stops on a NaN loss. It trains with Adam and an exponentially decaying
# learning rate: × 0.96 after every epoch by default (`lr_decay`). The paper says only
# that it used Adam "with its TensorFlow default parameters, including the exponentially decaying
# learning rate"; Sabour et al.'s official TensorFlow code decays 0.001 by 0.96 every 2,000 steps
# of 128 images, about × 0.99 per 60,000-image epoch over 300,000 steps. A decay per epoch suits
# runs of a dozen epochs on 4,500 images. Its arguments:
#
# - `epochs` - passes over the training images;
# - `device` - where to compute: `"cpu"` here (see *Explore* for a GPU);
# - `augment` - a function applied to each training batch: `capsedu.random_shift`;
# - `val_loader` - evaluated after each epoch (no augmentation, no weight updates);
# - `objective` - what to minimise; a CapsNet's default is `capsedu.MarginObjective()`, the
#   margin loss plus 0.0005 × the reconstruction loss (`capsedu.capsnet_loss`, lesson 05).
#
# It returns a **history**: per-epoch lists of `train_loss`, `train_accuracy`, `val_loss`,
# `val_accuracy`, `lr` and `seconds`.
#
# We train `CapsNetConfig.cpu()`, a narrower CapsNet with the same depth and routing as the
# paper's, so that training takes minutes on a laptop CPU.

# %%
capsedu.set_seed(0)
config = capsedu.CapsNetConfig.cpu()
model = capsedu.CapsNet(config)
device = "cpu"  # on a GPU: device = capsedu.default_device()
epochs = capsedu.choose(learner=12, fast=2)
print(f"CPU configuration: {sum(p.numel() for p in model.parameters()):,} parameters; "
      f"training for {epochs} epochs")

# %%
start = time.perf_counter()
history = capsedu.fit(model, train_loader, epochs=epochs, device=device, lr=1e-3, lr_decay=0.96,
                      augment=capsedu.random_shift, val_loader=val_loader)
train_minutes = (time.perf_counter() - start) / 60
print(f"trained in {train_minutes:.1f} min; last epoch: train accuracy "
      f"{history['train_accuracy'][-1]:.1%}, validation accuracy {history['val_accuracy'][-1]:.1%}")

# %% [markdown]
# ### Loss and error curves
#
# The training numbers are averaged *during* each epoch, on shifted images, while the weights
# still change; the validation numbers come *after* the epoch on unshifted images. That is why
# validation can look better than training, most of all in the first epochs. Over-fitting would
# show as a validation error that climbs again while the training error keeps falling.
#
# The right panel plots the **error** (100 % minus accuracy) on a logarithmic axis, so that the
# late epochs, where the error is a few per cent, are as easy to read as the first. Validation
# has only 500 images, so each of its points is uncertain: the shaded band is ± 2 standard
# errors. Two epochs whose validation errors lie within each other's bands cannot be told apart.

# %% mystnb={"image": {"alt": "Two line charts over 12 epochs, training as blue circles on solid lines, validation as vermillion squares on dashed lines. Left, total loss: both fall steeply, training from 0.34 and validation from 0.15, and flatten near 0.05, validation below training. Right, error in per cent on a log axis with a shaded band of plus or minus 2 standard errors around validation: both errors fall to a few per cent, and in the last epochs training runs inside the wide band."}}
def plot_history(history: dict[str, list], n_val: int) -> plt.Figure:
    """Loss per epoch, and error per epoch on a log axis with the validation's ± 2 SE band."""
    fig, (ax_loss, ax_err) = plt.subplots(1, 2, figsize=(10, 3.8))
    for split, style in [("train", "o-"), ("val", "s--")]:
        name = "training" if split == "train" else "validation"
        ax_loss.plot(history["epoch"], history[f"{split}_loss"], style, label=name)
        ax_err.plot(history["epoch"], [100 * (1 - a) for a in history[f"{split}_accuracy"]], style, label=name)
    val_error = torch.tensor([1 - a for a in history["val_accuracy"]])  # (epochs,) fractions
    band = 2 * torch.sqrt(val_error * (1 - val_error) / n_val)  # (epochs,) 2 standard errors
    ax_err.fill_between(history["epoch"], 100 * (val_error - band).clamp(min=1e-3), 100 * (val_error + band),
                        color="C1", alpha=0.2, label=f"validation ± 2 SE ({n_val} images)")
    ax_loss.set(title="Total loss (margin + 0.0005 × reconstruction)", xlabel="epoch", ylabel="loss")
    ax_err.set(title="Error (log axis)", xlabel="epoch", ylabel="error (%)", yscale="log")
    ax_err.set_yticks([0.5, 1, 2, 5, 10, 20, 50])
    ax_err.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    for ax in (ax_loss, ax_err):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.tight_layout()
    return fig


plot_history(history, len(val_part))
plt.show()
print("epoch   train loss  val loss   train acc  val acc")
for epoch, t_loss, v_loss, t_acc, v_acc in zip(history["epoch"], history["train_loss"], history["val_loss"],
                                               history["train_accuracy"], history["val_accuracy"]):
    print(f"{epoch:5d}   {t_loss:10.4f}  {v_loss:8.4f}   {t_acc:9.1%}  {v_acc:7.1%}")
last_accuracy = history["val_accuracy"][-1]
two_se = 2 * capsedu.standard_error(last_accuracy, len(val_part))
best_epoch = history["epoch"][min(range(len(history["epoch"])), key=history["val_loss"].__getitem__)]
best_accuracy = max(history["val_accuracy"])
print(f"validation: {len(val_part)} images, so 2 standard errors are {100 * two_se:.1f} points at the last "
      f"epoch's {last_accuracy:.1%}; lowest validation loss at epoch {best_epoch} of {len(history['epoch'])}")
print(f"last epoch's validation accuracy within 2 SE of its best ({best_accuracy:.1%}): "
      f"{best_accuracy - last_accuracy < two_se}")

# %% [markdown]
# Read the two lines under the table. The last epoch's validation accuracy is within two
# standard errors of the best one, so the run shows no sign of over-fitting that 500 images could
# reveal. Epoch-to-epoch wiggles smaller than that band are noise, not "better" or "worse". So is
# the gap between training and validation in the late epochs, where the training curve runs
# inside the validation band. Only the early epochs, where validation is far ahead of the
# epoch-averaged training numbers, can be read off the plot with confidence.

# %% [markdown]
# ### Test accuracy
#
# Now, once, the test split. `capsedu.evaluate` returns the mean loss and the accuracy (prediction =
# the longest capsule). With the official MNIST files this is the standard 10,000-image test set.

# %%
test_metrics = capsedu.evaluate(model, test_loader, device=device, progress=True)
print(f"test accuracy: {test_metrics['accuracy']:.2%} on {len(test_part):,} images "
      f"({test_full.source}); chance would be 10%")
assert test_metrics["accuracy"] > capsedu.choose(learner=0.9, fast=0.5), "training did not work"

# %% [markdown]
# ### Reconstructions
#
# The decoder redraws each test digit from its longest capsule. Above each pair: the true label and
# the prediction; dark vermillion marks a wrong prediction.

# %% mystnb={"image": {"alt": "Twenty test digits, two of each class 0 to 9, in two blocks; each block is a row of inputs labelled true and predicted class, with the decoder's blurry reconstruction from the longest capsule below. Nineteen are right and redrawn as their own digit. The one mistake, labelled in dark vermillion, is a thin 9 predicted as a 7, and it is redrawn as a 7."}}
shown = test_full.subset(20, seed=1)
reconstruction_grid(model, shown.images, shown.labels,
                    "Test digits (true → predicted) and their reconstructions")

# %% [markdown]
# ### Save a checkpoint, load it back
#
# `capsedu.save_checkpoint` stores the weights together with the configuration, the history and any
# metadata you like. It writes to a temporary file first and renames it, so an interrupted save
# never leaves a broken file. `capsedu.load_checkpoint` rebuilds the model from the stored
# configuration (and refuses files that contain code). Choose any path you like; the default sits
# next to this notebook in `checkpoints/`, which git ignores.

# %%
checkpoint_path = Path(capsedu.choose(learner="checkpoints/capsnet_cpu.pt",
                                      fast="checkpoints/capsnet_cpu_fast.pt"))
capsedu.save_checkpoint(checkpoint_path, model, history=history,
                        metadata={"test_accuracy": test_metrics["accuracy"], "epochs": epochs,
                                  "train_images": len(train_part), "data": test_full.source})
print(f"saved {checkpoint_path} ({checkpoint_path.stat().st_size / 1e6:.1f} MB)")

loaded, info = capsedu.load_checkpoint(checkpoint_path, expected_config=config)
with torch.no_grad():
    same = torch.equal(loaded(shown.images).lengths, model.eval()(shown.images).lengths)
assert same, "the loaded model predicts differently from the saved one"
print(f"loaded it back: same predictions; stored test accuracy {info['metadata']['test_accuracy']:.2%}")

# %% [markdown]
# ### Your CapsNet, trained the same way
#
# Now your network learns, from scratch, with your `train_step` in a plain loop: the recipe
# `capsedu.fit` used above, written out. The same training images in batches of 32, the same
# number of epochs, Adam at a learning rate of 0.001 multiplied by 0.96 after every epoch, and the
# same random shifts of up to 2 pixels. One training run says little about a recipe ([the
# statistics page](statistics.md)), so both networks train from three seeds: `capsedu.CapsNet`'s
# seed 0 is the network above, and the cell trains its seeds 1 and 2 with `capsedu.fit`. Each
# pair is then compared on the same test images.
#
# What differs besides who wrote the code? Your routing sends gradients back through all three
# iterations, while `capsedu.CapsNet` keeps `detach_inner=True`, through the last one only
# (lesson 03 trained both settings and found no measurable difference in accuracy). Built after
# the same seed in the same order, the two networks start from the same weights (the cell prints
# whether they do). For seeds 1 and 2 they also take their batches in the same seeded order;
# capsedu's seed 0 trained on the lesson's loader, which had already served other cells, so its
# batches came in another order.

# %%
def train_yours(seed: int) -> nn.Module:
    """Your network trained from seed ``seed`` with your train_step: capsedu.fit's recipe, written out."""
    capsedu.set_seed(seed)
    net = Net(config, pieces)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.96)  # × 0.96 after every epoch
    loader = DataLoader(train_part, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))
    net.train()
    for _ in range(epochs):
        for images, labels in loader:
            step(net, optimizer, capsedu.random_shift(images, max_shift=2), labels)
        decay.step()
    return net.eval()


def right_on_test(net: nn.Module) -> torch.Tensor:
    """(N,) True where ``net``'s longest capsule is the label, for each image of the test part."""
    net.eval()
    with torch.no_grad():
        return torch.cat([net(images).lengths.argmax(dim=1) == labels for images, labels in test_loader])


def same_start(seed: int) -> bool:
    """Do your network and capsedu.CapsNet, each built right after set_seed(seed), start with the same weights?"""
    capsedu.set_seed(seed)
    theirs = capsedu.CapsNet(config)
    capsedu.set_seed(seed)
    return all(torch.equal(a, b) for a, b in zip(as_capsnet(Net(config, pieces), config).state_dict().values(),
                                                  theirs.state_dict().values()))


seeds = capsedu.choose(learner=(0, 1, 2), fast=(0, 1))
print("same starting weights, seed by seed:", {seed: same_start(seed) for seed in seeds})
start = time.perf_counter()
yours_by_seed = {seed: train_yours(seed) for seed in seeds}
print(f"trained your network {len(seeds)} times in {(time.perf_counter() - start) / 60:.1f} min")

# %% [markdown]
# And `capsedu.CapsNet` from the same seeds (seed 0 is the network trained above):

# %%
start = time.perf_counter()
capsnets = {0: model}  # capsedu.CapsNet, seed 0: trained above
for seed in seeds[1:]:
    capsedu.set_seed(seed)
    capsnets[seed] = capsedu.CapsNet(config)
    seed_loader = DataLoader(train_part, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))
    capsedu.fit(capsnets[seed], seed_loader, epochs=epochs, device=device, lr=1e-3, lr_decay=0.96,
                augment=capsedu.random_shift, progress=False)
print(f"trained capsedu.CapsNet {len(seeds) - 1} more time{'s' if len(seeds) > 2 else ''} in "
      f"{(time.perf_counter() - start) / 60:.1f} min")

# %%
yours_vs_capsedu = {seed: capsedu.compare_paired("yours", right_on_test(yours_by_seed[seed]),
                                                 "capsedu", right_on_test(capsnets[seed])) for seed in seeds}
for seed, comparison in yours_vs_capsedu.items():
    print(f"seed {seed}: yours {comparison.accuracy_a:.2%}, capsedu.CapsNet {comparison.accuracy_b:.2%}; "
          f"yours minus capsedu {100 * comparison.gap:+.2f} ± {100 * comparison.standard_error:.2f} points "
          f"({comparison.only_a} only yours right, {comparison.only_b} only capsedu's right; "
          f"{'a tie' if comparison.tie else 'not a tie'})")
gaps = [100 * comparison.gap for comparison in yours_vs_capsedu.values()]
print(f"over {len(gaps)} seeds: mean gap {sum(gaps) / len(gaps):+.2f} points, from {min(gaps):+.2f} "
      f"to {max(gaps):+.2f}; ties: {sum(c.tie for c in yours_vs_capsedu.values())} of {len(gaps)}")

# %% [markdown]
# Read the lines above from the bottom. In every seed your network and `capsedu.CapsNet` tie on
# the same test digits, and the three gaps stay within a fraction of a point of zero. Over three
# trainings, building the network from your own pieces and training it with your own step changed
# nothing that 10,000 test digits can show. Each seed's two networks still disagree on some
# dozens of digits, split about evenly between them - even for seeds 1 and 2, which started from
# the same weights and took their batches in the same order. Training is a long chain of small steps, and two
# networks that begin alike need not end alike; that is why a recipe is judged over seeds, paired
# on the same images, and not by one run.

# %% [markdown]
# Your seed-0 network is saved as a checkpoint that lessons 07 and 13 can open in place of the
# shipped one (set `use_yours = True` there). It is stored as a `capsedu.CapsNet` holding your
# weights (`as_capsnet`, the check's mapping backwards); once your MyCapsNet passes its check, the
# two compute the same capsules.

# %%
my_checkpoint = Path(capsedu.choose(learner="checkpoints/my_capsnet.pt", fast="checkpoints/my_capsnet_fast.pt"))
capsedu.save_checkpoint(my_checkpoint, as_capsnet(yours_by_seed[seeds[0]], config),
                        metadata={"test_accuracy": yours_vs_capsedu[seeds[0]].accuracy_a,
                                  "trained_as": f"{Net.__name__}, lesson 06, seed {seeds[0]}", "epochs": epochs})
print(f"saved your seed-{seeds[0]} network as {my_checkpoint}")

# %% [markdown]
# ## Explore
#
# ### Which digits does it get wrong?
#
# Let's collect the predictions on the whole test part and look at the mistakes. Some are digits a
# person would hesitate over too; others are plain digits that this small, briefly trained network
# simply gets wrong.

# %%
def predict(model: capsedu.CapsNet, loader: DataLoader) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted class (N,) and capsule lengths (N, J) for every image of ``loader``."""
    model.eval()
    with torch.no_grad():
        lengths = torch.cat([model(images).lengths for images, _ in loader])  # (N, J)
    return lengths.argmax(dim=1), lengths


predictions, test_lengths = predict(model, test_loader)
test_labels = torch.cat([labels for _, labels in test_loader])  # (N,)
wrong = torch.nonzero(predictions != test_labels).flatten()
print(f"{len(wrong)} mistakes out of {len(test_labels):,} test images")
assert abs(1 - len(wrong) / len(test_labels) - test_metrics["accuracy"]) < 1e-6

# %% mystnb={"image": {"alt": "Twenty misclassified test digits in two blocks, each input labelled in dark vermillion with true and predicted class (for example 4 as 6, 6 as 0, 8 as 4, 1 as 8), with its reconstruction below. Some inputs are odd or ambiguous, others plain; every reconstruction is a blurry drawing of the predicted class, not the true one: the network redraws what it thought it saw."}}
if len(wrong) > 0:
    mistakes = wrong[:20]
    test_images = torch.cat([images for images, _ in test_loader])  # (N, 1, 28, 28)
    display(reconstruction_grid(model, test_images[mistakes], test_labels[mistakes],
                                "Mistakes (true → predicted) and what the network redrew"))

# %% [markdown]
# The reconstruction shows what the network *thought* it saw: a mistaken digit is redrawn from the
# capsule of the class it was taken for.
#
# ### The paper's configuration on a GPU
#
# `CapsNetConfig.paper()` is the network of the paper: 256 conv1 channels and 32 types of 8-D
# primary capsules (1,152 capsules). Compare its size with the CPU configuration above:

# %% tags=["nbval-check-output"]
paper_config = capsedu.CapsNetConfig.paper()
paper_model = capsedu.CapsNet(paper_config)
print(f"paper configuration: {sum(p.numel() for p in paper_model.parameters()):,} parameters, "
      f"{paper_config.num_primary_caps:,} primary capsules")

# %% [markdown]
# It is too slow to train on a laptop CPU, but on a GPU it is the network to train. To switch,
# change three lines of the training cells above:
#
# ```python
# config = capsedu.CapsNetConfig.paper()
# device = capsedu.default_device()       # CUDA, Apple's MPS, or the CPU if neither exists
# epochs = 50                             # the paper trains far longer than this lesson
# ```
#
# and use `batch_size=128` in the training loader. `capsedu.fit` moves the model to `device` and
# each batch with it. Use the full 60,000 training images (`CAPSEDU_DATA` pointing at the official
# files, or a network connection for the torchvision download). The paper reports a 0.25 % test
# error (99.75 % right) for this network with 3 routing iterations and the reconstruction loss
# (Sabour et al. 2017, Table 1).
#
# The course trained this network once on a GPU, with the recipe of the CapsNet it ships and the
# test split measured once at the end; [the training record](training_record.md) has the details.
# Its record, next to the CapsNet shipped with the course:

# %% tags=["nbval-check-output"]
paper_run = study("capsnet_paper")["network"]  # capsedu/zoo/studies/capsnet_paper.json
shipped_record = capsedu.pretrained_metrics("capsnet")
print(record_summary("paper-size CapsNet", paper_run))
error, error_se = 100 * (1 - paper_run["test_accuracy"]), 100 * paper_run["test_standard_error"]
print(f"    test error {error:.2f} ± {error_se:.2f} %, the paper's 0.25 %: "
      f"{(error - 0.25) / error_se:.1f} standard errors apart")
print(capsedu.shipped_summary("capsnet"))
for name, record in (("paper-size", paper_run), ("shipped", shipped_record)):
    width = record["recipe"]["config"]
    print(f"    {name:>10}: {width['conv1_channels']} conv1 channels, {width['primary_types']} primary capsule "
          f"types; {record['epochs'] * record['train_data']['images']:,} training images seen")
print("per-image test results recorded:",
      {"paper-size": "test_correct" in paper_run, "shipped": "test_correct" in shipped_record})
print("unpaired:", capsedu.compare_accuracies("paper-size", paper_run["test_accuracy"], 10_000,
                                              "shipped", shipped_record["test_accuracy"], 10_000))

# %% [markdown]
# The paper's error, 0.25 %, is within two of our standard errors of the paper-size network's
# error (printed above), so this run is consistent with the paper. The paper's number is the mean
# of three trainings; ours is one run, and its standard error covers the sampling of test images
# only, not how much another seed would move it.
#
# The shipped CapsNet is the narrow one (far fewer conv1 channels and capsule types, printed above),
# and it saw about a third as many training images. It ties with the paper-size network (the last
# line). This comparison is *unpaired*: the paper-size record keeps only its accuracy, not which
# test images it got right, and its weights are not shipped, so nothing can pair them image by
# image. An unpaired test is conservative (Exercise 2 shows by how much), so "a tie" here means
# only that 10,000 test digits cannot show what the width and the extra training bought. Lesson 13
# gives a CapsNet more width and epochs on harder images, clothes, where the narrow networks
# underfit.
#
# Whether this machine could train the paper's network in reasonable time depends on its device:
# `cpu` below means neither CUDA nor Apple's MPS is available, and the CPU configuration is the
# one to use here.

# %%
print("default device here:", capsedu.default_device())

# %% [markdown]
# ### Ideas to try
#
# - Train without `augment=capsedu.random_shift` and compare the validation curves.
# - Train without the reconstruction loss: pass `objective=capsedu.MarginObjective(recon_weight=0.0)`
#   to `capsedu.fit` (the default objective of a CapsNet is `capsedu.MarginObjective()`, with the
#   paper's weight 0.0005). Does accuracy change? Do the reconstructions?
# - Train for more epochs and watch the learning rate (`history["lr"]`) shrink.
# - Try `lr=2e-3, lr_schedule="onecycle"` in `capsedu.fit` (the learning rate rises for the first
#   20 % of the batches, then anneals to zero): it is the recipe of the network shipped with the
#   course (`python -m coursetools.train_zoo capsnet`; `capsedu.shipped_summary()` says how long it
#   trained and how accurate it is).

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: where the margin loss still pulls
#
# A trained network gets most test digits right. Does the margin loss (Eq. 4, lesson 04) leave
# those digits alone? Write `margin_violations(lengths, labels)`: for capsule lengths (B, J) and
# labels (B,), a (B,) tensor of True/False, True where that digit's margin loss is not zero. The
# cell after the check counts, on the test part, the digits the loss still pulls on, right and
# wrong ones, and which of its two terms pulls. Before you run it, guess: more or fewer than the
# network's mistakes?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def margin_violations(lengths: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """True for each digit whose margin loss is not zero, (B, J), (B,) -> (B,)."""
    ### BEGIN SOLUTION
    present = torch.nn.functional.one_hot(labels, lengths.shape[1]).bool()  # (B, J)
    too_short = (lengths < 0.9) & present  # the true capsule below m+
    too_long = (lengths > 0.1) & ~present  # an absent class above m-
    return (too_short | too_long).any(dim=1)  # (B,)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_margin_violations(margin_violations)

# %%
if result:
    pulled = margin_violations(test_lengths, test_labels)  # (N,)
    right = predictions == test_labels
    true_length = test_lengths.gather(1, test_labels[:, None])[:, 0]  # (N,)
    rival_length = test_lengths.scatter(1, test_labels[:, None], 0.0).amax(dim=1)  # (N,) longest other
    short, long_rival = true_length < 0.9, rival_length > 0.1
    print(f"the margin loss still pulls on {int(pulled.sum()):,} of {len(test_labels):,} test digits: "
          f"{int((pulled & right).sum()):,} of them classified right, {int((pulled & ~right).sum())} wrong "
          f"(every mistake is pulled: {bool(pulled[~right].all())})")
    print(f"among the {int((pulled & right).sum()):,} right ones: true capsule under 0.9 in "
          f"{int((right & short).sum()):,}, another capsule over 0.1 in {int((right & long_rival).sum()):,}")
    print(f"true capsules of the right digits: median length {float(true_length[right].median()):.2f}")
else:
    print("→ this cell runs once Exercise 1 passes its check")

# %% [markdown]
# The loss leaves few digits alone, and nearly all that it pulls on are classified right: the
# mistakes are a small share of them. Eq. 4 asks for more than the right argmax. It wants the
# true capsule past $m^+$ and every rival under $m^-$, and here the median true capsule of a right
# digit is 0.87 long, still short of 0.9; in many right digits a rival is also too long (the
# counts above). High accuracy does not mean training is over: the loss keeps lengthening the
# true capsules and shortening the rivals, so that a capsule's length becomes a confident
# "present" or "absent" - the reading that lesson 09 relies on when two digits overlap.
#
# ### Exercise 2: switch routing off
#
# Routing starts from uniform couplings, every $c_{ij} = 1/J$, and then moves them towards the
# digit capsules that the votes agree on. What does the network say with no agreement step at
# all, the couplings left uniform? Write `uniform_lengths(model, images)` returning the digit
# capsules' lengths (B, J) with every $c_{ij} = 1/J$ (Eq. 2 and Eq. 1, lesson 03), from the
# model's own votes û (`model.class_caps.prediction_vectors(model.encode(images))`,
# (B, I, J, D)). The cell after the check compares the network's accuracy with and without routing.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def uniform_lengths(model: capsedu.CapsNet, images: torch.Tensor) -> torch.Tensor:
    """Digit-capsule lengths (B, J) when every coupling is 1/J."""
    ### BEGIN SOLUTION
    u_hat = model.class_caps.prediction_vectors(model.encode(images))  # (B, I, J, D)
    s = u_hat.sum(dim=1) / u_hat.shape[2]  # (B, J, D): c_ij = 1/J
    return capsedu.squash(s).norm(dim=-1)  # (B, J)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_uniform_lengths(uniform_lengths)

# %%
if result:
    with torch.no_grad():
        uniform = torch.cat([uniform_lengths(model, images) for images, _ in test_loader]).argmax(dim=1)
    routed_right, uniform_right = predictions == test_labels, uniform == test_labels  # (N,) each
    paired = capsedu.compare_paired("routed", routed_right, "uniform", uniform_right)
    print(f"routed (r = {config.routing_iterations}): {capsedu.with_error(paired.accuracy_a, paired.images)}; "
          f"uniform couplings: {capsedu.with_error(paired.accuracy_b, paired.images)}")
    print(f"both right: {int((routed_right & uniform_right).sum()):,}   both wrong: "
          f"{int((~routed_right & ~uniform_right).sum())}   only routed right: {paired.only_a}   "
          f"only uniform right: {paired.only_b}")
    print("paired:  ", paired)
    print("unpaired:", capsedu.compare_accuracies("routed", paired.accuracy_a, paired.images,
                                                  "uniform", paired.accuracy_b, paired.images))
    unpaired_se = (capsedu.standard_error(paired.accuracy_a, paired.images) ** 2
                   + capsedu.standard_error(paired.accuracy_b, paired.images) ** 2) ** 0.5
    print(f"the unpaired standard error is {unpaired_se / paired.standard_error:.1f} times the paired one")
else:
    print("→ this cell runs once Exercise 2 passes its check")

# %% [markdown]
# This switches routing off at test time in a network *trained* with three iterations, which asks
# it something it never saw.
#
# **How to compare two classifiers on the same images.** Both versions answered the same test
# images, so sort the images into four groups (the counts line above). The images both get right
# are most of them, and the images both get wrong are a handful: neither group says which version
# is better. Only the images where the two *disagree* carry that information. If the two were
# equally good, each disagreement would be a fair coin toss between them. McNemar's exact test
# asks how likely a split at least as lopsided as "only routed right" against "only uniform right"
# is for a fair coin: that is the p on the paired line. The paired standard error comes from the
# same disagreements, and the course calls a gap a tie when it is under two of them or p ≥ 0.05.
#
# The unpaired line treats the two accuracies as if they came from different test images. Its
# standard error then includes how hard the test images happen to be, although both versions
# faced the same ones, and here it comes out about three times too wide (the ratio printed last). Use
# `capsedu.compare_paired` whenever two classifiers answer the same images; keep
# `capsedu.compare_accuracies` for accuracies measured on different images.
#
# In this small, briefly trained network the plain sum of the votes (scaled by 1/J) picks the
# same digit as routing on all but a few dozen of the 10,000 images. But that is one trained
# network, and its standard error covers the sampling of test images, not the training run: a
# network trained from another seed has other weights and may disagree elsewhere. The next cell
# asks the same of the other seeds of `capsedu.CapsNet` trained beside your network:

# %%
if result:
    comparisons = {0: paired}
    for seed, other in list(capsnets.items())[1:]:
        other_routed, _ = predict(other, test_loader)
        with torch.no_grad():
            other_uniform = torch.cat([uniform_lengths(other, images) for images, _ in test_loader]).argmax(dim=1)
        comparisons[seed] = capsedu.compare_paired("routed", other_routed == test_labels,
                                                   "uniform", other_uniform == test_labels)
    for seed, comparison in comparisons.items():
        print(f"seed {seed}: routed {comparison.accuracy_a:.2%}, uniform {comparison.accuracy_b:.2%}; "
              f"routed minus uniform {100 * comparison.gap:+.2f} ± {100 * comparison.standard_error:.2f} points "
              f"({comparison.only_a} only routed right, {comparison.only_b} only uniform right; "
              f"{'a tie' if comparison.tie else 'not a tie'})")
    gaps = [100 * comparison.gap for comparison in comparisons.values()]
    print(f"over {len(gaps)} seeds: mean gap {sum(gaps) / len(gaps):+.2f} points, "
          f"from {min(gaps):+.2f} to {max(gaps):+.2f}")
else:
    print("→ this cell runs once Exercise 2 passes its check")

# %% [markdown]
# The spread over seeds (the last line) shows how much the gap moves from one training to the
# next, next to the test-sampling error each seed's line carries. Here it hardly moves: every seed
# gives uniform couplings the same small lead, a tie each time, so the verdict belongs to the
# recipe and not to one lucky run. Three seeds give a range, not a distribution, but they show
# whether one run's verdict holds. The paper trained both settings, three times each (its
# Table 1, test error on MNIST with the reconstruction loss, mean ± standard deviation of three
# trainings): 1 iteration 0.29 ± 0.011 %, 3 iterations 0.25 ± 0.005 %. Routing bought a small gain
# there, far smaller than what 10,000 test images let us tell apart here. Lessons 07 and 12 come
# back to how much routing changes a prediction.

# %% [markdown]
# ## Summary
#
# - Your pieces from lessons 01-05 make a CapsNet. Copying a trained network's weights into a
#   reimplementation and comparing every stage is how to test it: a wrong stage shows at once,
#   where training would only come out a little worse.
# - A training step is `zero_grad` → loss → `backward` → `step`; the CapsNet loss is the margin loss
#   plus 0.0005 × the reconstruction loss, with the decoder masked by the true labels.
# - A network compared with another over several seeds, paired on the same test images each time,
#   tells a recipe's difference from one run's luck.
# - Memorising one batch is the quickest test that a training setup works at all.
# - `capsedu.fit` trains with Adam, an exponentially decaying learning rate (× 0.96 per epoch here,
#   a faster decay than the paper's code) and random shifts, and returns a history for loss and
#   accuracy curves; `capsedu.evaluate` measures held-out accuracy.
# - Even the small CPU CapsNet reaches high test accuracy in minutes; its mistakes and their
#   reconstructions show what it thought it saw.
# - Two classifiers on the same images are compared *paired* (`capsedu.compare_paired`): only the
#   images where they disagree carry information, and McNemar's exact test asks whether their split
#   could be a fair coin's. The unpaired error bar is too wide (here about three times).
# - One training run's standard error covers test sampling only; how much a result moves with the
#   seed needs more runs.
# - `capsedu.save_checkpoint` / `capsedu.load_checkpoint` keep a trained network with its
#   configuration; `CapsNetConfig.paper()` with `default_device()` trains the paper's network on a GPU.

# %% [markdown]
# ## Self-check
#
# A few questions to test your understanding; click an option to see whether it is right.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("06")

# %% [markdown]
# ## What's next
#
# You have trained a Capsule Network. **Lesson 07** looks inside a trained one: what does each of
# the 16 dimensions of a digit capsule change in the reconstruction, and how does routing behave
# on a digit the network gets wrong? It uses the network shipped with the course
# (`capsedu.pretrained()`); you can load yours instead with
# `model, info = capsedu.load_checkpoint("checkpoints/capsnet_cpu.pt")`.
