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
# # Lesson 02 — Primary capsules
#
# The first capsules of a CapsNet come from two ordinary convolutions. **conv1** turns the 28×28
# digit into 256 feature maps of 20×20, and the **primary-capsule convolution** turns those into
# 256 maps of 6×6. These 256 channels are read as **32 capsule types × 8 dimensions**: at each of
# the 6×6 positions, each type gives one 8-D vector. That makes 32·6·6 = **1,152 primary capsules**,
# squashed with lesson 01's function. In this lesson you build the layer with `nn.Conv2d`, follow
# every tensor shape and write the reshape that turns channels into capsules. You see how a wrong
# reshape order silently produces different (meaningless) capsules, check your capsules against
# `capsedu.PrimaryCaps`, and measure what a trained network's primary capsules carry.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can:
#
# - compute the output size of each convolution and follow (B,1,28,28) → (B,256,20,20) →
#   (B,256,6,6) → (B,1152,8);
# - turn a convolution's channels into capsules with `view`, `permute` and `reshape`, and explain
#   why the order of these matters;
# - count the parameters of conv1 and of the primary-capsule layer;
# - read a map of capsule lengths over the grid, and explain what changes when the digit moves;
# - measure whether a primary capsule's length or its direction tells what is in its window.

# %% [markdown]
# ## Prerequisites and time
#
# **You need:** lessons 00 and 01 (capsules as vectors, squash), `nn.Conv2d` (kernel, stride, how
# the output size is computed), and `Tensor.view` / `permute` / `reshape`. **Time:** about 45 minutes.

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.primary import (
    check_grid_size,
    check_length_and_turn,
    check_to_capsules,
    reference_length_and_turn,
    reference_to_capsules,
)
from capsedu.explore.palette import COURSE_STYLE, HATCHES, TEXT_VERMILLION, VERMILLION
from capsedu.explore.probes import length_maps

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
generator = capsedu.set_seed(0)  # seeds Python, NumPy and PyTorch
train = capsedu.load_mnist("train")
picked = [int((train.labels == k).nonzero()[0]) for k in (0, 3, 4, 7)]  # the first 0, 3, 4 and 7
x = train.images[picked]  # (B, 1, 28, 28): four real digits
labels = train.labels[picked]

# %% [markdown]
# ## Build it
#
# The paper's network (Figure 1) starts like this:
#
# | step | layer | output shape | why |
# | --- | --- | --- | --- |
# | input | a batch of MNIST digits | (B, 1, 28, 28) | |
# | conv1 | 256 filters 9×9, stride 1, ReLU | (B, 256, 20, 20) | no padding: the map shrinks (Exercise 1) |
# | primary conv | 32·8 = 256 filters 9×9, stride 2 | (B, 256, 6, 6) | stride 2: about half as many positions |
# | to capsules | split channels into 32 types × 8 dims, one capsule per type and position | (B, 1152, 8) | 32·6·6 = 1152 |
# | squash | Eq. 1 on each 8-D vector | (B, 1152, 8) | lengths in [0, 1) |
#
# ### Step 1: conv1
#
# An ordinary convolution with 256 filters of 9×9 pixels followed by a ReLU. It detects local
# features (edges, stroke ends, curves) at every position.

# %% tags=["nbval-check-output"]
conv1 = nn.Conv2d(in_channels=1, out_channels=256, kernel_size=9)
features1 = torch.relu(conv1(x))  # (B, 256, 20, 20)
print(f"input x:        {tuple(x.shape)}")
print(f"after conv1:    {tuple(features1.shape)}")

# %% [markdown]
# ### Step 2: the primary-capsule convolution
#
# A second convolution, again 9×9 but with stride 2, and **no ReLU**: its outputs are capsule
# components, which may be negative (a pose can point anywhere). The paper describes 32 "channels"
# of convolutional 8-D capsules — in PyTorch that is one `Conv2d` with 32·8 = 256 output channels.

