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
# # Lesson 03 — Dynamic routing by agreement
#
# Primary capsules (lesson 02) each hold an 8-D vector. In this lesson they vote for the 10 digit
# capsules: every primary capsule $i$ predicts each digit capsule $j$ through its own matrix,
# $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$, and *routing by agreement* (Procedure 1 of
# Sabour et al., 2017) decides how much of each vote reaches each digit: votes that agree with
# the emerging output get a larger share. You write Procedure 1 twice — as a literal loop, then
# vectorised — check both against `capsedu`, see why the softmax must run over the output
# capsules, why the inner iterations detach $\hat{\mathbf u}$, and watch the coupling
# coefficients of a real digit sharpen as you move a slider from 1 to 7 iterations.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - compute the prediction vectors $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$ and name
#   every axis of the (B, I, J, D_out) result;
# - write Procedure 1 as a loop over capsules and as a few tensor operations, and prove they agree;
# - explain why $c_{ij}$ is a softmax over the output capsules $j$, and what breaks otherwise;
# - explain what `detach_inner` changes (gradients, not outputs);
# - read coupling-coefficient maps of a trained network and see what extra iterations do.
#
# ## Prerequisites and time
#
# Lessons 01 (squash) and 02 (primary capsules); tensor broadcasting and `torch.einsum` at the
# level of "which letters are summed". About 60 minutes. The routing pictures come from a small
# CapsNet trained for you and shipped with the course (`capsedu.pretrained()`), so nothing here
# takes more than a few seconds to run.

# %%
import time
from itertools import pairwise

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from torch.utils.data import DataLoader

import capsedu
from capsedu import CapsNetConfig, DigitCaps, dynamic_routing, squash
from capsedu.course.checks.routing import check_predictions, check_routing, check_routing_history

generator = capsedu.set_seed(0)

# %% [markdown]
# ## Build it
#
# ### 1. Prediction vectors $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$
#
# Each of the $I$ primary capsules $\mathbf u_i$ (8-D) makes one prediction for each of the $J$
# digit capsules, through its own learned $16\times 8$ matrix $\mathbf W_{ij}$. So `W` has shape
# (I, J, D_out, D_in) and the predictions have shape (B, I, J, D_out). In `torch.einsum`
# notation: `"ijdk,bik->bijd"` — for every image `b`, input `i`, output `j`, multiply the matrix
# `W[i, j]` (rows `d`, columns `k`) by the vector `u[b, i]` (entries `k`) and sum over `k`.
#
# Shapes at the paper's size (1152 primary capsules of 8-D, 10 digit capsules of 16-D):

# %%
# NBVAL_CHECK_OUTPUT
paper = CapsNetConfig.paper()
I, D_in, J, D_out = paper.num_primary_caps, paper.primary_dim, paper.num_classes, paper.digit_dim
W = 0.01 * torch.randn(I, J, D_out, D_in, generator=generator)  # (I, J, D_out, D_in)
u = squash(torch.randn(2, I, D_in, generator=generator))  # (B, I, D_in): 2 images
u_hat = torch.einsum("ijdk,bik->bijd", W, u)  # (B, I, J, D_out)
print(f"u      {tuple(u.shape)}        (B, I, D_in)      primary capsules")
print(f"W      {tuple(W.shape)}  (I, J, D_out, D_in) one 16x8 matrix per (i, j) pair")
print(f"u_hat  {tuple(u_hat.shape)}   (B, I, J, D_out)  one 16-D vote per (i, j) pair")
print(f"W holds {W.numel():,} weights")

# %% [markdown]
# `capsedu.DigitCaps` stores the same matrix as its parameter `W`; its `predict` method must give
# exactly these votes:

# %%
digit_caps = DigitCaps(I, D_in, J, D_out)
with torch.no_grad():
    digit_caps.W.copy_(W)
torch.testing.assert_close(digit_caps.predict(u), u_hat)

