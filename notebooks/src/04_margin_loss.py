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
# # Lesson 04 — The margin loss
#
# A digit capsule's length is the network's belief that its digit is present. The margin loss
# (Eq. 4 of Sabour et al., 2017) trains those lengths directly: the capsule of every digit that
# is in the image should be at least 0.9 long, every other capsule at most 0.1, and mistakes on
# absent digits count half. Because each class has its own term, the same loss works when an
# image holds several digits at once. In this lesson you build Eq. 4, check it against
# `capsedu.margin_loss`, look at its shape and gradients, use multi-hot targets, and then hunt
# down the two bugs that peers most often put into it.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - write Eq. 4 with $m^+ = 0.9$, $m^- = 0.1$, $\lambda = 0.5$ and explain each symbol;
# - read the loss and its gradient as functions of a capsule's length, for present and absent
#   classes;
# - build multi-hot targets for images with several digits, and compare the margin loss with the
#   two usual classifier losses: a softmax cross-entropy (which cannot say "both") and independent
#   sigmoids with binary cross-entropy (which can);
# - recognise an unsquared hinge and a missing $\lambda$ in someone else's code.
#
# ## Prerequisites and time
#
# Lesson 01 (capsule lengths lie in [0, 1)) and lesson 03 (digit capsules). Basic PyTorch tensor
# arithmetic. About 40 minutes; nothing is trained, every cell runs in seconds.

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import torch

import capsedu
from capsedu import CapsNet, CapsNetConfig
from capsedu.course.checks.margin import check_margin_loss, check_multi_hot

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
# - $\lambda = 0.5$ down-weights the absent classes — nine of the ten are absent in every MNIST
#   image, and at full weight they would push *all* capsules to shrink early in training;
# - both hinges $\max(0, \cdot)$ are **squared**, so the penalty fades smoothly to zero at the
#   margin.
#
# The loss of an image is $\sum_k L_k$; a batch takes the mean over its images. Lengths are
# (B, J) and targets $T$ are multi-hot (B, J):

# %%
M_POS, M_NEG, LAMBDA = 0.9, 0.1, 0.5