# %% tags=["nbval-check-output"]
num_types, caps_dim = 32, 8
primary_conv = nn.Conv2d(256, num_types * caps_dim, kernel_size=9, stride=2)
features2 = primary_conv(features1)  # (B, T*D, 6, 6)
print(f"after primary conv: {tuple(features2.shape)}  = (B, T*D, H, W) with T={num_types}, D={caps_dim}")

# %% [markdown]
# ### Why these sizes, and why no pooling
#
# - **9×9 kernels.** Two 9×9 convolutions give each primary capsule a 17×17-pixel window: most of
#   a stroke, a loop or a corner of the digit. A capsule is meant to describe a *part* and its
#   pose, which needs a view of the whole part; three 3×3 layers would see only 7×7 pixels.
# - **8 dimensions.** Enough numbers for a part's pose (position within the window, orientation,
#   thickness, size, ...) and few enough to keep the next layer's 1,152 × 10 matrices of 16×8
#   manageable. The paper does not tune it; later lessons' digit capsules use 16.
# - **32 types.** 32 kinds of parts, each looked for at all 36 positions (the convolution shares
#   its weights over positions, as in any CNN). More types cost parameters and routing time;
#   `CapsNetConfig.cpu()` keeps 8.
# - **No pooling.** Max-pooling keeps the strongest response and throws away *where* it was
#   (lesson 00). Capsules keep it twice: in *which* capsule fires (its grid position, "place
#   coding") and in the capsule's values (finer position, "rate coding"). The stride-2 convolution
#   lowers the resolution without discarding anything a later layer could need.

# %% [markdown]
# ### Step 3: from channels to capsules (your code)
#
# We decide that channel `t*8 + d` holds dimension `d` of capsule type `t`: eight consecutive
# channels form one type. The capsule of type `t` at grid position (y, x) is the vector of those
# eight channels' values at (y, x).
#
# **Your task.** Write `my_to_capsules(features, num_types, caps_dim)`. It takes the primary
# convolution's output, shape (B, T·D, H, W), and returns the squashed capsules, shape
# (B, T·H·W, D), listed **type-major**: type 0 at all H·W positions first (row by row), then
# type 1, and so on, so capsule `i = t*H*W + y*W + x`. Squash each D-dimensional vector with
# `capsedu.squash` (lesson 01). The check runs your function on a layer of another size.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_to_capsules(features: torch.Tensor, num_types: int, caps_dim: int) -> torch.Tensor:
    """(B, T*D, H, W) primary-conv output -> (B, T*H*W, D) squashed capsules, type-major."""
    batch, _, height, width = features.shape
    ### BEGIN SOLUTION
    u = features.view(batch, num_types, caps_dim, height, width)  # (B, T, D, H, W)
    u = u.permute(0, 1, 3, 4, 2)  # (B, T, H, W, D)
    u = u.reshape(batch, num_types * height * width, caps_dim)  # (B, I, D)
    return capsedu.squash(u, dim=-1)  # (B, I, D)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_to_capsules(my_to_capsules)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
to_capsules = yours_or_reference(check_to_capsules, my_to_capsules, reference_to_capsules, name="my_to_capsules")

# %% [markdown]
# One way to write it, the one `capsedu` uses (and the official code's
# `transpose([0, 1, 3, 4, 2])`):
#
# 1. `view(B, T, D, H, W)` splits the 256 channels into (32 types, 8 dimensions);
# 2. `permute(0, 1, 3, 4, 2)` moves the capsule dimension D last: (B, T, H, W, D);
# 3. `reshape(B, T*H*W, D)` lists the capsules type-major. `reshape`, not `view`, because after
#    `permute` the memory is no longer in that order;
# 4. squash each 8-D vector.
#
# The check also knows the usual wrong answers: a bare `.view(B, -1, D)`, the channels split as
# (D, T) instead of (T, D), a position-major order, a missing squash, and `.view` after `permute`.

# %% tags=["nbval-check-output"]
u = to_capsules(features2, num_types, caps_dim)  # (B, 1152, 8)
assert (u.norm(dim=-1) < 1).all()
print(f"primary capsules u: {tuple(u.shape)}, every length < 1")
print(f"parameters: conv1 {sum(p.numel() for p in conv1.parameters()):,}, "
      f"primary conv {sum(p.numel() for p in primary_conv.parameters()):,}")

