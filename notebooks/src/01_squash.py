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
# # Lesson 01 — Squash
#
# A capsule's length is read as a probability, so it must lie between 0 and 1 whatever the layer
# below computed. The paper's **squashing** non-linearity (Eq. 1) does this: it shrinks short
# vectors to almost nothing, long vectors to just under 1, and never changes a vector's direction —
# so the pose survives. In this lesson you meet a numerical trap at the zero vector (a NaN
# *gradient*, invisible in the forward pass), write your own squash that avoids it, check it against
# `capsedu.squash`, and see what squash does to lengths, directions and agreeing votes.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can:
#
# - write Eq. 1 in PyTorch for a batch of capsules, (B, J, D), squashing along the right dimension;
# - explain why the zero vector breaks a naive squash, in its value and in its gradient (shown with
#   `torch.autograd`), and write one that is safe there;
# - describe the curve of output length against input length, and why direction is preserved;
# - compare your code with a reference using `torch.testing.assert_close`;
# - reason about how the squashed length of a sum of votes depends on whether the votes agree.

# %% [markdown]
# ## Prerequisites and time
#
# **You need:** lesson 00 (capsules as vectors), PyTorch tensors and broadcasting, what
# `loss.backward()` computes. **Time:** about 35 minutes.

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import torch

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.squash import check_input_length_for, check_squash, check_votes_needed
from capsedu.explore.palette import COURSE_STYLE, VERMILLION

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
generator = capsedu.set_seed(0)  # seeds Python, NumPy and PyTorch

# %% [markdown]
# ## Build it
#
# The input of a capsule $j$ is a vector $\mathbf s_j$ (in lesson 03 it will be a weighted sum of
# predictions from the capsules below). Its output is
#
# $$
# \mathbf v_j = \underbrace{\frac{\lVert\mathbf s_j\rVert^2}{1 + \lVert\mathbf s_j\rVert^2}}_{\text{new length}}
#              \;\underbrace{\frac{\mathbf s_j}{\lVert\mathbf s_j\rVert}}_{\text{unit vector}}
# \qquad \text{(Eq. 1)}
# $$
#
# The second factor has length 1 and the direction of $\mathbf s_j$; the first is a positive number
# below 1. So $\lVert\mathbf v_j\rVert = \lVert\mathbf s_j\rVert^2 / (1 + \lVert\mathbf s_j\rVert^2)$.
#
# In a CapsNet, capsules come in batches: `s` has shape (B, J, D) — B images, J capsules, D numbers
# per capsule. The norm is taken over the **last** dimension only, and `keepdim=True` keeps a
# (B, J, 1) tensor that broadcasts against (B, J, D).
#
# Before you write it, a version straight from the paper, to see where it goes wrong:

# %%
def squash_naive(s: torch.Tensor) -> torch.Tensor:
    """Eq. 1, straight from the paper. s: (B, J, D) -> (B, J, D)."""
    norm = torch.sqrt((s ** 2).sum(dim=-1, keepdim=True))  # (B, J, 1)
    return norm ** 2 / (1 + norm ** 2) * s / norm  # (B, J, D)


s = torch.randn(2, 3, 4) * torch.tensor([0.1, 1.0, 10.0]).view(1, 3, 1)  # (B, J, D)
v = squash_naive(s)
print("input lengths: ", s.norm(dim=-1))
print("output lengths:", v.norm(dim=-1))

# %% [markdown]
# Short vectors (the first capsule of each image) come out much shorter than they went in, vectors
# a few units long come out at more than half but less than 1, long ones just under 1. So far so
# good.
#
# ### The zero vector: a NaN in the forward pass...
#
# A capsule whose input is exactly zero should simply output zero — "nothing here". But
# `squash_naive` divides by $\lVert\mathbf s\rVert = 0$:

# %%
zero = torch.zeros(1, 1, 4)
print(squash_naive(zero))

# %% [markdown]
# $0/0$ is NaN. The obvious patch is to add a small ε to the denominator, $\mathbf s / (\lVert\mathbf s\rVert + ε)$.
# The forward pass is then fine...
#
# ### ...and a NaN in the backward pass
#
# ...but training needs gradients too. Let us ask `torch.autograd` for the gradient at zero:

# %%
def squash_eps_outside(s: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Eq. 1 with ε added to the norm, outside the square root."""
    norm = torch.sqrt((s ** 2).sum(dim=-1, keepdim=True))  # (B, J, 1)
    return norm ** 2 / (1 + norm ** 2) * s / (norm + eps)  # (B, J, D)


zero = torch.zeros(1, 1, 4, requires_grad=True)
out = squash_eps_outside(zero)
out.sum().backward()
print("value:   ", out.detach())
print("gradient:", zero.grad)

# %% [markdown]
# The value is a clean zero, the gradient is NaN. The culprit is the square root: its slope
# $\frac{d}{dx}\sqrt x = \frac{1}{2\sqrt x}$ is infinite at $x = 0$, and the chain rule multiplies
# it by $\frac{\partial}{\partial \mathbf s}\sum s_d^2 = 2\mathbf s = \mathbf 0$: $\;0 \cdot \infty = \text{NaN}$.
#
# Why care about one capsule? Because one NaN spreads to every weight that produced it. Here a
# layer `W` makes four capsules; only one of them is zero, yet after `backward()` **every** entry of
# `W.grad` is NaN, and one optimiser step would wreck the whole layer. (Exact zeros do happen: an
# all-zero input after a ReLU, padding, a capsule layer without a bias.)

# %%
W = torch.randn(4, 4, requires_grad=True)
inputs = torch.randn(1, 4, 4)  # (B, J, 4): four capsules' inputs
inputs[0, 2] = 0.0  # one capsule sees nothing
squash_eps_outside(inputs @ W).sum().backward()
print(f"NaN entries in W.grad: {int(W.grad.isnan().sum())} of {W.grad.numel()}")

# %% [markdown]
# ### Your turn: a squash that is safe at zero
#
# Write `my_squash(s, eps)`: Eq. 1 along the **last** dimension of `s`. It takes any tensor of
# capsules, shape (..., D) — for example (B, J, D) — and returns a tensor of the same shape. Use the
# small `eps` so that
#
# - at the zero vector, both the value and the gradient are finite (each patch above fails one of
#   the two);
# - for any vector much longer than $10^{-4}$, the result matches Eq. 1.
#
# The diagnosis above says where the NaN comes from: nothing your computation differentiates may
# have an infinite slope at the zero vector. The check below tries lengths from 0.01 to 100, the
# zero vector, and the gradients.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_squash(s: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    r"""Eq. 1 along the last dimension, safe at zero. s: (..., D) -> (..., D)."""
    ### BEGIN SOLUTION
    squared_norm = (s ** 2).sum(dim=-1, keepdim=True)  # (..., 1)
    scale = squared_norm / (1 + squared_norm) / torch.sqrt(squared_norm + eps)  # (..., 1)
    return scale * s  # (..., D)
    ### END SOLUTION


# %% [markdown]
# ## Check it
#
# The course's check tests more than one input: lengths, directions, the zero vector and its
# gradient. When something is off it names the likely mistake.

# %% tags=["nbval-check-output"]
_ = check_squash(my_squash)  # prints ✅ or a hint

# %% [markdown]
# The rest of the lesson calls `squash`: your `my_squash` once it passes the check, until then
# `capsedu.squash`. The next cell says which.

# %% tags=["nbval-check-output"]
squash = yours_or_reference(check_squash, my_squash, capsedu.squash, name="my_squash")

# %% [markdown]
# The two experiments that broke the naive versions, again:

# %%
zero = torch.zeros(1, 1, 4, requires_grad=True)
out = squash(zero)
out.sum().backward()
print("value:   ", out.detach())
print("gradient:", zero.grad)

W.grad = None
squash(inputs @ W).sum().backward()
print(f"NaN entries in W.grad: {int(W.grad.isnan().sum())} of {W.grad.numel()}")

# %% [markdown]
# A clean zero and a finite gradient, and not one NaN in `W.grad`. The reference puts the small ε
# **inside** the square root, $\lVert\mathbf s\rVert_ε = \sqrt{\sum_d s_d^2 + ε}$: the norm is then
# never zero, so its slope is finite everywhere, and for any vector much longer than
# $\sqrt ε = 10^{-4}$ it is indistinguishable from the true norm. Every source this course grew
# from — the blog, the labml implementation, the advanced notebook — puts ε inside the root too.
# You will still meet the other two versions in the wild, often in code that trains fine for a while
# and then turns into NaN on the first batch with an empty capsule.
#
# `capsedu.squash` is the reference the rest of the course uses. On random capsules of all sizes,
# including exact zeros, the values **and** gradients of `squash` must match it.
# `torch.testing.assert_close` raises an error that shows the largest mismatch when they do not.

# %% tags=["nbval-check-output"]
s = torch.randn(8, 10, 16) * torch.logspace(-3, 2, 10).view(1, 10, 1)  # (B, J, D) lengths 1e-3..100
s[0, :3] = 0.0  # some exact zeros
mine, ref = s.clone().requires_grad_(True), s.clone().requires_grad_(True)
weights = torch.randn(8, 10, 16)  # a random "loss" so that every output matters
(squash(mine) * weights).sum().backward()
(capsedu.squash(ref, dim=-1) * weights).sum().backward()
torch.testing.assert_close(squash(s), capsedu.squash(s, dim=-1))
torch.testing.assert_close(mine.grad, ref.grad)
print(f"squash matches capsedu.squash on {tuple(s.shape)}: values and gradients")

# %% [markdown]
# ## Use capsedu
#
# From now on lessons call `capsedu.squash(s, dim=-1, eps=1e-8)`. It squashes along any dimension
# `dim` (so (B, D, J) layouts work too) and rejects bad input with a message that names the
# argument:

# %% tags=["nbval-check-output"]
s = torch.randn(2, 16, 10)  # (B, D, J): capsule vectors along dimension 1
v = capsedu.squash(s, dim=1)
torch.testing.assert_close(v, squash(s.transpose(1, 2)).transpose(1, 2))
print(f"squash along dim=1: {tuple(v.shape)}, max length {float(v.norm(dim=1).max()):.3f} < 1")
for bad in (torch.tensor(3.0), torch.ones(2, 3, dtype=torch.long)):
    try:
        capsedu.squash(bad)
    except (TypeError, ValueError) as error:
        print(f"{type(error).__name__}: {error}")

# %% [markdown]
# ## Explore
#
# ### What squash does to lengths
#
# Since the direction factor has length 1, the output length depends on the input length $n$
# only: $f(n) = n^2/(1+n^2)$. For small $n$ it behaves like $n^2$ (tiny inputs are pushed towards
# zero even faster), at $n = 1$ it is exactly $0.5$, and it approaches $1$ without reaching it.
# The plot measures it from `squash` itself, on vectors of 8 numbers.

# %% mystnb={"image": {"alt": "Two plots of squash's output length against input length, measured on 8-number vectors. Left, linear axes from 0 to 6: the curve starts flat, rises steeply, passes 0.5 at input length 1 (marked) and flattens just below the dash-dotted line at 1. Right, log-log axes from 0.001 to 1000: short inputs follow the dotted n squared line exactly, then the curve bends near 1 and levels off at 1."}}
input_lengths = torch.linspace(0, 6, 241)
directions = torch.nn.functional.normalize(torch.randn(241, 8), dim=-1)  # random unit vectors
output_lengths = squash(directions * input_lengths[:, None]).norm(dim=-1)
small = torch.logspace(-3, 3, 121)
small_out = squash(directions[:121] * small[:, None]).norm(dim=-1)

fig, (ax_lin, ax_log) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
ax_lin.plot(input_lengths, output_lengths, lw=2.5, label="measured ||squash(s)||")
ax_lin.plot(input_lengths, input_lengths, "--", color="0.6", label="identity")
ax_lin.axhline(1, color="k", lw=0.8, ls="-.")
ax_lin.plot(1.0, 0.5, "o", color=VERMILLION)
ax_lin.annotate("  n = 1 → 0.5", (1.0, 0.5), va="top", fontsize=10)
ax_lin.set(xlim=(0, 6), ylim=(0, 1.15), xlabel="input length ||s||", ylabel="output length ||v||",
           title="squash maps every length into [0, 1)")
ax_lin.legend(loc="lower right")
ax_log.loglog(small, small_out, lw=2.5, label="measured ||squash(s)||")
ax_log.loglog(small, small ** 2, ":", color="C2", label="n² (short vectors)")
ax_log.axhline(1, color="k", lw=0.8, ls="-.", label="1 (long vectors)")
ax_log.set(ylim=(1e-7, 3), xlabel="input length ||s|| (log scale)", ylabel="output length (log scale)",
           title="short vectors shrink like n²")
ax_log.legend(loc="lower right")
plt.show()

# %% [markdown]
# ### What squash does to directions
#
# Squash multiplies each vector by one positive number, so it can only shorten or lengthen it —
# never turn it. Below, 2-D capsule inputs $\mathbf s$ (thick, grey) and their squashed outputs
# $\mathbf v$ (thin, vermillion): every vermillion arrow lies on its grey arrow, inside the unit circle.

# %% mystnb={"image": {"alt": "Eight 2-D capsule inputs s, drawn as thick grey arrows from the origin in eight directions with lengths from 0.3 to 2.2, and their squashed outputs as thin vermillion arrows, with a dashed unit circle. Every vermillion arrow lies on its grey arrow, pointing the same way, and ends inside the circle: inputs reaching beyond the circle are pulled back inside it, and short inputs become very short."}}
angles_2d = torch.linspace(0, 2 * np.pi, 9)[:-1] + 0.3
lengths_2d = torch.tensor([0.3, 0.6, 1.0, 1.4, 1.8, 0.45, 2.2, 0.8])
s2 = lengths_2d[:, None] * torch.stack([torch.cos(angles_2d), torch.sin(angles_2d)], dim=-1)  # (8, 2)
v2 = squash(s2)  # (8, 2)

fig, ax = plt.subplots(figsize=(5.2, 5.2), layout="constrained")
ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.5", linestyle="--"))
for (sx, sy), (vx, vy) in zip(s2.tolist(), v2.tolist()):
    ax.annotate("", xy=(sx, sy), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": "0.7", "lw": 4})
    ax.annotate("", xy=(vx, vy), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": VERMILLION, "lw": 2})
ax.plot([], [], color="0.7", lw=4, label="input s")
ax.plot([], [], color=VERMILLION, lw=2, label="squash(s)")
ax.plot([], [], color="0.5", ls="--", label="unit circle")
ax.set(xlim=(-2.4, 2.4), ylim=(-2.4, 2.4), aspect="equal", xlabel="capsule dimension 1",
       ylabel="capsule dimension 2", title="squash keeps directions, shrinks lengths below 1")
ax.legend(loc="upper left", fontsize=9)
plt.show()

# %% tags=["nbval-check-output"]
cosine = torch.nn.functional.cosine_similarity(s2, v2, dim=-1)
assert torch.allclose(cosine, torch.ones(8)), cosine
assert (v2.norm(dim=-1) < 1).all()
print("cosine(s, squash(s)) = 1 for all 8 capsules; all output lengths < 1")

# %% [markdown]
# ### Where can learning change a capsule's length?
#
# Gradient descent moves a capsule's length through the slope $f'(n) = 2n/(1+n^2)^2$. `autograd`
# measures it for us (by differentiating the output length with respect to the input length):

# %% mystnb={"image": {"alt": "Line plot of the slope of squash's output length against input length from 0 to 6. The autograd measurement and the formula 2n / (1 + n squared) squared coincide: the slope rises from 0 to its peak at n = 1 over the square root of 3, marked by a dotted line, then decays towards zero, so long vectors barely change length."}}
n = torch.linspace(0, 6, 241, requires_grad=True)
unit = torch.nn.functional.normalize(torch.randn(8), dim=0)
lengths_out = squash(n[:, None] * unit).norm(dim=-1)  # (241,)
(slope,) = torch.autograd.grad(lengths_out.sum(), n)
peak = float(n.detach()[slope.argmax()])

fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
ax.plot(n.detach(), slope, lw=2.5, label="autograd: d||v|| / d||s||")
ax.plot(n.detach(), 2 * n.detach() / (1 + n.detach() ** 2) ** 2, "--", color="k", lw=1, label="2n / (1+n²)²")
ax.axvline(peak, color=VERMILLION, lw=1, ls=":")
ax.annotate(f"steepest at n ≈ {peak:.2f} (1/√3)", (peak, float(slope.max())), xytext=(1.3, 0.55),
            arrowprops={"arrowstyle": "->"})
ax.set(xlabel="input length ||s||", ylabel="slope of the output length",
       title="squash's slope: lengths change fastest near ||s|| ≈ 0.6, hardly at all for long vectors")
ax.legend(loc="upper right")
plt.show()

# %% [markdown]
# A capsule that is already long gets almost no push to grow further. The margin loss of lesson 04
# asks the right digit's capsule for a length of 0.9 and no more; Exercise 1 finds how long its
# input must be for that. Things to try:
#
# - How small must a vector be before ε changes its squashed length by more than 1 %? Compare
#   `squash(s, eps=1e-8)` and `squash_naive(s)` for lengths $10^{-2}, 10^{-3}, 10^{-4}, 10^{-5}$.
# - Squash a single vector of 1,000 dimensions whose entries are all 0.1. Is its output length
#   what you expect from its norm alone?
# - Efficient-CapsNet (Mazzia et al. 2021, lesson 12) squashes with
#   $(1 - e^{-\lVert\mathbf s\rVert})\,\mathbf s/\lVert\mathbf s\rVert$ instead. Plot it next to
#   Eq. 1: which one is steeper for short vectors?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: how long must the input be?
#
# The margin loss of lesson 04 wants the capsule of the right digit to be at least $m^+ = 0.9$
# long. Write `input_length_for(p)` that returns the input length $n$ whose squashed length is
# exactly `p` (for $0 < p < 1$). What does it give for 0.9?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def input_length_for(p: float) -> float:
    ### BEGIN SOLUTION
    return float(np.sqrt(p / (1 - p)))
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_input_length_for(input_length_for)  # prints ✅ or a hint

# %%
if result:
    print(f"a length of 0.9 needs ||s|| = {input_length_for(0.9):.3f}; 0.1 needs {input_length_for(0.1):.3f}")
else:
    print("→ this cell runs once Exercise 1 passes its check")

# %% [markdown]
# The right digit's capsule needs an input three times the length that squashes to 0.5, while an
# absent digit's capsule, held below $m^- = 0.1$, must keep its input to a third of that length.
# Beyond an input of 3 the margin loss stops pulling, which is where squash's slope has flattened.
#
# ### Exercise 2: how many votes make a capsule present?
#
# From lesson 03 on, a capsule's input is a sum of *votes* $\hat{\mathbf u}$ from the capsules
# below, one per part, and squash turns the sum into a presence. Suppose every vote has the same
# length $a$. Write `votes_needed(p, a, agree)`: the **fewest** votes whose squashed sum is at
# least `p` long, when the votes **agree** (all point the same way, `agree=True`) and when they
# disagree as much as they can without cancelling: every vote at right angles to every other
# (`agree=False`). Return a whole number. Think before you code: how long is a sum of $K$ votes in
# each case?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def votes_needed(p: float, a: float, agree: bool) -> int:
    ### BEGIN SOLUTION
    n = np.sqrt(p / (1 - p))  # the input length that squashes to p
    k = n / a if agree else (n / a) ** 2  # K a >= n, or sqrt(K) a >= n at right angles
    return int(np.ceil(k - 1e-9))
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_votes_needed(votes_needed)  # prints ✅ or a hint

# %% [markdown]
# Now build the votes and squash them, for votes of length 0.4 and a presence of 0.9: agreeing votes
# are copies of one vector, votes at right angles are the rows of a scaled identity matrix. A third
# case is closer to what a capsule layer sees: votes in random directions of a 16-dimensional space,
# averaged over 2,000 draws.

# %%
if result:
    a, p, dims = 0.4, 0.9, 16
    agreeing, crossed = votes_needed(p, a, True), votes_needed(p, a, False)
    for name, k in (("agreeing", agreeing), ("at right angles", crossed)):
        for count in (k - 1, k):
            votes = a * (torch.ones(count, 1) if name == "agreeing" else torch.eye(count))  # (K, D)
            print(f"{count:3d} votes {name:16s}: squashed length {float(squash(votes.sum(dim=0)).norm()):.4f}")
    random_votes = a * torch.nn.functional.normalize(torch.randn(2000, crossed, dims), dim=-1)  # (draws, K, D)
    random_lengths = squash(random_votes.sum(dim=1)).norm(dim=-1)  # (draws,)
    print(f"{crossed:3d} votes in random 16-D directions: mean squashed length {float(random_lengths.mean()):.3f}")
    cosines = (random_votes[:, 0] * random_votes[:, 1]).sum(dim=-1) / a ** 2  # (draws,) two votes' cos
    squared_sum = random_votes.sum(dim=1).pow(2).sum(dim=-1)  # (draws,) squared length of the sum
    print(f"  two random votes: mean |cos| {float(cosines.abs().mean()):.2f}; their sum: mean squared "
          f"length {float(squared_sum.mean()):.2f} (K a² = {crossed * a ** 2:.2f}), "
          f"mean length {float(squared_sum.sqrt().mean()):.2f}")
    lone = float(squash(a * torch.ones(1)).norm())
    print(f"  1 vote alone: {lone:.3f}; agreement needs {agreeing} votes, disagreement "
          f"{crossed} ({crossed / agreeing:.1f}× as many)")
else:
    print("→ this cell runs once Exercise 2 passes its check")

# %% [markdown]
# A single vote of length 0.4 squashes to a capsule under 0.14 long: on its own, a part barely
# registers. Agreeing votes add their lengths, so a handful of them carry the capsule past 0.9.
# Votes at right angles add only their squared lengths: the sum grows with the square root of
# their number, so it takes about the square of that handful. Random directions in 16 dimensions
# are *not* at right angles (two of them have a mean |cos| of 0.21), but their cross terms cancel
# on average. The sum's mean squared length is K a² (9.12 for these 57 votes), as for votes at
# right angles, so they need about as many. Squash only reads the length of the sum, and
# agreement makes that length grow like K instead of √K. Dynamic routing (lesson 03) goes one step
# further and sends each part's vote where it agrees.

# %% [markdown]
# ## Summary
#
# - Squash (Eq. 1) scales each capsule's vector by $\lVert\mathbf s\rVert/(1+\lVert\mathbf s\rVert^2)$:
#   the output length is $n^2/(1+n^2) \in [0, 1)$, the direction is unchanged.
# - The norm is taken over the capsule's own dimension (`dim=-1, keepdim=True`), one per capsule.
# - Without care, the zero vector gives NaN: in the value ($0/0$) or, more insidiously, in the
#   gradient ($0\cdot\infty$ from the square root). Putting ε **inside** the square root fixes both,
#   and one NaN gradient would otherwise poison a whole weight matrix.
# - Lengths move fastest near $\lVert\mathbf s\rVert \approx 0.6$ and saturate above about 3.
# - Summed and squashed, agreeing votes make a capsule present far sooner than scattered ones.

# %% [markdown]
# ## Self-check
#
# A few questions to test your understanding; click an answer to see whether it is right and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("01")

# %% [markdown]
# ## What's next
#
# **Lesson 02 — Primary capsules** builds the first capsule layer of the network: two
# convolutions turn a 28×28 digit into 1,152 capsules of 8 numbers each, squashed with exactly this
# function. The tricky part is a reshape — get the order wrong and the "capsules" are nonsense.
