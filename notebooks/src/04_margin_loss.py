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
# # Lesson 04 — The margin loss
#
# A digit capsule's length is the network's belief that its digit is present. The margin loss
# (Eq. 4 of Sabour et al., 2017) trains those lengths directly: the capsule of every digit that
# is in the image should be at least 0.9 long, every other capsule at most 0.1, and mistakes on
# absent digits count half. Because each class has its own term, the same loss works when an
# image holds several digits at once. In this lesson you write Eq. 4, check it against
# `capsedu.margin_loss`, use multi-hot targets, test a margin loss published online, and work out
# how hard the loss pulls a capsule's length, then watch that pull in a short training.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - write Eq. 4 with $m^+ = 0.9$, $m^- = 0.1$, $\lambda = 0.5$ and explain each symbol;
# - read the loss as a function of a capsule's length, for present and absent classes, and
#   derive how hard it pulls that length;
# - build multi-hot targets for images with several digits, and compare the margin loss with the
#   two usual classifier losses: a softmax cross-entropy (which cannot say "both") and independent
#   sigmoids with binary cross-entropy (which can);
# - test someone else's margin loss against Eq. 4, values and gradients, before trusting it.
#
# ## Prerequisites and time
#
# Lesson 01 (capsule lengths lie in [0, 1)) and lesson 03 (digit capsules). Basic PyTorch tensor
# arithmetic. The comparison near the end is paired over seeds: [the statistics page](statistics.md) explains both. **Time:** about 50 minutes; the only training is nine short runs near the end (three losses, three seeds).

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import capsedu
from capsedu import CapsNet, CapsNetConfig
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.margin import (
    check_capsule_margin_loss,
    check_margin_loss,
    check_multi_hot,
    check_pull,
    reference_pull,
)
from capsedu.explore.palette import BLUISH_GREEN, COURSE_STYLE, HATCHES, LINE_STYLES, VERMILLION

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
generator = capsedu.set_seed(0)

# %% [markdown]
# ## Build it
#
# For each class $k$ with capsule $\mathbf v_k$:
#
# $$
# L_k = T_k \,\max(0,\; m^+ - \lVert\mathbf v_k\rVert)^2
#       \;+\; \lambda\,(1 - T_k)\,\max(0,\; \lVert\mathbf v_k\rVert - m^-)^2
# \qquad\text{(Eq. 4)}
# $$
#
# - $T_k = 1$ if a digit of class $k$ is present, else 0;
# - $m^+ = 0.9$: a present digit's capsule costs nothing once it is at least 0.9 long;
# - $m^- = 0.1$: an absent digit's capsule costs nothing once it is at most 0.1 long;
# - $\lambda = 0.5$ down-weights the absent classes. Nine of the ten are absent in every MNIST
#   image; the paper adds $\lambda$ so that "the initial learning" does not shrink "the lengths of
#   the activity vectors of all the digit capsules".
#
# The loss of an image is $\sum_k L_k$; a batch takes the mean over its images.
#
# **Your task.** Write `my_margin_loss(lengths, targets)`: `lengths` holds $\lVert\mathbf v_k\rVert$
# for every image and class, shape (B, J); `targets` is the multi-hot $T$, shape (B, J). Return
# the batch's loss as a scalar tensor. Use the constants `M_POS`, `M_NEG` and `LAMBDA`.

# %%
M_POS, M_NEG, LAMBDA = 0.9, 0.1, 0.5


# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_margin_loss(lengths: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Eq. 4: lengths (B, J) in [0, 1], multi-hot targets (B, J) -> scalar (mean over B)."""
    ### BEGIN SOLUTION
    present = targets * torch.relu(M_POS - lengths) ** 2  # (B, J)
    absent = LAMBDA * (1 - targets) * torch.relu(lengths - M_NEG) ** 2  # (B, J)
    return (present + absent).sum(dim=1).mean()
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_margin_loss(my_margin_loss)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
margin_loss = yours_or_reference(check_margin_loss, my_margin_loss, capsedu.margin_loss, name="my_margin_loss")