# %% [markdown]
# The primary layer is the biggest layer of the network: 256·256·9·9 weights + 256 biases =
# 5,308,672 parameters, about two thirds of the whole CapsNet (Sabour et al. count 8.2 million).
#
# ### Why the order matters
#
# A tempting shortcut is `features.view(B, -1, 8)`: the shape comes out right, (B, 1152, 8), and
# nothing raises an error. But `view` reads the tensor in memory order — channel by channel, and
# within a channel row by row — so each "capsule" is 8 **neighbouring pixels of one channel**, not
# the 8 channels of one type at one position. The picture shows it for a toy layer with T=2 types,
# D=3 dimensions and a 2×2 grid: each cell is one number of the conv output (row = channel,
# column = position), labelled with the capsule it ends up in.

# %% mystnb={"image": {"alt": "Two colour-coded grids showing which capsule each number of a toy conv output (6 channels by 4 grid positions: 2 types, 3 dimensions, 2 by 2 grid) lands in. Left, view, permute, reshape: each capsule is a vertical block of the 3 channels of one type at one position, capsules 0 to 3 for type 0 and 4 to 7 for type 1. Right, the shortcut view: capsules run along a channel across positions and wrap into the next channel."}}
toy_types, toy_dim, toy_grid = 2, 3, 2
toy = torch.arange(toy_types * toy_dim * toy_grid * toy_grid, dtype=torch.float32)
toy = toy.view(1, toy_types * toy_dim, toy_grid, toy_grid)  # (1, T*D, H, W): each number its own id


def owner_map(capsules: torch.Tensor) -> np.ndarray:
    """For each number of `toy` (channel, position): the index of the capsule that holds it."""
    owners = np.zeros((toy_types * toy_dim, toy_grid * toy_grid), dtype=int)
    for i, capsule in enumerate(capsules[0]):
        for value in capsule.tolist():
            channel, position = divmod(int(value), toy_grid * toy_grid)
            owners[channel, position] = i
    return owners


right = toy.view(1, toy_types, toy_dim, toy_grid, toy_grid).permute(0, 1, 3, 4, 2).reshape(1, -1, toy_dim)
wrong = toy.view(1, -1, toy_dim)  # the shortcut (no squash: we only track where numbers go)
fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
for ax, capsules, title in [(axes[0], right, "view(B,T,D,H,W) → permute → reshape\n"
                                                  "capsule = one type at one position"),
                            (axes[1], wrong, "shortcut view(B, -1, D)\n"
                                             "capsule = neighbouring pixels of one channel")]:
    owners = owner_map(capsules)
    ax.imshow(owners, cmap="viridis", vmin=0, vmax=7, aspect="auto")
    for (row, col), owner in np.ndenumerate(owners):  # white on viridis' dark end, black on its light end
        ax.text(col, row, f"capsule {owner}", ha="center", va="center", fontsize=9,
                color="white" if owner < 4 else "black", fontweight="bold")
    ax.set_xticks(range(4), [f"(y={p // 2}, x={p % 2})" for p in range(4)], fontsize=8)
    ax.set_yticks(range(6), [f"ch {c}: type {c // 3}, dim {c % 3}" for c in range(6)], fontsize=8)
    ax.set(xlabel="grid position", title=title)
axes[0].set_ylabel("conv output channel")
fig.suptitle("Which capsule each number of the conv output lands in (T=2, D=3, 2×2 grid)")
plt.show()

# %% [markdown]
# On the left, each capsule is a vertical run of 3 cells: the 3 dimensions of one type at one
# position. On the right, capsules run *across positions* and even wrap from one channel to the
# next (capsule 1 takes the last position of channel 0 and the first two of channel 1). Such a
# vector cannot be "the pose of a part at a place". At the paper's size:

# %% tags=["nbval-check-output"]
u_wrong = capsedu.squash(features2.view(x.shape[0], -1, caps_dim))  # (B, 1152, 8) - same shape!
same = torch.isclose(u, u_wrong).all(dim=-1)  # (B, I): capsules that happen to coincide
print(f"shapes: right {tuple(u.shape)}, shortcut {tuple(u_wrong.shape)}")
print(f"capsules identical in both layouts: {int(same.sum())} of {same.numel()}")
assert not same.any()

# %% [markdown]
# The network would still *run* with the wrong layout — no error anywhere — and it might even learn
# something, because the layers after it are trained on whatever they receive. But squash would
# normalise numbers from different places together, each capsule's "pose" would mix positions, and
# weights trained with one layout (like the ones lesson 07 loads) would be read in another. Shape
# checks cannot catch this; only a test against a reference can.
#
# You will meet this bug in the wild: two of this course's own sources contain it.
#
# - The "Advanced Capsule Networks" notebook's `PrimaryCaps` writes
#   `out.view(batch_size, self.num_caps, self.dim_caps, -1)` and then
#   `out.view(batch_size, self.num_caps * out.size(-1), self.dim_caps)`. Two views, no permute:
#   the same memory order as `.view(B, -1, D)`.
# - The MultiMNIST blog post's PyTorch port of Aurélien Géron's TensorFlow CapsNet reshapes
#   the conv output straight to (B, 1152, 8). Géron's tensors are channels-last, (B, H, W, C), so
#   there eight consecutive numbers are eight channels of one position: a correct, position-major
#   layout. PyTorch's are channels-first, (B, C, H, W), and the same reshape becomes the shortcut.

# %% [markdown]
# ## Check it
#
# `capsedu.PrimaryCaps(in_channels, num_types, caps_dim, kernel_size, stride)` is the reference
# layer: its own `Conv2d` (`.conv`) followed by the type-major reshape and squash. Give it **our
# weights** and it must produce exactly our capsules.

# %% tags=["nbval-check-output"]
reference = capsedu.PrimaryCaps(in_channels=256, num_types=32, caps_dim=8, kernel_size=9, stride=2)
reference.conv.load_state_dict(primary_conv.state_dict())  # same weights and biases
with torch.no_grad():
    expected = reference(features1)  # (B, 1152, 8)
torch.testing.assert_close(u, expected)
assert not torch.allclose(u_wrong, expected)
print(f"our capsules equal capsedu.PrimaryCaps's: {tuple(u.shape)}; the shortcut's do not")

# %% [markdown]
# ## Use capsedu
#
# From now on, `capsedu.CapsNet.encode(x)` does all of this: conv1, ReLU and `PrimaryCaps`. Load
# our two convolutions into a paper-sized `CapsNet` and its encoder reproduces our capsules:

# %% tags=["nbval-check-output"]
net = capsedu.CapsNet(capsedu.CapsNetConfig.paper())
net.conv1.load_state_dict(conv1.state_dict())
net.primary.conv.load_state_dict(primary_conv.state_dict())
with torch.no_grad():
    torch.testing.assert_close(net.encode(x), u)
print(net.primary)
print(f"CapsNet.encode: {tuple(x.shape)} -> {tuple(net.encode(x).shape)}, equal to ours")

# %% [markdown]
# The course trains a narrower network on CPUs (`CapsNetConfig.cpu()`: fewer conv1 channels and
# capsule types). Same grid, same 8-D capsules, fewer of them:

# %% tags=["nbval-check-output"]
for name, config in [("paper", capsedu.CapsNetConfig.paper()), ("cpu", capsedu.CapsNetConfig.cpu())]:
    model = capsedu.CapsNet(config)
    with torch.no_grad():
        shape = tuple(model.encode(x).shape)
    print(f"{name:5s}: conv1 {config.conv1_channels} channels, {config.primary_types} types on a "
          f"{config.primary_grid}×{config.primary_grid} grid -> u {shape}, "
          f"primary layer {sum(p.numel() for p in model.primary.parameters()):,} parameters")