def my_margin_loss(lengths: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Eq. 4: lengths (B, J) in [0, 1], multi-hot targets (B, J) -> scalar (mean over B)."""
    present = targets * torch.relu(M_POS - lengths) ** 2  # (B, J)
    absent = LAMBDA * (1 - targets) * torch.relu(lengths - M_NEG) ** 2  # (B, J)
    return (present + absent).sum(dim=1).mean()


# %% [markdown]
# A worked example: one image of a 3, and capsule lengths a half-trained network might give.
# Only three classes cost anything — the 3 (too short), and the 5 and 8 (too long):

# %% tags=["nbval-check-output"]
example_lengths = torch.tensor([[0.05, 0.02, 0.08, 0.70, 0.10, 0.40, 0.01, 0.06, 0.25, 0.03]])
example_targets = torch.nn.functional.one_hot(torch.tensor([3]), 10).float()  # (1, J)
per_class = (example_targets * torch.relu(M_POS - example_lengths) ** 2
             + LAMBDA * (1 - example_targets) * torch.relu(example_lengths - M_NEG) ** 2)
for k in range(10):
    status = "present" if example_targets[0, k] else "absent "
    print(f"class {k} {status} ||v|| = {example_lengths[0, k]:.2f}   L_k = {per_class[0, k]:.4f}")
print(f"total: {my_margin_loss(example_lengths, example_targets):.4f}")

# %% [markdown]
# ## Check it
#
# Against `capsedu.margin_loss`, which accepts class indices (B,) or multi-hot targets (B, J), on
# a random batch of 64 images:

# %% tags=["nbval-check-output"]
lengths = torch.rand(64, 10, generator=generator)  # (B, J)
labels = torch.randint(0, 10, (64,), generator=generator)  # (B,)
one_hot = torch.nn.functional.one_hot(labels, 10).float()  # (B, J)
torch.testing.assert_close(my_margin_loss(lengths, one_hot), capsedu.margin_loss(lengths, labels))
torch.testing.assert_close(my_margin_loss(lengths, one_hot), capsedu.margin_loss(lengths, one_hot))
print("my_margin_loss equals capsedu.margin_loss for class indices and one-hot targets")
_ = check_margin_loss(my_margin_loss)  # prints ✅ or a hint

# %% [markdown]
# ### The loss as a function of a capsule's length
#
# One capsule, its length swept from 0 to 1, once as the capsule of a present class and once
# as an absent one. The right panel shows the gradient — how hard training pulls the length:

# %%
def draw_loss_curves() -> plt.Figure:
    """L_k and dL_k/d||v_k|| against the length, for a present and an absent class."""
    length = torch.linspace(0, 1, 201)  # (N,)
    fig, (ax_loss, ax_grad) = plt.subplots(1, 2, figsize=(11, 3.8))
    for present, name, color in ((1.0, "present class (T_k = 1)", "tab:green"),
                                 (0.0, "absent class (T_k = 0)", "tab:red")):
        target = torch.full((1, 1), present)  # (B=1, J=1)
        values, slopes = [], []
        for point in length:
            x = point.reshape(1, 1).requires_grad_(True)  # (1, 1): one capsule of one image
            loss = capsedu.margin_loss(x, target)
            slopes.append(float(torch.autograd.grad(loss, x)[0]))
            values.append(float(loss.detach()))
        ax_loss.plot(length, values, color=color, lw=2, label=name)
        ax_grad.plot(length, slopes, color=color, lw=2, label=name)
    for ax in (ax_loss, ax_grad):
        ax.axvline(M_POS, color="tab:green", ls=":", label="m+ = 0.9")
        ax.axvline(M_NEG, color="tab:red", ls=":", label="m- = 0.1")
        ax.set_xlabel(r"capsule length $\|\mathbf{v}_k\|$")
        ax.grid(alpha=0.3)
    ax_loss.set(ylabel="$L_k$", title="Margin loss of one class (Eq. 4)")
    ax_grad.set(ylabel=r"$\partial L_k / \partial \|\mathbf{v}_k\|$",
                title="Its gradient (< 0: training lengthens the capsule)")
    ax_loss.legend()
    fig.tight_layout()
    return fig


draw_loss_curves();

# %% [markdown]
# Read it right to left. An absent class pays nothing below 0.1, then a parabola that is half as
# steep as the present-class one (that is $\lambda$). A present class pays nothing above 0.9; below,
# the pull grows linearly with the distance to the margin, so badly wrong capsules are corrected
# hardest and the pull fades to zero as the length reaches 0.9 — nothing rewards pushing a
# length all the way to 1.

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
# ### On a real, untrained CapsNet
#
# A freshly initialised CapsNet (its `W` has standard deviation 0.01) produces tiny votes, so
# every digit capsule starts almost at length 0. Then every absent class already sits below
# $m^- = 0.1$ and costs nothing, and each image costs almost exactly $(m^+)^2 = 0.81$ from its
# present class alone. Split the loss of a real batch into its two parts:

# %%
train_data = capsedu.load_mnist("train")
images = train_data.subset(32, seed=0)
with torch.no_grad():
    start_lengths = CapsNet(CapsNetConfig.cpu())(images.images).lengths  # (B, J)
targets = torch.nn.functional.one_hot(images.labels, 10).float()  # (B, J)
present_part = capsedu.margin_loss(start_lengths, targets, lam=0.0)
total = capsedu.margin_loss(start_lengths, targets)
print(f"longest capsule at initialisation: {float(start_lengths.max()):.4f}")
print(f"loss {float(total):.3f} = present part {float(present_part):.3f} "
      f"+ absent part {float(total - present_part):.3f}   (0.9**2 = {M_POS ** 2:.2f})")

# %% [markdown]
# So training starts by lengthening capsules. Early on, while the network cannot yet tell the
# classes apart, the capsules grow together — which is where the absent classes, and
# $\lambda$, come in (see *Explore*).

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

# %%
fig, (ax_img, ax_len) = plt.subplots(1, 2, figsize=(9, 3.4),
                                     gridspec_kw={"width_ratios": [1, 2]})
ax_img.imshow(overlay[0], cmap="gray_r")
ax_img.set(title="A 3 and a 5, overlaid")
ax_img.set_axis_off()
ax_len.bar(range(10), ideal[0], color=["tab:green" if t else "tab:gray" for t in pair_targets[0]])
ax_len.axhline(M_POS, color="tab:green", ls=":", label="m+ = 0.9")
ax_len.axhline(M_NEG, color="tab:red", ls=":", label="m- = 0.1")
ax_len.set(xticks=range(10), xlabel="digit class k", ylabel=r"$\|\mathbf{v}_k\|$", ylim=(0, 1),
           title="Capsule lengths with zero margin loss (green: T_k = 1)")
ax_len.legend(loc="upper left")
fig.tight_layout()

# %% [markdown]
# ## Explore
#
# ### Why $\lambda = 0.5$?
#
# Early in training, before the network can tell digits apart, all ten capsules of an image
# have about the same length $\ell$. Then an image's
# loss is $\max(0, 0.9-\ell)^2 + 9\lambda\max(0, \ell-0.1)^2$, and gradient descent drives
# every length towards this function's minimum, $\ell^* = 0.9\,(1+\lambda)/(1+9\lambda)$ (where its
# derivative is zero; the figure's legend prints each minimum). With $\lambda = 1$ the absent
# classes win and the common length is pulled down towards $\ell^* = 0.18$; with $\lambda = 0.5$
# it stays higher, so the capsules do not collapse before they have learned to differ.

# %%
def draw_common_length(lams: tuple[float, ...] = (1.0, 0.5, 0.25)) -> plt.Figure:
    """Loss of one image when all 10 capsules share one length, for several lambdas."""
    common = torch.linspace(0, 1, 201)  # (N,)
    target = torch.nn.functional.one_hot(torch.tensor([3]), 10).float()  # (1, J)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for lam in lams:
        loss = torch.stack([capsedu.margin_loss(torch.full((1, 10), float(x)), target, lam=lam)
                            for x in common])  # (N,)
        best = common[loss.argmin()]
        line, = ax.plot(common, loss, lw=2, label=f"lambda = {lam}: minimum at {best:.2f}")
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
#   `capsedu.margin_loss(..., m_pos=..., m_neg=...)`: what happens to the gradient near 1?
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
# ### Exercise 2: spot the bug (peer A)
#
# A classmate wrote this margin loss. It runs, its values look plausible, and a network trained
# with it even learns something. Compare it with Eq. 4 term by term (evaluating it on the worked
# example above helps), then write a corrected `fixed_margin_loss_a(lengths, targets)`.
#
# ```python
# def peer_margin_loss_a(lengths, targets, m_pos=0.9, m_neg=0.1, lam=0.5):
#     present = targets * torch.clamp(m_pos - lengths, min=0)
#     absent = lam * (1 - targets) * torch.clamp(lengths - m_neg, min=0)
#     return (present + absent).sum(dim=1).mean()
# ```

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def peer_margin_loss_a(lengths, targets, m_pos=0.9, m_neg=0.1, lam=0.5):
    present = targets * torch.clamp(m_pos - lengths, min=0)
    absent = lam * (1 - targets) * torch.clamp(lengths - m_neg, min=0)
    return (present + absent).sum(dim=1).mean()


def fixed_margin_loss_a(lengths: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    present = targets * torch.clamp(M_POS - lengths, min=0) ** 2  # (B, J)
    absent = LAMBDA * (1 - targets) * torch.clamp(lengths - M_NEG, min=0) ** 2  # (B, J)
    return (present + absent).sum(dim=1).mean()
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_margin_loss(fixed_margin_loss_a)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 3: spot the bug (peer B)
#
# Another classmate's version. Same task: find what differs from Eq. 4 and write
# `fixed_margin_loss_b(lengths, targets)`.
#
# ```python
# def peer_margin_loss_b(lengths, targets, m_pos=0.9, m_neg=0.1):
#     present = targets * torch.relu(m_pos - lengths) ** 2
#     absent = (1 - targets) * torch.relu(lengths - m_neg) ** 2
#     return (present + absent).sum(dim=-1).mean()
# ```

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def peer_margin_loss_b(lengths, targets, m_pos=0.9, m_neg=0.1):
    present = targets * torch.relu(m_pos - lengths) ** 2
    absent = (1 - targets) * torch.relu(lengths - m_neg) ** 2
    return (present + absent).sum(dim=-1).mean()


def fixed_margin_loss_b(lengths: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    present = targets * torch.relu(M_POS - lengths) ** 2  # (B, J)
    absent = LAMBDA * (1 - targets) * torch.relu(lengths - M_NEG) ** 2  # (B, J)
    return (present + absent).sum(dim=-1).mean()
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_margin_loss(fixed_margin_loss_b)  # prints ✅ or a hint

# %% [markdown]
# ### What the two bugs do
#
# The check recognises both peers' versions and names the bug:

# %% tags=["nbval-check-output"]
check_margin_loss(peer_margin_loss_a)
_ = check_margin_loss(peer_margin_loss_b)  # prints ✅ or a hint

# %% [markdown]
# And here is why they matter. Without the square (A) the pull on a present capsule is as strong
# just below 0.9 as near 0: it never fades near the margin, so lengths keep being jerked across it.
# Without $\lambda$ (B) the nine absent classes weigh twice as much, which pulls all capsules
# towards zero early in training.

# %%
def draw_bug_curves() -> plt.Figure:
    """Per-class loss of Eq. 4 and of the two buggy versions, for present and absent classes."""
    length = torch.linspace(0, 1, 201)[:, None]  # (N, 1): N one-class "images"
    versions = {"Eq. 4 (capsedu.margin_loss)": capsedu.margin_loss,
                "peer A: unsquared hinge": peer_margin_loss_a,
                "peer B: missing lambda (= Eq. 4 if present)": peer_margin_loss_b}
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, present in zip(axes, (1.0, 0.0)):
        target = torch.full_like(length, present)  # (N, 1)
        for (name, loss_fn), style in zip(versions.items(), ("-", "--", ":")):
            per_point = torch.stack([loss_fn(x[None], t[None]) for x, t in zip(length, target)])
            ax.plot(length[:, 0], per_point, style, lw=2.5, label=name)
        ax.set(xlabel=r"capsule length $\|\mathbf{v}_k\|$",
               title=f"{'present' if present else 'absent'} class (T_k = {int(present)})")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("$L_k$")
    axes[1].legend()
    fig.suptitle("Eq. 4 and the two peer bugs")
    fig.tight_layout()
    return fig


draw_bug_curves();

# %% [markdown]
# ## Summary
#
# - Eq. 4: $L_k = T_k\max(0, 0.9 - \lVert\mathbf v_k\rVert)^2 + 0.5\,(1-T_k)\max(0,
#   \lVert\mathbf v_k\rVert - 0.1)^2$, summed over classes and averaged over the batch.
# - Present capsules are pushed above 0.9, absent ones below 0.1; inside the margins nothing is
#   pushed. The squares make the pull fade smoothly at the margins.
# - $\lambda = 0.5$ keeps the nine absent classes from shrinking every capsule early on.
# - Because each class has its own term, multi-hot targets just work: several digits can all
#   have long capsules and zero loss. A softmax cross-entropy cannot offer that; independent
#   sigmoids with binary cross-entropy can, so the difference from a multi-label CNN is what the
#   long vectors carry, not the loss alone.
# - Two classic bugs — the unsquared hinge and the missing $\lambda$ — run without errors;
#   only a comparison with the equation (or a check) finds them.
#
# ## What's next
#
# Lesson 05 adds the second half of the CapsNet loss: a decoder that reconstructs the digit from
# its capsule, masked by the true label, with a reconstruction loss scaled by the paper's 0.0005.