# %% [markdown]
# The check tries your loss on a batch with one or two digits per image and compares it with
# Eq. 4 and with the usual mistakes in Eq. 4; when yours differs, it names the mistake it
# recognises.
#
# A worked example: one image of a 3, and capsule lengths a half-trained network might give.
# Only three classes cost anything — the 3 (too short), and the 5 and 8 (too long):

# %% tags=["nbval-check-output"]
example_lengths = torch.tensor([[0.05, 0.02, 0.08, 0.70, 0.10, 0.40, 0.01, 0.06, 0.25, 0.03]])
example_targets = F.one_hot(torch.tensor([3]), 10).float()  # (1, J)
for k in range(10):
    status = "present" if example_targets[0, k] else "absent "
    loss_k = margin_loss(example_lengths[:, k:k + 1], example_targets[:, k:k + 1])  # one class alone
    print(f"class {k} {status} ||v|| = {example_lengths[0, k]:.2f}   L_k = {float(loss_k):.4f}")
print(f"total: {float(margin_loss(example_lengths, example_targets)):.4f}")

# %% [markdown]
# ## Check it
#
# Against `capsedu.margin_loss`, which accepts class indices (B,) or multi-hot targets (B, J), on
# a random batch of 64 images:

# %% tags=["nbval-check-output"]
lengths = torch.rand(64, 10, generator=generator)  # (B, J)
labels = torch.randint(0, 10, (64,), generator=generator)  # (B,)
one_hot = F.one_hot(labels, 10).float()  # (B, J)
torch.testing.assert_close(margin_loss(lengths, one_hot), capsedu.margin_loss(lengths, labels))
torch.testing.assert_close(margin_loss(lengths, one_hot), capsedu.margin_loss(lengths, one_hot))
print("the margin loss in use equals capsedu.margin_loss for class indices and one-hot targets")

# %% [markdown]
# ### The loss as a function of a capsule's length
#
# One capsule, its length swept from 0 to 1, once as the capsule of a present class and once
# as an absent one:

# %% mystnb={"image": {"alt": "Margin loss L_k of one class against its capsule length from 0 to 1, with grey dotted lines at m- = 0.1 and m+ = 0.9. The present-class curve (green, up-triangles) falls as a parabola from 0.81 at length 0 to zero at 0.9 and stays zero; the absent-class curve (vermillion, down-triangles) is zero up to 0.1, then rises as a parabola half as high, to about 0.4 at length 1. Nothing rewards a length of 1."}}
def draw_loss_curves() -> plt.Figure:
    """L_k against the length, for a present and an absent class."""
    length = torch.linspace(0, 1, 201)[:, None]  # (N, 1): N one-class "images"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for present, name, color, marker in ((1.0, "present class (T_k = 1)", BLUISH_GREEN, "^"),
                                         (0.0, "absent class (T_k = 0)", VERMILLION, "v")):
        target = torch.full((1, 1), present)  # (B=1, J=1)
        values = [float(capsedu.margin_loss(point[None], target)) for point in length]
        ax.plot(length[:, 0], values, color=color, lw=2, marker=marker, markevery=20, label=name)
    ax.axvline(M_POS, color="0.4", ls=":", label="m+ = 0.9")
    ax.axvline(M_NEG, color="0.4", ls=":", label="m- = 0.1")
    ax.set(xlabel=r"capsule length $\|\mathbf{v}_k\|$", ylabel="$L_k$",
           title="Margin loss of one class (Eq. 4)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


draw_loss_curves();

# %% [markdown]
# Read it from the left. An absent class pays nothing up to $m^-$, then a parabola that is half
# as high as the present-class one at the same distance from its margin (that is $\lambda$). A
# present class pays nothing from $m^+$ on, and more the shorter its capsule is. Nothing rewards
# pushing a length all the way to 1. How hard each part *pulls* is Exercise 3.

# %% [markdown]
# ## Use capsedu
#
# `capsedu.margin_loss(lengths, targets, m_pos=0.9, m_neg=0.1, lam=0.5)` is the loss that
# `capsedu.fit` trains with (plus the reconstruction term of lesson 05). It takes class indices or
# multi-hot targets and rejects bad input with a message naming the argument:

# %% tags=["nbval-check-output"]
for bad_targets in (torch.tensor([3, 12]), torch.tensor([[0.0, 0.5] + [0.0] * 8] * 2)):
    try:
        capsedu.margin_loss(torch.rand(2, 10, generator=generator), bad_targets)
    except ValueError as error:
        print(f"ValueError: {error}")

# %% [markdown]
# It follows Eq. 4. The authors' own code differs by a constant: its `_margin_loss`
# ([Sarasra/models, research/capsules/models/layers/layers.py](https://github.com/Sarasra/models/blob/master/research/capsules/models/layers/layers.py))
# multiplies both terms by 0.5. Its loss is half of Eq. 4, so next to it the paper's reconstruction
# weight of 0.0005 (lesson 05) weighs as much as a weight of 0.001 would next to Eq. 4 itself.
#
# ### On a real, untrained CapsNet
#
# A freshly initialised CapsNet (its `W` is drawn with a small standard deviation, printed below)
# produces tiny votes, so every digit capsule starts almost at length 0. Then every absent class already sits below
# $m^- = 0.1$ and costs nothing, and each image costs almost exactly $(m^+)^2 = 0.81$ from its
# present class alone. Split the loss of a real batch into its two parts:

# %%
train_data = capsedu.load_mnist("train")
images = train_data.subset(32, seed=0)
with torch.no_grad():
    fresh = CapsNet(CapsNetConfig.cpu())
    start_lengths = fresh(images.images).lengths  # (B, J)
print(f"standard deviation of the fresh W: {float(fresh.class_caps.W.detach().std()):.3f}")
targets = torch.nn.functional.one_hot(images.labels, 10).float()  # (B, J)
present_part = capsedu.margin_loss(start_lengths, targets, lam=0.0)
total = capsedu.margin_loss(start_lengths, targets)
print(f"longest capsule at initialisation: {float(start_lengths.max()):.4f}")
print(f"loss {float(total):.3f} = present part {float(present_part):.3f} "
      f"+ absent part {float(total - present_part):.3f}   (0.9**2 = {M_POS ** 2:.2f})")

# %% [markdown]
# So training starts by lengthening capsules, and at first $\lambda$ plays no part: no absent
# capsule is longer than $m^-$. The short trainings after Exercise 3 show what happens next.

# %% [markdown]
# ### Multi-label targets
#
# The paper also trains on MultiMNIST, two overlapping digits per image. The target is then
# **multi-hot**: $T_k = 1$ for both digits. Each capsule's length is squashed on its own, so both
# capsules can be long at once and the loss can reach zero.
#
# Compare the two losses a CNN classifier would use:
#
# - a **softmax** couples the classes — its probabilities sum to 1 — so cross-entropy cannot be
#   zero for two present digits: the best it can do is $p = \frac12$ each, a loss of $2\ln 2$
#   (summing $-\ln p_k$ over the present classes);
# - **independent sigmoids** with a binary cross-entropy per class — the standard multi-label
#   loss — do not couple the classes either: with large logits for the two digits and very
#   negative ones for the rest, that loss also goes to zero.
#
# So "several digits at once" is not what sets capsules apart from every CNN: it is what sets the
# margin loss, and sigmoid outputs, apart from a softmax. What capsules add is *what* is long: a
# vector whose direction describes the digit, which lesson 05's decoder uses.

# %%
first = int((train_data.labels == 3).nonzero()[0])
second = int((train_data.labels == 5).nonzero()[0])
overlay = torch.maximum(train_data.images[first].roll(-3, dims=2),
                        train_data.images[second].roll(3, dims=2))  # (1, 28, 28)
pair_targets = torch.zeros(1, 10)
pair_targets[0, [3, 5]] = 1.0  # multi-hot: a 3 and a 5
ideal = torch.full((1, 10), 0.05)
ideal[0, [3, 5]] = 0.95  # what a perfect CapsNet could output
print(f"multi-hot target {pair_targets[0].int().tolist()}")
print(f"margin loss of ideal capsule lengths: {float(capsedu.margin_loss(ideal, pair_targets)):.3f}")
best_softmax = torch.full((1, 10), -1e9)
best_softmax[0, [3, 5]] = 0.0  # logits putting p = 1/2 on each digit, 0 elsewhere
cross_entropy = -(pair_targets * torch.log_softmax(best_softmax, dim=1)).sum()
print(f"best possible softmax cross-entropy: {float(cross_entropy):.3f} = 2 ln 2")
confident = torch.where(pair_targets.bool(), 12.0, -12.0)  # independent logits: +12 present, -12 absent
binary_ce = torch.nn.functional.binary_cross_entropy_with_logits(confident, pair_targets,
                                                                  reduction="sum")
print(f"independent sigmoids, binary cross-entropy with logits of ±12: {float(binary_ce):.5f}")

# %% mystnb={"image": {"alt": "Left: a 3 and a 5 overlaid in one image. Right: bar chart of ten capsule lengths that give zero margin loss for this two-digit target: classes 3 and 5 (green, hatched) at 0.95, above the dotted m+ = 0.9 line, and the eight absent classes (grey, plain) at 0.05, below m- = 0.1. Both present capsules can be long at once."}}
fig, (ax_img, ax_len) = plt.subplots(1, 2, figsize=(9, 3.4),
                                     gridspec_kw={"width_ratios": [1, 2]})
ax_img.imshow(overlay[0], cmap="gray_r")
ax_img.set(title="A 3 and a 5, overlaid")
ax_img.set_axis_off()
ax_len.bar(range(10), ideal[0], color=[BLUISH_GREEN if t else "0.6" for t in pair_targets[0]],
           hatch=[HATCHES[1] if t else HATCHES[0] for t in pair_targets[0]])
ax_len.axhline(M_POS, color="0.4", ls=":", label="m+ = 0.9")
ax_len.axhline(M_NEG, color="0.4", ls=":", label="m- = 0.1")
ax_len.set(xticks=range(10), xlabel="digit class k", ylabel=r"$\|\mathbf{v}_k\|$", ylim=(0, 1),
           title="Capsule lengths with zero margin loss (green, hatched: T_k = 1)")
ax_len.legend(loc="upper left")
fig.tight_layout()

# %% [markdown]
# ## Explore
#
# ### Why $\lambda = 0.5$?
#
# Before the network can tell digits apart, suppose all ten capsules of an image have about the
# same length $\ell$. Then an image's loss is $\max(0, 0.9-\ell)^2 + 9\lambda\max(0, \ell-0.1)^2$,
# and its minimum is at $\ell^* = 0.9\,(1+\lambda)/(1+9\lambda)$ (the figure's legend prints each
# one). The larger $\lambda$, the lower that minimum: the absent classes pull harder towards
# zero. Whether a real training ever sits in this undecided state is measured after Exercise 3.

# %% mystnb={"image": {"alt": "Loss of one image against a common length shared by all 10 capsules, for lambda = 1.0, 0.5 and 0.25 (solid, dashed, dotted). The three curves start together at 0.81 and each dips to a marked minimum before rising steeply; the minimum lies further left the larger lambda is: the larger lambda, the shorter the length an undecided network is pulled towards."}}
def draw_common_length(lams: tuple[float, ...] = (1.0, 0.5, 0.25)) -> plt.Figure:
    """Loss of one image when all 10 capsules share one length, for several lambdas."""
    common = torch.linspace(0, 1, 201)  # (N,)
    target = torch.nn.functional.one_hot(torch.tensor([3]), 10).float()  # (1, J)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for lam, style in zip(lams, LINE_STYLES):
        loss = torch.stack([capsedu.margin_loss(torch.full((1, 10), float(x)), target, lam=lam)
                            for x in common])  # (N,)
        best = common[loss.argmin()]
        line, = ax.plot(common, loss, style, lw=2, label=f"lambda = {lam}: minimum at {best:.2f}")
        ax.plot(best, loss.min(), "o", color=line.get_color())
    ax.set(xlabel=r"common length $\ell$ of all 10 capsules", ylabel="loss of the image",
           title="Where an undecided network is pulled", ylim=(0, 1.5))
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


draw_common_length();

# %% [markdown]
# Things to try:
#
# - Make the margins tighter ($m^+ = 0.95$, $m^- = 0.05$) in `draw_loss_curves` via
#   `capsedu.margin_loss(..., m_pos=..., m_neg=...)`: what happens to the loss near 1?
# - Give the multi-label example a third digit. What is the best softmax cross-entropy now?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: multi-hot targets
#
# Write `to_multi_hot(label_lists, num_classes)` that turns a list of label lists (one per image,
# e.g. `[[3], [1, 7]]`) into a float tensor $T$ of shape (B, J) with $T_{bk} = 1$ exactly when
# class $k$ is in image $b$'s list. A digit listed twice is still just present.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def to_multi_hot(label_lists: list[list[int]], num_classes: int) -> torch.Tensor:
    ### BEGIN SOLUTION
    targets = torch.zeros(len(label_lists), num_classes)  # (B, J)
    for row, image_labels in enumerate(label_lists):
        targets[row, image_labels] = 1.0
    return targets
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_multi_hot(to_multi_hot)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 2: a margin loss from the wild (peer A)
#
# Peer A's margin loss is the `MarginLoss.forward` of the labml annotated implementation, one of
# this course's sources ([nn.labml.ai](https://nn.labml.ai/capsule_networks/index.html)),
# written as a function. It takes the digit capsules themselves, (B, J, D), and class indices.
# It runs, and its values look plausible. Test it before you trust it: evaluate it where you know
# Eq. 4's value (the worked example above, with capsules of those lengths), and test its values
# and gradients, edge cases included. Then write `fixed_peer_loss(v, labels)`, with the same
# inputs, that computes Eq. 4 and has finite gradients for any capsules.

# %%
def peer_margin_loss(v, labels, m_pos=0.9, m_neg=0.1, lam=0.5):
    """labml's MarginLoss.forward: v (B, J, D) digit capsules, labels (B,) class indices."""
    v_norm = torch.sqrt((v ** 2).sum(dim=-1))  # (B, J)
    targets = torch.eye(v.shape[1])[labels]  # (B, J) one-hot
    loss = targets * F.relu(m_pos - v_norm) + lam * (1.0 - targets) * F.relu(v_norm - m_neg)  # (B, J)
    return loss.sum(dim=-1).mean()


# %% jupyter={"source_hidden": true} tags=["hide-input"]
def fixed_peer_loss(v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eq. 4 from capsules v (B, J, D) and class indices labels (B,) -> scalar; finite gradients."""
    ### BEGIN SOLUTION
    v_norm = torch.sqrt((v ** 2).sum(dim=-1) + 1e-8)  # (B, J): eps inside the root
    targets = torch.eye(v.shape[1])[labels]  # (B, J)
    loss = (targets * F.relu(M_POS - v_norm) ** 2
            + LAMBDA * (1.0 - targets) * F.relu(v_norm - M_NEG) ** 2)  # (B, J)
    return loss.sum(dim=-1).mean()
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_capsule_margin_loss(fixed_peer_loss)  # prints ✅ or a hint

# %% [markdown]
# Peer A has two bugs, and neither raises an error. Both are in labml's published code. On the
# worked example, and with one capsule set exactly to zero:

# %% tags=["nbval-check-output"]
directions = F.normalize(torch.randn(1, 10, 16, generator=generator), dim=-1)  # (1, J, D) unit vectors
example_v = example_lengths[..., None] * directions  # (1, J, D): capsules with the example's lengths
print(f"worked example: Eq. 4 gives {float(capsedu.margin_loss(example_lengths, example_targets)):.4f}, "
      f"peer A gives {float(peer_margin_loss(example_v, torch.tensor([3]))):.4f}")
zero_v = example_v.clone()
zero_v[0, 1] = 0.0  # capsule 1 (an absent class) exactly zero
zero_v.requires_grad_(True)
(peer_grad,) = torch.autograd.grad(peer_margin_loss(zero_v, torch.tensor([3])), zero_v)
print(f"peer A's gradient for the zero capsule: {peer_grad[0, 1, :3].tolist()} ...; "
      f"NaN anywhere: {bool(peer_grad.isnan().any())}")

# %% [markdown]
# - **Unsquared hinges.** labml writes `F.relu(self.m_positive - v_norm)` with no square, so each
#   term is a distance, not a squared one: a different loss from Eq. 4, with a different pull
#   (Exercise 3).
# - **`sqrt` without ε.** The slope of $\sqrt{x}$ at 0 is infinite. For a capsule of length
#   exactly 0, the chain rule multiplies it by 0, which gives NaN, and one NaN gradient spoils
#   every weight at the next optimiser step. A capsule is rarely exactly zero, which is why such a
#   bug survives. Lesson 01's squash puts ε inside the root for the same reason.

# %% [markdown]
# ### Exercise 3: how hard does the loss pull?
#
# Training moves each capsule's length against the slope of the loss. Write
# `my_pull(lengths, present, lam=0.5, squared=True)`: for each length in `lengths` (shape (N,)),
# return $-\partial L_k / \partial \lVert\mathbf v_k\rVert$, the pull on that capsule (positive:
# training lengthens it; negative: shortens it), for a class that is `present` (True) or absent
# (False). `squared=False` is peer A's loss with unsquared hinges. Work the slope out from Eq. 4
# by hand; the check compares it with autograd.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_pull(lengths: torch.Tensor, present: bool, lam: float = 0.5, squared: bool = True) -> torch.Tensor:
    """-dL_k/d||v_k|| for each length (N,) -> (N,); present or absent class, squared hinge or not."""
    ### BEGIN SOLUTION
    if present:
        gap, weight, inside = M_POS - lengths, 1.0, lengths < M_POS  # (N,)
        sign = 1.0  # a present capsule is pulled longer
    else:
        gap, weight, inside = lengths - M_NEG, lam, lengths > M_NEG  # (N,)
        sign = -1.0  # an absent capsule is pushed shorter
    slope = 2 * gap if squared else torch.ones_like(lengths)  # (N,) d(gap**p)/d(gap)
    return sign * weight * inside * slope
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_pull(my_pull)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
pull = yours_or_reference(check_pull, my_pull, reference_pull, name="my_pull")

# %% mystnb={"image": {"alt": "Pull on a capsule's length (minus the loss's slope; positive means longer) against length 0 to 1. Eq. 4, solid: a present capsule (green, up-triangles) is pulled with 1.8 at length 0, falling linearly to 0 at m+ = 0.9; an absent one (vermillion, down-triangles) is pushed shorter from 0.1 on, reaching -0.9 at length 1. The unsquared hinge, dashed: constant pulls of 1.0 (present, below 0.9) and -0.5 (absent, above 0.1) that stop abruptly at the margin."}}
def draw_pulls() -> plt.Figure:
    """The pull of Eq. 4 and of the unsquared hinge, for a present and an absent class."""
    length = torch.linspace(0, 1, 401)  # (N,)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for present, color, marker in ((True, BLUISH_GREEN, "^"), (False, VERMILLION, "v")):  # pulled up, pushed down
        for squared, style in ((True, "-"), (False, "--")):
            name = f"{'present' if present else 'absent'}, {'Eq. 4' if squared else 'unsquared (peer A)'}"
            ax.plot(length, pull(length, present, 0.5, squared), style, color=color, lw=2, marker=marker,
                    markevery=40, label=name)
    ax.axvline(M_POS, color="0.4", ls=":")
    ax.axvline(M_NEG, color="0.4", ls=":")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel=r"capsule length $\|\mathbf{v}_k\|$", ylabel=r"pull $-\partial L_k/\partial\|\mathbf{v}_k\|$",
           title="How hard training pulls a capsule's length (> 0: longer)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


draw_pulls()
plt.show()
probe = torch.tensor([float(start_lengths.max()), 0.5, 0.85])  # (3,) lengths to compare the pulls at
for name, squared in (("Eq. 4    ", True), ("unsquared", False)):
    present_pull = pull(probe, True, 0.5, squared)  # (3,)
    print(f"{name}: pull on a present capsule at lengths {', '.join(f'{v:.4f}' for v in probe.tolist())}: "
          + ", ".join(f"{v:.2f}" for v in present_pull.tolist()))

# %% [markdown]
# The squared hinge pulls a present capsule hardest when it is far from $m^+$, and its pull fades
# to zero as the length reaches it: near the margin, training eases off. The unsquared hinge pulls
# with the same force everywhere inside the margin, then stops at once. At the start of training,
# when every capsule is almost zero long, Eq. 4 pulls a present capsule harder than the unsquared
# hinge does (the first number of each line above). The same holds, scaled by $\lambda$, for
# absent capsules above $m^-$.
#
# ### What $\lambda$ and the square do in a short training
#
# Now the same CPU CapsNet is trained three times from the same start, on the same batches: with
# Eq. 4, with Eq. 4 but $\lambda = 1$, and with peer A's unsquared loss. After a few steps and at
# the end we measure, on 500 held-out test images, the mean length of the present capsule, the
# mean length of the absent ones, and the error rate. One training can be lucky, so the whole
# comparison is repeated for three seeds (other starting weights, other batches); the table shows
# the mean over the seeds and, in brackets, the lowest and highest.

# %%
steps = capsedu.choose(learner=200, fast=20)
early = steps // 8
pool = train_data.subset(capsedu.choose(learner=5000, fast=1000), seed=1)
held_out = capsedu.load_mnist("test", verbose=False).subset(capsedu.choose(learner=500, fast=100), seed=0)
held_targets = F.one_hot(held_out.labels, 10).float()  # (N, J)


def short_training(loss_of, seed: int) -> dict:
    """Adam on a CPU CapsNet; at steps `early` and `steps`: (present length, absent length, error);
    under "right": which held-out images the trained network classifies right, (N,) bools."""
    torch.manual_seed(seed)
    net = CapsNet(CapsNetConfig.cpu())
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    order = torch.Generator().manual_seed(seed)  # the same batches for every loss
    measured = {}
    for step in range(1, steps + 1):
        batch = torch.randint(0, len(pool), (32,), generator=order)
        loss = loss_of(net(pool.images[batch]), pool.labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in (early, steps):
            with torch.no_grad():
                held_lengths = net(held_out.images).lengths  # (N, J)
            present = float((held_lengths * held_targets).sum() / held_targets.sum())
            absent = float((held_lengths * (1 - held_targets)).sum() / (1 - held_targets).sum())
            right = held_lengths.argmax(dim=1) == held_out.labels  # (N,)
            measured[step] = (present, absent, 1 - float(right.float().mean()))
    measured["right"] = right
    return measured


variants = {
    "Eq. 4": lambda out, y: margin_loss(out.lengths, F.one_hot(y, 10).float()),
    "lambda = 1": lambda out, y: capsedu.margin_loss(out.lengths, y, lam=1.0),
    "unsquared (A)": lambda out, y: peer_margin_loss(out.capsules, y),
}
seeds = capsedu.choose(learner=(0, 1, 2), fast=(0,))
threads = torch.get_num_threads()
torch.set_num_threads(1)  # a network this small trains faster on one thread than on several
try:
    results = {name: [short_training(loss_of, seed) for seed in seeds] for name, loss_of in variants.items()}
finally:
    torch.set_num_threads(threads)


def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    """Mean over the seeds, then [lowest - highest]."""
    values = [scale * v for v in values]
    return f"{sum(values) / len(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


print(f"mean over {len(seeds)} seeds [lowest-highest]")
print(f"{'loss':14s} {'step':>4s}  {'present':19s}  {'absent':19s}  {'error (%)':15s}")
for name, runs in results.items():
    for step in (early, steps):
        present, absent, error = zip(*(run[step] for run in runs))
        print(f"{name:14s} {step:4d}  {spread(present)}  {spread(absent)}  {spread(error, 100, 1)}")
print(f"\nerror at step {steps} on the same {len(held_out)} images, paired, seed by seed:")
for name in ("lambda = 1", "unsquared (A)"):
    for seed, ours, theirs in zip(seeds, results["Eq. 4"], results[name]):
        print(f"  seed {seed}:", capsedu.compare_paired("Eq. 4", ours["right"], name, theirs["right"], digits=1))

# %% [markdown]
# Read the table against the pulls above. A difference counts below only where the seeds'
# ranges do not overlap: then it held for every starting point we tried.
#
# - **The square.** After 25 steps peer A's present capsules are much shorter than Eq. 4's in
#   every seed: at the start the unsquared hinge pulls with 1.00 where Eq. 4 pulls with 1.80. At
#   step 200 the order has flipped: peer A's present capsules are longer and its absent ones
#   shorter. Near the margins the unsquared pull stays at full strength while Eq. 4's fades.
# - **$\lambda$.** With $\lambda = 1$ the absent capsules are shorter at both steps, in every
#   seed, and the present ones a little shorter too. The present capsules still grow: a
#   full-weight absent term does not make every capsule shrink.
# - **Accuracy.** All three networks of a seed answer the same 500 test images, so their errors
#   are compared *paired* (lesson 06 explains how): only the images that one gets right and the
#   other wrong count. The unsquared loss ties with Eq. 4 in every seed. $\lambda = 1$ ties in
#   two seeds and comes out ahead in the third: had we trained only that seed, we would have
#   reported a gain that the other two do not show. What both changes do, in every seed, is change
#   what the lengths mean: how far a "present" capsule is from 0.9 and an "absent" one from 0.1.
#   Three seeds of 200 steps say nothing about a full training.

# %% [markdown]
# ## Summary
#
# - Eq. 4: $L_k = T_k\max(0, 0.9 - \lVert\mathbf v_k\rVert)^2 + 0.5\,(1-T_k)\max(0,
#   \lVert\mathbf v_k\rVert - 0.1)^2$, summed over classes and averaged over the batch. The
#   authors' code halves both terms.
# - Present capsules are pushed above 0.9, absent ones below 0.1; beyond the margins nothing is
#   pushed. The squares make the pull fade to zero as a length reaches its margin.
# - $\lambda$ weighs the nine absent classes against the one present class.
# - Because each class has its own term, multi-hot targets just work: several digits can all
#   have long capsules and zero loss. A softmax cross-entropy cannot offer that; independent
#   sigmoids with binary cross-entropy can, so the difference from a multi-label CNN is what the
#   long vectors carry, not the loss alone.
# - A published margin loss (labml's) has unsquared hinges and a `sqrt` without ε. Neither raises
#   an error: test values against the equation and gradients at zero.

# %% [markdown]
# ## Self-check
#
# Click an option to see whether it is right, and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("04")

# %% [markdown]
# ## What's next
#
# Lesson 05 adds the second half of the CapsNet loss: a decoder that reconstructs the digit from
# its capsule, masked by the true label, with a reconstruction loss scaled by the paper's 0.0005.