# %% [markdown]
# ## Explore
#
# ### Capsule lengths over the 6×6 grid
#
# Each primary capsule at grid position (y, x) sees a 17×17-pixel window of the image (9 pixels of
# conv1, widened by the 9×9, stride-2 primary convolution), centred on pixel (2y + 8, 2x + 8). So
# the 36 positions are only 2 pixels apart and cover the central 12×12 pixels (solid green), while
# their windows overlap heavily (dashed blue: the window of position (2, 3), centred on the blue dot).
# Below, the **longest** capsule at each position (over the 32 types), drawn over the digit and as
# a plain 6×6 map.
#
# **This network is untrained** (random weights): the lengths only say where random filters
# respond to the ink, not which parts a trained network has learned to find — lesson 07 shows
# trained capsules. Even so, the maps differ from digit to digit, mostly following how much ink
# each window holds.

# %% mystnb={"image": {"alt": "Top row: a 0, 3, 4 and 7, each overlaid with a colour map of the longest primary capsule at each of the 6 by 6 grid positions of an untrained network; a solid green square marks the central 12 by 12 pixels the grid covers, a dashed blue square the 17 by 17 pixel window of one position. Bottom row: the same maps alone on a shared colour scale; the patterns differ from digit to digit, the 4's being shortest overall."}}
with torch.no_grad():
    lengths = length_maps(u, num_types)  # (B, T, H, W): type-major, as built
    blank_caps = to_capsules(primary_conv(torch.relu(conv1(torch.zeros(1, 1, 28, 28)))), num_types, caps_dim)
blank_lengths = blank_caps.norm(dim=-1)  # (1, I)
longest = lengths.max(dim=1).values  # (B, H, W)
vmax = float(longest.max())

fig, axes = plt.subplots(2, 4, figsize=(10, 5.6), layout="constrained")
for col in range(4):
    top, bottom = axes[0, col], axes[1, col]
    top.imshow(x[col, 0], cmap="gray_r")
    top.imshow(longest[col], cmap="viridis", alpha=0.6, vmin=0, vmax=vmax, extent=(7, 19, 19, 7))
    top.contour(x[col, 0], levels=[0.5], colors="k", linewidths=0.9)  # the digit's outline, on top
    top.add_patch(plt.Rectangle((7, 7), 12, 12, fill=False, color="C2", lw=1.5))
    window_y, window_x = 2, 3  # one grid position: its 17x17 window starts at pixel (2y, 2x)
    top.add_patch(plt.Rectangle((2 * window_x - 0.5, 2 * window_y - 0.5), 17, 17, fill=False,
                                ls="--", color="C0", lw=1.5))
    top.plot(2 * window_x + 8, 2 * window_y + 8, "o", color="C0", ms=4)
    top.set_title(f"label {int(labels[col])}\n6×6 grid: green, solid\nwindow of (2, 3): blue, dashed",
                  fontsize=9)
    top.set(xticks=[], yticks=[], xlim=(-0.5, 27.5), ylim=(27.5, -0.5))
    image = bottom.imshow(longest[col], cmap="viridis", vmin=0, vmax=vmax)
    bottom.set_title("longest capsule per position", fontsize=9)
    bottom.set(xticks=range(6), yticks=range(6), xlabel="grid x")
axes[1, 0].set_ylabel("grid y")
fig.colorbar(image, ax=axes[1, :], shrink=0.8, label="capsule length")
fig.suptitle("Primary-capsule lengths of an UNTRAINED network (random weights) on real digits")
plt.show()
print(f"for comparison, a blank image gives lengths of {float(blank_lengths.min()):.3f} to "
      f"{float(blank_lengths.max()):.3f} everywhere")

# %% [markdown]
# ### Move the digit, move the capsules
#
# Convolutions are shift-equivariant, and the primary layer has total stride 2. So shifting the
# digit 2 pixels to the right should shift every capsule one cell to the right on the grid,
# unchanged. The **place** of a part is coded by *which* capsule is active ("place coding"),
# finer changes of position by the *values* inside it ("rate coding").