# %% [markdown]
# ### 2. Procedure 1 as an explicit loop
#
# The paper's Procedure 1, for $r$ iterations, with routing logits $b_{ij}$ starting at 0:
#
# 1. for every input capsule $i$: $\mathbf c_i \leftarrow \operatorname{softmax}(\mathbf b_i)$
#    — Eq. 3, a softmax over the **output** capsules $j$;
# 2. for every output capsule $j$: $\mathbf s_j \leftarrow \sum_i c_{ij}\hat{\mathbf u}_{j|i}$
#    — Eq. 2;
# 3. for every output capsule $j$: $\mathbf v_j \leftarrow \operatorname{squash}(\mathbf s_j)$
#    — Eq. 1;
# 4. for every pair $(i, j)$: $b_{ij} \leftarrow b_{ij} + \hat{\mathbf u}_{j|i}\cdot\mathbf v_j$
#    — the *agreement* between a vote and the output.
#
# Written exactly like that, one capsule at a time (step 4 is skipped after the last iteration:
# it would only change logits nobody reads):

# %%
def routing_loop(u_hat: torch.Tensor, num_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1, one capsule at a time. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    batch, num_in, num_out, dim = u_hat.shape
    v = torch.zeros(batch, num_out, dim)
    c = torch.zeros(batch, num_in, num_out)
    for n in range(batch):  # images are routed independently
        b = torch.zeros(num_in, num_out)  # b_ij <- 0
        for iteration in range(num_iterations):
            for i in range(num_in):
                c[n, i] = torch.softmax(b[i], dim=0)  # Eq. 3: over the outputs j
            for j in range(num_out):
                s_j = sum(c[n, i, j] * u_hat[n, i, j] for i in range(num_in))  # Eq. 2
                v[n, j] = squash(s_j)  # Eq. 1
            if iteration < num_iterations - 1:
                for i in range(num_in):
                    for j in range(num_out):
                        b[i, j] = b[i, j] + u_hat[n, i, j] @ v[n, j]  # agreement
    return v, c


# %% [markdown]
# ### 3. Vectorised
#
# The loops over $n$, $i$ and $j$ become broadcasting. Follow the shapes:
#
# | quantity | shape | how |
# |---|---|---|
# | `b`, `c` | (B, I, J) | `softmax(b, dim=2)`: dim 2 is J |
# | `c[..., None] * u_hat` | (B, I, J, D) | each vote scaled by its coupling |
# | `s`, `v` | (B, J, D) | sum over dim 1 (I), then squash each D-vector |
# | agreement | (B, I, J) | `(u_hat * v[:, None]).sum(-1)`: one dot product per (i, j) |
#
# `softmax_dim` is an argument only so that we can break it on purpose below.

# %%
def routing_vectorised(u_hat: torch.Tensor, num_iterations: int,
                       softmax_dim: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1 with tensor operations. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    for iteration in range(num_iterations):
        c = torch.softmax(b, dim=softmax_dim)  # (B, I, J)  Eq. 3
        s = (c[..., None] * u_hat).sum(dim=1)  # (B, J, D)  Eq. 2
        v = squash(s, dim=-1)  # (B, J, D)  Eq. 1
        if iteration < num_iterations - 1:
            b = b + (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)  agreement
    return v, c


# %% [markdown]
# ## Check it
#
# Both versions against `capsedu.dynamic_routing`, on a small random problem (the loop is slow)
# with 1 and 3 iterations:

# %%
# NBVAL_CHECK_OUTPUT
small = 0.5 * torch.randn(2, 32, 10, 16, generator=generator)  # (B, I, J, D)
for r in (1, 3):
    v_ref, c_ref = dynamic_routing(small, r)
    for routing in (routing_loop, routing_vectorised):
        v_mine, c_mine = routing(small, r)
        torch.testing.assert_close(v_mine, v_ref)
        torch.testing.assert_close(c_mine, c_ref)
print("routing_loop and routing_vectorised match capsedu.dynamic_routing for r = 1 and r = 3")
check_routing(routing_loop)
_ = check_routing(routing_vectorised)  # prints ✅ or a hint

# %% [markdown]
# And at the paper's size, on the votes `u_hat` from step 1. The loop routes one image; the
# vectorised version does both, and is far faster (your timings will differ):

# %%
start = time.perf_counter()
v_loop, c_loop = routing_loop(u_hat[:1], 3)
loop_seconds = time.perf_counter() - start
start = time.perf_counter()
v_vec, c_vec = routing_vectorised(u_hat, 3)
vectorised_seconds = time.perf_counter() - start
v_ref, c_ref = dynamic_routing(u_hat, 3)
torch.testing.assert_close(v_loop, v_ref[:1])
torch.testing.assert_close(v_vec, v_ref)
torch.testing.assert_close(c_vec, c_ref)
print(f"loop: {loop_seconds:.2f} s for 1 image; vectorised: {1000 * vectorised_seconds:.1f} ms "
      f"for {len(u_hat)} images")

# %% [markdown]
# ### The softmax runs over the output capsules J
#
# $c_{ij}$ is how much of capsule $i$'s vote goes to parent $j$: each input capsule has one unit
# of "vote" to share among the J parents, so $\sum_j c_{ij} = 1$ for every $i$. That is
# `softmax(b, dim=2)`. With `dim=1` the softmax normalises over the 1152 *inputs* instead: the
# coefficients no longer sum to 1 over J, no input has to choose between parents, and every
# output capsule receives a weighted *average* of its votes instead of a sum of shares.

# %%
# NBVAL_CHECK_OUTPUT
_, c_right = routing_vectorised(u_hat, 3, softmax_dim=2)
_, c_wrong = routing_vectorised(u_hat, 3, softmax_dim=1)
sum_right, sum_wrong = c_right.sum(dim=2), c_wrong.sum(dim=2)  # (B, I): sum over J
assert torch.allclose(sum_right, torch.ones_like(sum_right))
assert not torch.allclose(sum_wrong, torch.ones_like(sum_wrong), atol=0.5)
print(f"softmax over J (dim=2): sum over j of c_ij is 1 for all {sum_right.numel()} (image, i)")
print(f"softmax over I (dim=1): sum over j of c_ij is on average {sum_wrong.mean():.4f} "
      f"= J/I = {J}/{I}")

# %% [markdown]
# Averaging 1152 small, disagreeing votes gives a short $\mathbf s_j$, and squash shrinks short
# vectors to almost nothing, so every digit capsule ends up nearly empty: routing degenerates.
# You will see it on a real digit in *Explore*.
#
# ### Why the inner iterations detach $\hat{\mathbf u}$
#
# The coupling coefficients are computed from $\hat{\mathbf u}$ (through the agreements), so in
# principle gradients can flow back through every iteration. `capsedu.dynamic_routing` by default
# (`detach_inner=True`) lets every iteration but the last see `u_hat.detach()`: the forward pass
# is identical, but backpropagation treats the final $c_{ij}$ as constants and only follows
# $\mathbf s_j = \sum_i c_{ij}\hat{\mathbf u}_{j|i}$ of the last iteration. That keeps the backward
# graph as short as one iteration (less memory and time), and training never differentiates
# through the routing decisions themselves: routing acts as a fixed procedure. The paper's own code
# let gradients flow through all iterations (`detach_inner=False`); many re-implementations
# detach. Compare on the strong random votes `small` from *Check it* (the gradient of the
# length of output capsule 0):

# %%
votes = small.clone().requires_grad_(True)  # (B, I, J, D)
outputs, gradients = {}, {}
for detach in (True, False):
    v_out, _ = dynamic_routing(votes, 3, detach_inner=detach)
    (grad,) = torch.autograd.grad(v_out.norm(dim=-1)[:, 0].sum(), votes)  # d ||v_0|| / d u_hat
    outputs[detach], gradients[detach] = v_out.detach(), grad
torch.testing.assert_close(outputs[True], outputs[False])  # same forward pass
difference = (gradients[True] - gradients[False]).norm() / gradients[False].norm()
cosine = torch.nn.functional.cosine_similarity(gradients[True].flatten(), gradients[False].flatten(),
                                               dim=0)
print(f"outputs identical; gradients differ by {100 * difference:.1f}% (cosine similarity "
      f"{cosine:.3f})")

# %% [markdown]
# With a single iteration there is nothing to detach, so both settings must give the same
# gradient:

# %%
# NBVAL_CHECK_OUTPUT
one_iteration = []
for detach in (True, False):
    v_out, _ = dynamic_routing(votes, 1, detach_inner=detach)
    one_iteration.append(torch.autograd.grad(v_out.norm(dim=-1)[:, 0].sum(), votes)[0])
torch.testing.assert_close(one_iteration[0], one_iteration[1])
print("r = 1: detach_inner makes no difference to the gradient")

# %% [markdown]
# ## Use capsedu
#
# ### A trained CapsNet
#
# Coupling coefficients of an untrained network tell you nothing, so we load a trained one:
# `capsedu.pretrained()` is the CPU configuration (`CapsNetConfig.cpu()`, a narrower network
# with the paper's routing and decoder: 8 primary capsule types instead of 32) trained for you
# on 5,000 MNIST images. It loads in a second and checks its file's checksum first. Lesson 06
# shows how such a network is trained; lesson 07 explores it further.

# %%
model = capsedu.pretrained()  # eval mode, checksum verified
config = model.config
print(f"CPU configuration: {config.conv1_channels} conv1 channels, {config.primary_types} "
      f"primary capsule types -> I = {config.num_primary_caps} primary capsules")

# %%
test_data = capsedu.load_mnist("test")
test_loader = DataLoader(test_data.subset(capsedu.choose(learner=2000, fast=200), seed=0),
                         batch_size=500)
test_accuracy = capsedu.evaluate(model, test_loader)["accuracy"]
print(f"test accuracy of the trained model: {test_accuracy:.1%}")

# %% [markdown]
# ### Coupling coefficients of a real digit
#
# We take one test digit, compute its votes $\hat{\mathbf u}$ **once**, and route them with any
# number of iterations. `model(x, return_couplings=True)` would do the same in one call; the
# assert shows that the pieces agree with it.

# %%
image, label = test_data.images[0], int(test_data.labels[0])
with torch.no_grad():
    digit_u = model.encode(image[None])  # (1, I, D_in)
    digit_u_hat = model.digits.predict(digit_u)  # (1, I, J, D_out)
    full = model(image[None], return_couplings=True)
    v3, c3 = dynamic_routing(digit_u_hat, 3)
torch.testing.assert_close(v3, full.capsules)
torch.testing.assert_close(c3, full.couplings)
print(f"votes u_hat {tuple(digit_u_hat.shape)}; true label {label}, "
      f"predicted {int(full.lengths.argmax())}")

# %% [markdown]
# The primary capsules here are $T$ types at each of the $6\times 6$ grid positions
# ($I = 6 \cdot 6 \cdot T$, printed above). To draw $c_{ij}$ for one digit class $j$ we average
# it over the $T$ types at each position, weighting each capsule by its length $\lVert\mathbf u_i\rVert$
# (short capsules are "absent" and their votes barely count). The result is a $6\times 6$ map laid
# over the image: where do the parts of the digit send their votes? We draw it as $J\,c_{ij}$, so
# 1 means "uniform" (white), above 1 (red) "more than a fair share to this class". Each square
# sits at the centre of the 17×17-pixel patch its capsules see; the patches overlap heavily, so
# the map covers only the middle of the image.

# %%
def coupling_map(c: torch.Tensor, u: torch.Tensor, j: int) -> torch.Tensor:
    """Length-weighted mean of c_ij over capsule types: c (1, I, J), u (1, I, D_in) -> (G, G)."""
    types, grid = config.primary_types, config.primary_grid
    weight = u[0].norm(dim=-1).view(types, grid, grid)  # (T, G, G), i = t*G*G + y*G + x
    c_j = c[0, :, j].view(types, grid, grid)  # (T, G, G)
    return (weight * c_j).sum(dim=0) / weight.sum(dim=0)  # (G, G)


def class_shares(c: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Length-weighted share of all votes that goes to each class: (J,), sums to 1."""
    weight = u[0].norm(dim=-1)  # (I,)
    return (weight[:, None] * c[0]).sum(dim=0) / weight.sum()  # (J,)


def route(num_iterations: int) -> dict[str, torch.Tensor]:
    """Route the digit's votes; everything the figures need."""
    v, c = dynamic_routing(digit_u_hat, num_iterations)  # (1, J, D_out), (1, I, J)
    lengths = v[0].norm(dim=-1)  # (J,)
    predicted = int(lengths.argmax())
    return {"lengths": lengths, "predicted": predicted, "shares": class_shares(c, digit_u),
            "map": config.num_classes * coupling_map(c, digit_u, predicted)}  # 1 = uniform


most_routed = route(7)  # colour and axis ranges that fit every r from 1 to 7
MAP_SPREAD = max(float((most_routed["map"] - 1).abs().max()), 0.01)
SHARE_TOP = max(0.2, 1.25 * float(most_routed["shares"].max()))
for r in (1, 3, 7):
    result = route(r)
    print(f"r = {r}: {result['shares'][label]:.1%} of the votes go to class {label}, "
          f"its capsule is {result['lengths'][label]:.3f} long")


# %%
def map_extent() -> tuple[float, float, float, float]:
    """Pixel extent of the grid when each cell sits at the centre of its receptive field."""
    first_centre = (config.conv1_kernel + config.primary_kernel - 2) / 2 + 0.5  # grid cell 0
    half, step = config.primary_stride / 2, config.primary_stride
    low, high = first_centre - half, first_centre + step * (config.primary_grid - 1) + half
    return (low, high, high, low)


def draw_map(ax: plt.Axes, values: torch.Tensor) -> plt.Artist:
    """A (G, G) coupling map over the image (gray), with the digit's outline on top."""
    ax.imshow(image[0], cmap="gray_r", alpha=0.3, extent=(0, 28, 28, 0))
    heat = ax.imshow(values, cmap="RdBu_r", vmin=1 - MAP_SPREAD, vmax=1 + MAP_SPREAD,
                     extent=map_extent(), alpha=0.9)
    centres = torch.arange(28) + 0.5
    ax.contour(centres, centres, image[0], levels=[0.5], colors="black", linewidths=1.2)
    ax.set(xlim=(3, 25), ylim=(25, 3))  # MNIST digits sit in the central 20x20 pixels
    ax.set_axis_off()
    return heat


def draw_routing(num_iterations: int) -> tuple[plt.Figure, dict]:
    """One figure: coupling map, vote shares and capsule lengths; returns it and its artists."""
    fig, (ax_map, ax_share, ax_len) = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained",
                                                   gridspec_kw={"width_ratios": [1, 1.3, 1.3]})
    heat = draw_map(ax_map, torch.zeros(config.primary_grid, config.primary_grid))
    fig.colorbar(heat, ax=ax_map, fraction=0.046, label="$J\\,c_{ij}$ (1 = uniform)")
    classes = range(config.num_classes)
    share_bars = ax_share.bar(classes, torch.zeros(10), color="tab:blue")
    ax_share.axhline(0.1, color="gray", ls=":", label="uniform 1/J")
    ax_share.set(ylim=(0, SHARE_TOP), xticks=list(classes), xlabel="digit class j",
                 ylabel="share of the votes", title="where the votes go")
    ax_share.legend(loc="upper left")
    length_bars = ax_len.bar(classes, torch.zeros(10), color="tab:orange")
    ax_len.axhline(0.9, color="green", ls="--", label="m+ = 0.9")
    ax_len.axhline(0.1, color="red", ls="--", label="m- = 0.1")
    ax_len.set(ylim=(0, 1), xticks=list(classes), xlabel="digit class j",
               ylabel=r"length $\|\mathbf{v}_j\|$", title="digit capsule lengths")
    ax_len.legend(loc="center right")
    artists = {"heat": heat, "shares": share_bars, "lengths": length_bars, "map_axis": ax_map,
               "title": fig.suptitle("")}
    update_routing(artists, num_iterations)
    return fig, artists


def update_routing(artists: dict, num_iterations: int) -> None:
    """Redraw the existing artists for another number of iterations (nothing is recreated)."""
    result = route(num_iterations)
    artists["heat"].set_data(result["map"])
    for j, (share_bar, length_bar) in enumerate(zip(artists["shares"], artists["lengths"])):
        share_bar.set_height(float(result["shares"][j]))
        length_bar.set_height(float(result["lengths"][j]))
        highlight = j == result["predicted"]
        share_bar.set_color("tab:red" if highlight else "tab:blue")
        length_bar.set_color("tab:red" if highlight else "tab:orange")
    artists["map_axis"].set_title(f"coupling to class {result['predicted']}")
    artists["title"].set_text(f"Trained CapsNet, test digit {label}: "
                              f"r = {num_iterations} routing iteration(s)")


# %% [markdown]
# Move the slider (needs a running kernel): the votes are computed once above, only the routing
# reruns. One iteration is a plain uniform average ($c_{ij} = 1/J$, a white map); each further
# iteration shifts the votes of the digit's strokes a little further towards the class they agree
# on, and that capsule grows. Look at the numbers printed above, though: in this network the
# shift is a few per cent, not the sharp all-or-nothing routing the paper's pictures suggest —
# the colour scale and the share axis are stretched to make it visible. The votes of a trained
# network already agree, so most of the work is done by $\mathbf W$, and extra iterations mostly
# make the longest capsule longer without changing the prediction. Paik et al. (2019, *Capsule
# Networks Need an Improved Routing Algorithm*) report the same for larger studies: routing
# rarely changes the classification, but it polarises the coupling coefficients, more and more
# the longer it runs.

# %%
routing_fig, routing_artists = draw_routing(3)
plt.close(routing_fig)  # shown inside the Output widget below, not twice
slider = widgets.IntSlider(value=3, min=1, max=7, description="iterations r",
                           continuous_update=False)
canvas = widgets.Output()


def on_slider(change: dict | None = None) -> None:
    update_routing(routing_artists, slider.value)
    with canvas:
        canvas.clear_output(wait=True)
        display(routing_fig)


slider.observe(on_slider, names="value")
on_slider()
display(widgets.VBox([slider, canvas]))

# %% [markdown]
# The same for r = 1 … 7 side by side, for readers without a kernel:

# %%
def draw_iterations(max_iterations: int = 7) -> plt.Figure:
    """Coupling maps for r = 1..max (top) and how shares and lengths evolve (bottom)."""
    results = [route(r) for r in range(1, max_iterations + 1)]
    fig = plt.figure(figsize=(13, 6.8))
    grid = fig.add_gridspec(2, max_iterations, height_ratios=[1.3, 1.4], hspace=0.35)
    for r, result in enumerate(results, start=1):
        ax = fig.add_subplot(grid[0, r - 1])
        heat = draw_map(ax, result["map"])
        ax.set_title(f"r = {r}: to {result['predicted']}", fontsize=10)
    fig.colorbar(heat, ax=fig.axes, fraction=0.02, label="$J\\,c_{ij}$ (1 = uniform)")
    iterations = range(1, max_iterations + 1)
    ax_share = fig.add_subplot(grid[1, : max_iterations // 2])
    ax_len = fig.add_subplot(grid[1, max_iterations // 2 + 1:])
    for j in range(config.num_classes):
        style = {"color": "gray", "lw": 1, "alpha": 0.6}
        if j == label:
            style = {"color": "tab:red", "lw": 2.5, "label": f"class {j} (true label)"}
        ax_share.plot(iterations, [float(res["shares"][j]) for res in results], "o-", **style)
        ax_len.plot(iterations, [float(res["lengths"][j]) for res in results], "o-", **style)
    ax_share.set(xlabel="routing iterations r", ylabel="share of the votes", ylim=(0, SHARE_TOP),
                 title="vote share per class (gray: other classes)")
    ax_len.set(xlabel="routing iterations r", ylabel=r"$\|\mathbf{v}_j\|$", ylim=(0, 1),
               title="capsule length per class")
    ax_share.legend(loc="upper left")
    ax_len.legend(loc="center right")
    fig.suptitle(f"Routing a test digit {label} with 1 to {max_iterations} iterations "
                 "(trained CapsNet)")
    return fig


draw_iterations();

# %% [markdown]
# ## Explore
#
# ### The wrong softmax axis on a real digit
#
# The same votes, routed with the softmax over the inputs (`dim=1`) instead of the outputs:

# %%
def draw_axis_comparison() -> plt.Figure:
    """Capsule lengths for this digit with the softmax over J (right) and over I (wrong)."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    width, classes = 0.4, torch.arange(config.num_classes)
    for offset, dim, name in ((-width / 2, 2, "softmax over J (dim=2, right)"),
                              (width / 2, 1, "softmax over I (dim=1, wrong)")):
        v, _ = routing_vectorised(digit_u_hat, 3, softmax_dim=dim)  # (1, J, D_out)
        lengths = v[0].norm(dim=-1)  # (J,)
        ax.bar(classes + offset, lengths, width, label=f"{name}: longest {lengths.max():.4f}")
    ax.set(xticks=classes.tolist(), xlabel="digit class j", ylabel=r"$\|\mathbf{v}_j\|$",
           ylim=(0, 1), title=f"Test digit {label}, r = 3: the wrong axis empties every capsule")
    ax.legend()
    return fig


draw_axis_comparison();

# %% [markdown]
# ### Things to try
#
# - Pick another test image (`test_data.images[k]`), ideally one the model gets wrong (compare
#   `model(test_data.images[:200]).lengths.argmax(1)` with the labels): does routing help or
#   hurt with more iterations?
# - Route the *untrained* network's votes (`capsedu.CapsNet(config)`): what do the maps show?
# - The paper found 3 iterations a good trade-off. Does the length of the right class keep
#   growing after r = 3 in the plot above, or does it saturate?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: prediction vectors with `matmul`
#
# Write `predict_matmul(W, u)` that returns the votes $\hat{\mathbf u}_{j|i} = \mathbf
# W_{ij}\mathbf u_i$ **without** `einsum`, using the `@` operator and broadcasting. `W` is
# (I, J, D_out, D_in), `u` is (B, I, D_in), the result (B, I, J, D_out). Hint: make `u` a column
# vector per (b, i) and give it a J axis of size 1.

# %%
def predict_matmul(W: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    columns = u[:, :, None, :, None]  # (B, I, 1, D_in, 1)
    return (W @ columns).squeeze(-1)  # (I, J, D_out, D_in) @ (B, I, 1, D_in, 1) -> (B, I, J, D_out)
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
_ = check_predictions(predict_matmul)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 2: watch the coupling coefficients evolve
#
# Write `routing_history(u_hat, num_iterations)` that runs Procedure 1 once and returns a list
# of the coupling coefficients used in each iteration, `[c_1, ..., c_r]`, each (B, I, J). The
# first is the uniform $1/J$; entry $k$ must equal the `c` of `dynamic_routing(u_hat, k)`.

# %%
def routing_history(u_hat: torch.Tensor, num_iterations: int) -> list[torch.Tensor]:
    ### BEGIN SOLUTION
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    history = []
    for _ in range(num_iterations):
        c = torch.softmax(b, dim=2)  # (B, I, J)
        history.append(c)
        v = squash((c[..., None] * u_hat).sum(dim=1), dim=-1)  # (B, J, D)
        b = b + (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)
    return history
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
_ = check_routing_history(routing_history)  # prints ✅ or a hint

# %% [markdown]
# With your history you can measure whether routing settles: the largest change of any coupling
# coefficient of our test digit from one iteration to the next. Routing has no fixed point: as
# long as votes agree with the output, every iteration adds about the same agreement to $b$, so
# $c$ keeps sharpening towards a hard, one-parent assignment. The number of iterations is a
# design choice (the paper uses 3), not a convergence criterion.

# %%
couplings = routing_history(digit_u_hat, 7)
changes = [float((after - before).abs().max()) for before, after in pairwise(couplings)]
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(range(2, 8), changes, "o-")
ax.set(xlabel="iteration k", ylabel=r"max $|c^{(k)} - c^{(k-1)}|$", ylim=(0, 1.1 * max(changes)),
       title=f"Change of c per iteration (test digit {label})")
ax.grid(alpha=0.3);

# %% [markdown]
# ## Summary
#
# - Every primary capsule votes for every digit capsule: $\hat{\mathbf u}_{j|i} = \mathbf
#   W_{ij}\mathbf u_i$, shape (B, I, J, D_out), through 1.5 million weights at the paper's size.
# - Procedure 1: $c = \operatorname{softmax}_j(b)$, $\mathbf s_j = \sum_i c_{ij}\hat{\mathbf
#   u}_{j|i}$, $\mathbf v_j = \operatorname{squash}(\mathbf s_j)$, $b_{ij} \mathrel{+}=
#   \hat{\mathbf u}_{j|i}\cdot\mathbf v_j$. Vectorised it is four lines; `capsedu.dynamic_routing`
#   is exactly that.
# - The softmax runs over the output capsules: each input shares one unit of vote among the
#   parents. Over the wrong axis the couplings no longer sum to 1 over J and all outputs collapse.
# - `detach_inner=True` leaves the forward pass unchanged and lets gradients reach
#   $\hat{\mathbf u}$ only through the last iteration.
# - In a trained network, extra iterations move the votes of a digit's strokes to the class they
#   agree on and that capsule grows longer; here the shift is a few per cent and the prediction
#   does not change — routing sharpens, it rarely decides.
#
# ## What's next
#
# The capsule lengths you just saw are trained by the **margin loss** (Eq. 4): lesson 04 builds
# it, including the two bugs peers most often make.