# %% tags=["nbval-check-output"]
digit = x[:1]  # (1, 1, 28, 28)
shifted = torch.roll(digit, shifts=2, dims=-1)
assert digit[..., -2:].abs().max() == 0  # the last two columns are blank, so the roll loses nothing
with torch.no_grad():
    maps = [to_capsules(primary_conv(torch.relu(conv1(image))), num_types, caps_dim)
            .view(1, num_types, 6, 6, caps_dim) for image in (digit, shifted)]  # (1, T, H, W, D) each
torch.testing.assert_close(maps[1][:, :, :, 1:], maps[0][:, :, :, :-1])
print("shifting the digit by 2 pixels moves every capsule by exactly one grid cell")

# %% [markdown]
# Things to try:
#
# - Shift the digit by **1** pixel instead of 2. Are the capsules still just moved? Which numbers
#   change, and how much compared with the lengths?
# - Replace `permute(0, 1, 3, 4, 2)` in your `my_to_capsules` by `permute(0, 3, 4, 1, 2)` (position-major).
#   Is that wrong, or only different? What would break if the next layer's weights were trained with
#   the other order?
# - How many primary capsules would a 32×32 input give? Compute it, then check with
#   `capsedu.CapsNetConfig(image_size=32).num_primary_caps`.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the size of the grid
#
# Write `grid_size(image_size, conv1_kernel, primary_kernel, primary_stride)` returning the side of
# the primary-capsule grid (6 for the paper). conv1 has stride 1 and no padding; the primary
# convolution has no padding either. Work out how many positions a kernel fits into a row of
# pixels with a given stride (a drawing of a short row helps), then chain the two layers. The
# check tries other image sizes too.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def grid_size(image_size: int, conv1_kernel: int, primary_kernel: int, primary_stride: int) -> int:
    ### BEGIN SOLUTION
    after_conv1 = image_size - conv1_kernel + 1
    return (after_conv1 - primary_kernel) // primary_stride + 1
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_grid_size(grid_size)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 2: length or direction?
#
# A capsule has two things that could tell what is in its window: its length and its direction.
# Design the measurement that compares two sets of capsules, `u` (B, I, D) and `u_ref` (B, I, D)
# or (1, I, D) (one reference for every image), capsule by capsule. Write
# `length_and_turn(u, u_ref)` returning two (B, I) tensors:
#
# - how much longer each capsule of `u` is than its counterpart in `u_ref` (negative if shorter);
# - the angle between the two capsules, in degrees (0: same direction, 180: opposite).
#
# The lesson then feeds it the primary capsules of the network shipped with the course,
# `capsedu.pretrained()`, for the four digits, against those of a blank image and against those
# of another digit. That network was trained for 15 epochs on 55,000 digits with a one-cycle
# learning rate, as the line printed below says; [the training record](training_record.md) has
# its whole recipe and validation curve. Before you run it, predict: which of the two numbers will
# change more?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def length_and_turn(u: torch.Tensor, u_ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Capsules u (B, I, D) against u_ref (B or 1, I, D) -> (length change, angle in degrees), (B, I) each."""
    ### BEGIN SOLUTION
    change = u.norm(dim=-1) - u_ref.norm(dim=-1)  # (B, I)
    cosine = torch.nn.functional.cosine_similarity(u, u_ref.expand_as(u), dim=-1)  # (B, I)
    return change, torch.rad2deg(torch.acos(cosine.clamp(-1.0, 1.0)))  # (B, I), (B, I)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_length_and_turn(length_and_turn)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
measure = yours_or_reference(check_length_and_turn, length_and_turn, reference_length_and_turn,
                             name="length_and_turn")
trained = capsedu.pretrained()  # the CPU configuration: 32 conv1 channels, 8 capsule types
print(capsedu.shipped_summary("capsnet"))
with torch.no_grad():
    digit_u = trained.encode(x)  # (4, I, D): the four digits
    blank_u = trained.encode(torch.zeros(1, 1, 28, 28))  # (1, I, D): no ink at all
    other_u = trained.encode(x.flip(0))  # (4, I, D): each digit's capsules against another digit's
for name, reference_u in (("a blank image", blank_u), ("another digit", other_u)):
    change, angle = measure(digit_u, reference_u)  # (4, I) each
    print(f"digit against {name:13s}: length change median {float(change.abs().median()):.3f}, "
          f"largest {float(change.abs().max()):.3f}; direction turned by a median "
          f"{float(angle.median()):.0f} degrees, {float((angle > 30).float().mean()):.0%} of capsules by over 30")

# %% [markdown]
# The direction, by far. Put ink in front of the trained network's primary capsules and their
# lengths hardly change: by a median 0.023, at most 0.077. Their directions turn by a median 61
# degrees, 89 % of them by over 30. Swap one digit for another and the lengths change even less
# (median 0.001), while the directions still turn. So in this network *what* a primary capsule
# sees is carried by its direction: the 8 numbers that lesson 03 turns into votes. That is not the
# picture the paper's description of capsules suggests ("the length of the activity vector" as the
# probability that an entity exists). One plausible reason: nothing in the loss asks primary
# capsules to be short — the margin loss (lesson 04) constrains only the digit capsules' lengths.

# %% [markdown]
# Where does that leave the lengths? Squash hides them: every input longer than 3 comes out
# between 0.9 and 1 (lesson 01's Exercise 1). So look one step earlier, at $\lVert\mathbf s\rVert$,
# the length *before* squash, on a log scale. Below are the same four digits, one row per digit
# and one 6×6 map per capsule type, and in the last row a blank image.

# %% mystnb={"image": {"alt": "First: one row per digit (0, 3, 4, 7) and one for a blank image, each with eight 6 by 6 maps, one per capsule type, of the trained network's ||s|| before squash, on a log colour scale; the digits' maps vary by type and place, the blank's are flat and darker. Second: log-axis histogram: the blank image's capsules (hatched) lie between 3.45 and 11.16, the digits' higher (median 32.73), all beyond ||s|| = 3, where squash gives 0.9."}}
types = trained.config.primary_types


def pre_squash_norms(images: torch.Tensor) -> torch.Tensor:
    """||s|| of every primary capsule of `trained` before squash: (B, 1, 28, 28) -> (B, T, 6, 6)."""
    features = trained.primary.conv(torch.relu(trained.conv1(images)))  # (B, T*D, 6, 6)
    batch, _, height, width = features.shape
    return features.view(batch, types, -1, height, width).norm(dim=2)  # (B, T, H, W)


with torch.no_grad():
    digit_norms = pre_squash_norms(x)  # (4, T, 6, 6)
    blank_norms = pre_squash_norms(torch.zeros(1, 1, 28, 28))  # (1, T, 6, 6)
    trained_lengths = length_maps(trained.encode(x), types)  # (4, T, 6, 6) after squash
torch.testing.assert_close(trained_lengths, digit_norms ** 2 / (1 + digit_norms ** 2))  # Eq. 1's length
blank_floor = float(blank_norms.min())  # the shortest ||s|| with no ink at all
rows = [*x[:, 0], torch.zeros(28, 28)]  # the four digits, then the blank image
norm_maps = torch.cat([digit_norms, blank_norms])  # (5, T, 6, 6)
top = float(norm_maps.max())

fig, axes = plt.subplots(len(rows), types + 1, figsize=(11, 7.2), layout="constrained",
                         width_ratios=[1.1] + [1] * types)
for row, (row_axes, image, maps) in enumerate(zip(axes, rows, norm_maps)):
    row_axes[0].imshow(image, cmap="gray_r", vmin=0, vmax=1)
    row_axes[0].set_ylabel(f"label {int(labels[row])}" if row < len(x) else "blank image")
    for t, ax in enumerate(row_axes[1:]):
        shown = ax.imshow(maps[t], cmap="viridis", norm="log", vmin=1.0, vmax=top)  # from ||s|| = 1
        if row == 0:
            ax.set_title(f"type {t}", fontsize=9)
    for ax in row_axes:
        ax.set(xticks=[], yticks=[])
bar = fig.colorbar(shown, ax=axes, shrink=0.7, label="‖s‖ before squash (log scale)")
bar.ax.axhline(blank_floor, color=VERMILLION, lw=2)
bar.ax.text(-0.15, blank_floor, f"blank image's\nshortest {blank_floor:.2f}", color=TEXT_VERMILLION,
            transform=bar.ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
fig.suptitle("Primary capsules of the TRAINED network before squash: ‖s‖ per type on the 6×6 grid")
plt.show()

fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
bins = np.geomspace(1.0, top * 1.1, 50)
ax.hist(digit_norms.flatten(), bins=bins, alpha=0.7, label=f"the {len(x)} digits' capsules")
ax.hist(blank_norms.flatten(), bins=bins, alpha=0.7, hatch=HATCHES[1], label="the blank image's capsules")
ax.axvline(blank_floor, color=VERMILLION, lw=2, label=f"blank image's shortest ‖s‖ = {blank_floor:.2f}")
ax.axvline(3.0, color="k", ls=":", label="‖s‖ = 3: squashed length 0.9")
ax.set(xscale="log", xlabel="‖s‖ before squash (log scale)", ylabel="capsules",
       title="with no ink at all, every primary capsule is already long")
ax.legend(fontsize=8, loc="upper right")
plt.show()
below = float((digit_norms < blank_floor).float().mean())
print(f"‖s‖ of the {digit_norms.numel():,} capsules of these {len(x)} digits ({digit_norms[0].numel()} each): "
      f"shortest {float(digit_norms.min()):.2f}, median {float(digit_norms.median()):.2f}, "
      f"{below:.1%} below the blank image's shortest")
print(f"blank image: ‖s‖ from {blank_floor:.2f} to {float(blank_norms.max()):.2f}, squashed lengths from "
      f"{blank_floor ** 2 / (1 + blank_floor ** 2):.3f}; the digits' squashed lengths: shortest "
      f"{float(trained_lengths.min()):.3f}, median {float(trained_lengths.median()):.3f}")

# %% [markdown]
# With no ink at all, the blank image's capsules already have $\lVert\mathbf s\rVert$ of at least
# 3.45, which squashes to 0.922: every primary capsule of this network is long before it sees
# anything. Ink makes $\lVert\mathbf s\rVert$ larger still (a median of 32.73 over the four digits,
# none of them below the blank image's shortest). Squash then flattens all of it into lengths
# between 0.971 and 1. The maps of $\lVert\mathbf s\rVert$ do differ by type and by place, but
# after squash those differences sit in the second or third decimal. A map of lengths, the picture
# the capsule intuition suggests, shows almost nothing here: the measurement had to look at
# directions.

# %% [markdown]
# ## Summary
#
# - conv1 (256 × 9×9, ReLU) gives (B, 256, 20, 20); the primary convolution (256 × 9×9, stride 2,
#   no ReLU) gives (B, 256, 6, 6), read as 32 types × 8 dimensions.
# - The type-major layout — `view(B, T, D, H, W)`, `permute(0, 1, 3, 4, 2)`, `reshape(B, T·H·W, D)`,
#   then squash — gives 1,152 capsules of 8 numbers, each the pose of one type at one place.
# - `.view(B, -1, 8)` has the right shape and the wrong meaning: test layouts against a reference.
# - The primary layer is equivariant: moving the digit by the stride moves the capsules by one cell.
# - In the trained network every primary capsule is nearly 1 long, even on a blank image (its
#   $\lVert\mathbf s\rVert$ is well above 1 before squash); what it sees is carried by its
#   direction, not its length.
# - `capsedu.PrimaryCaps` and `CapsNet.encode` are the tested versions used from now on.

# %% [markdown]
# ## Self-check
#
# Click an option to see whether it is right, and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("02")

# %% [markdown]
# ## What's next
#
# Each of the 1,152 primary capsules must now decide which of the 10 digit capsules to send its
# output to. **Lesson 03 — Dynamic routing** builds the prediction vectors $\hat{\mathbf u}_{j|i}$
# and the routing-by-agreement loop that makes this decision.
