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
# vectorised — and check both against `capsedu`. You see why the softmax must run over the output
# capsules and what detaching the inner iterations changes. Then you route a real digit through a
# trained network with a slider from 1 to 7 iterations, and measure how much routing moves.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - compute the prediction vectors $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$ and name
#   every axis of the (B, I, J, D_out) result;
# - write Procedure 1 as a loop over capsules and as a few tensor operations, and prove they agree;
# - explain why $c_{ij}$ is a softmax over the output capsules $j$, and what breaks otherwise;
# - say why the logits are log priors, why agreement is a dot product and why every primary
#   capsule has its own $\mathbf W_{ij}$;
# - explain what `detach_inner` changes (gradients, not outputs), and what it did to training;
# - read coupling maps and vote shares of a trained network, and say how much extra iterations
#   change them.
#
# ## Prerequisites and time
#
# Lessons 01 (squash) and 02 (primary capsules); tensor broadcasting and `torch.einsum` at the
# level of "which letters are summed". About 60 minutes. The routing pictures come from a small
# CapsNet trained for you and shipped with the course (`capsedu.pretrained()`, trained on 55,000
# MNIST training images that none of the test digits here belong to), so nothing here takes more than a few
# seconds to run.

# %%
import time
from itertools import pairwise

# %matplotlib inline
import matplotlib.pyplot as plt
import torch
from torch.utils.data import DataLoader

import capsedu
from capsedu import CapsNetConfig, DigitCaps, dynamic_routing, squash
from capsedu.course.checks.routing import check_predictions, check_routing, check_routing_history
from capsedu.explore.figures import routing_strip
from capsedu.explore.probes import vote_shares
from capsedu.explore.widgets import routing_explorer
from capsedu.zoo.shipped import study

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

# %% tags=["nbval-check-output"]
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
# `capsedu.DigitCaps` stores the same matrix as its parameter `W`; its `prediction_vectors` method must give
# exactly these votes:

# %%
digit_caps = DigitCaps(I, D_in, J, D_out)
with torch.no_grad():
    digit_caps.W.copy_(W)
torch.testing.assert_close(digit_caps.prediction_vectors(u), u_hat)

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
def routing_loop(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1, one capsule at a time. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    batch, num_in, num_out, dim = u_hat.shape
    v = torch.zeros(batch, num_out, dim)
    c = torch.zeros(batch, num_in, num_out)
    for n in range(batch):  # images are routed independently
        b = torch.zeros(num_in, num_out)  # b_ij <- 0
        for iteration in range(routing_iterations):
            for i in range(num_in):
                c[n, i] = torch.softmax(b[i], dim=0)  # Eq. 3: over the outputs j
            for j in range(num_out):
                s_j = sum(c[n, i, j] * u_hat[n, i, j] for i in range(num_in))  # Eq. 2
                v[n, j] = squash(s_j)  # Eq. 1
            if iteration < routing_iterations - 1:
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
def routing_vectorised(u_hat: torch.Tensor, routing_iterations: int,
                       softmax_dim: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1 with tensor operations. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    for iteration in range(routing_iterations):
        c = torch.softmax(b, dim=softmax_dim)  # (B, I, J)  Eq. 3
        s = (c[..., None] * u_hat).sum(dim=1)  # (B, J, D)  Eq. 2
        v = squash(s, dim=-1)  # (B, J, D)  Eq. 1
        if iteration < routing_iterations - 1:
            b = b + (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)  agreement
    return v, c


# %% [markdown]
# ### 4. Why Procedure 1 looks like this
#
# **The logits $b_{ij}$ are log priors.** The paper calls the initial $b_{ij}$ "the log prior
# probabilities that capsule $i$ should be coupled to capsule $j$". A softmax turns
# log-probabilities into probabilities, so $c_{ij} = \operatorname{softmax}_j(b_{ij})$ is a
# distribution over the parents of child $i$. Starting from $b = 0$ is a uniform prior: before any
# evidence, every parent is equally likely. (The paper says the priors could be learned; like most
# implementations, this course keeps them at 0.)
#
# **Agreement is a dot product.** $\hat{\mathbf u}_{j|i}\cdot\mathbf v_j =
# \lVert\hat{\mathbf u}_{j|i}\rVert\,\lVert\mathbf v_j\rVert\cos\theta$ is large when the vote
# points where the parent's output points (the same pose), negative when it points away, and
# weighted by how long — how sure — both are. Adding it to a log prior multiplies the coupling by
# $e^{\text{agreement}}$ before the softmax renormalises: agreement acts like a log-likelihood. It
# costs one multiply-add per dimension, which matters with 1,152 × 10 pairs.
#
# **Every primary capsule has its own $\mathbf W_{ij}$.** A primary capsule is one capsule *type*
# at one grid *position*, and the position is coded by *which* capsule is active (place coding,
# lesson 02). With a matrix per position, a part can vote for a different pose of the digit
# depending on where it sits: a stroke at the top of a 7 and the same stroke at its bottom predict
# different 7s. Sharing $\mathbf W$ across positions, as a convolution shares its kernel, would
# make the votes blind to where the part is; capsule networks that do share it add the position
# back into the votes ("coordinate addition" in *Matrix capsules with EM routing*, 2018).

# %% [markdown]
# ## Check it
#
# Both versions against `capsedu.dynamic_routing`, on a small random problem (the loop is slow)
# with 1 and 3 iterations:

# %% tags=["nbval-check-output"]
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
# vectorised version does both, and is far faster (best of a few runs each; your timings will
# differ):

# %%
def best_time(fn, repeats: int = 3) -> float:
    """The shortest of ``repeats`` runs of ``fn()``, in seconds (the least disturbed by other work)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


v_loop, c_loop = routing_loop(u_hat[:1], 3)
v_vec, c_vec = routing_vectorised(u_hat, 3)
loop_seconds = best_time(lambda: routing_loop(u_hat[:1], 3))
vectorised_seconds = best_time(lambda: routing_vectorised(u_hat, 3), repeats=10)
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

# %% tags=["nbval-check-output"]
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
# The coupling coefficients are computed from $\hat{\mathbf u}$, through the agreements, so
# gradients could flow back through every iteration. `capsedu.dynamic_routing` by default
# (`detach_inner=True`) lets every iteration but the last see `u_hat.detach()`:
#
# - the forward pass is identical: the same $\mathbf v$ and the same $c$;
# - backpropagation treats the final $c_{ij}$ as constants and follows only
#   $\mathbf s_j = \sum_i c_{ij}\hat{\mathbf u}_{j|i}$ of the last iteration — a backward graph
#   one iteration long (less memory and time), in which routing acts as a fixed procedure;
# - the paper's own code lets gradients flow through all iterations (`detach_inner=False`); many
#   re-implementations detach.
#
# Compare the two on the strong random votes `small` from *Check it* (the gradient of the length
# of output capsule 0):

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

# %% tags=["nbval-check-output"]
one_iteration = []
for detach in (True, False):
    v_out, _ = dynamic_routing(votes, 1, detach_inner=detach)
    one_iteration.append(torch.autograd.grad(v_out.norm(dim=-1)[:, 0].sum(), votes)[0])
torch.testing.assert_close(one_iteration[0], one_iteration[1])
print("r = 1: detach_inner makes no difference to the gradient")

# %% [markdown]
# A cosine of 1 would mean the same direction: with three iterations the two gradients clearly
# differ. Whether that changes what a network learns, one gradient on random votes cannot tell.
# `benchmarks/detach_inner.py` trained the shipped network's recipe both ways, three seeds each
# (same data and the same initial weights for a seed), on the 55,000 training digits, shortened
# to 3 of its 15 epochs to fit the study into an hour on 2 CPU cores, and recorded the results;
# the last line is the same study from when the course trained on 4,000 digits:

# %% tags=["nbval-check-output"]
detach_study = study("detach_inner")  # benchmarks/detach_inner.py, on the 55,000 training digits
print(f"{detach_study['epochs']} epochs on {detach_study['train_data']['images']:,} training images, "
      f"{len(detach_study['runs']) // 2} seeds each, tested on {detach_study['test_data']['images']:,} images")
for setting, row in detach_study["summary"].items():
    print(f"detach_inner={setting:5s}: test accuracy {row['mean_accuracy']:.2%} (seeds from "
          f"{row['min_accuracy']:.2%} to {row['max_accuracy']:.2%}), {row['mean_train_seconds']:.0f} s of training")
by_seed = {}
for run in detach_study["runs"]:
    by_seed.setdefault(run["seed"], {})[run["detach_inner"]] = run["test_accuracy"]
gaps = [100 * (pair[False] - pair[True]) for pair in by_seed.values()]
error = 100 * capsedu.standard_error(detach_study["summary"]["True"]["mean_accuracy"],
                                     detach_study["test_data"]["images"])
images = [g * detach_study["test_data"]["images"] / 100 for g in gaps]
print(f"not detached minus detached, seed by seed: {', '.join(f'{g:+.2f}' for g in gaps)} points, that is "
      f"{', '.join(f'{n:+.0f}' for n in images)} test images "
      f"(one test run's standard error: {error:.2f} points, two: {2 * error:.2f})")
slower = detach_study["summary"]["False"]["mean_train_seconds"] / detach_study["summary"]["True"]["mean_train_seconds"]
print(f"training time, not detached / detached: {slower:.1f}x")
small_study = study("detach_inner_4000")  # the same study when the course trained on 4,000 digits
print(f"on 4,000 training images ({small_study['epochs']} epochs): " + ", ".join(
    f"detach_inner={setting} {row['mean_accuracy']:.2%} in {row['mean_train_seconds']:.0f} s"
    for setting, row in small_study["summary"].items()))

# %% [markdown]
# Without detaching, each of the three seeds again ended slightly *higher* — by the few test
# images printed above — and training took the printed factor longer. That factor measures two
# changes at once: when the study ran, `detach_inner=True` trained with the factored
# implementation of `DigitCaps` (`capsedu/nets/routing_fast.py`, its backward written by hand)
# and `detach_inner=False` with the readable one, which builds û and lets autograd differentiate
# all three iterations. Today both settings run the factored implementation (the default,
# `CapsNetConfig(routing="factored")`), so the study does not say how much of the factor the
# longer gradient alone costs. No accuracy gap reaches two standard errors of one test run, and
# the largest is about the size of the spread between the seeds of one setting: seed by seed, the
# two settings tie. Still, every seed leans the same way, in this study and in the 4,000-digit
# one: a hint worth a larger study (more seeds, the recipe's full 15 epochs), not a finding. The
# course keeps `detach_inner=True`, with no measurable loss at either scale and a training time
# that was shorter in this study (implementation included); with a GPU or more patience,
# `CapsNetConfig(detach_inner=False)` follows the paper.

# %% [markdown]
# ## Use capsedu
#
# ### A trained CapsNet
#
# Coupling coefficients of an untrained network tell you nothing, so we load a trained one:
# `capsedu.pretrained()` is the CPU configuration (`CapsNetConfig.cpu()`, a narrower network
# with the paper's routing and decoder: 8 primary capsule types instead of 32) trained for you
# on 55,000 MNIST training images. It loads in a second and checks its file's checksum first. Lesson 06
# shows how such a network is trained; lesson 07 explores it further.

# %%
model = capsedu.pretrained()  # eval mode, checksum verified
config = model.config
print(f"CPU configuration: {config.conv1_channels} conv1 channels, {config.primary_types} "
      f"primary capsule types -> I = {config.num_primary_caps} primary capsules")

# %%
test_data = capsedu.load_mnist("test")
tested = capsedu.choose(learner=test_data, fast=test_data.subset(200, seed=0))  # all 10,000
test_loader = DataLoader(tested, batch_size=500)
test_accuracy = capsedu.evaluate(model, test_loader)["accuracy"]
print(f"test accuracy of the trained model: {capsedu.with_error(test_accuracy, len(tested))} on {len(tested):,} "
      "test digits")

# %% [markdown]
# ### Coupling coefficients of a real digit
#
# We take one test digit, compute its votes $\hat{\mathbf u}$ **once**, and route them with any
# number of iterations. `model(x, return_couplings=True)` does the same in one call; the asserts
# show that the pieces agree with it.

# %%
image, label = test_data.images[0], int(test_data.labels[0])
with torch.no_grad():
    digit_u = model.encode(image[None])  # (1, I, D_in)
    digit_u_hat = model.class_caps.prediction_vectors(digit_u)  # (1, I, J, D_out)
    full = model(image[None], return_couplings=True)
    v3, c3 = dynamic_routing(digit_u_hat, 3)
torch.testing.assert_close(v3, full.capsules)
torch.testing.assert_close(c3, full.couplings)
print(f"votes u_hat {tuple(digit_u_hat.shape)}; true label {label}, "
      f"predicted {int(full.lengths.argmax())}")

# %% [markdown]
# ### Where the votes of a whole digit go
#
# Each $c_{ij}$ is about one pair. To see where a whole digit sends its votes, add them up per
# class, weighting capsule $i$ by its length $\lVert\mathbf u_i\rVert$ — in the paper's reading a
# short primary capsule says "my part is not here", so its vote should barely count. (Lesson 02
# found nearly every primary capsule of this network close to length 1, so here the weighting
# changes little; it is the share the paper's intuition asks for.)
#
# $$\text{share}_j = \frac{\sum_i \lVert\mathbf u_i\rVert\, c_{ij}}{\sum_i \lVert\mathbf u_i\rVert}$$
#
# The shares sum to 1, and are $1/J = 0.1$ when every coupling is uniform. By hand, checked
# against `capsedu.explore.probes.vote_shares` (which the explorer below uses):

# %%
def class_shares(c: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Length-weighted share of all votes per class: c (I, J), u (I, D_in) -> (J,)."""
    weight = u.norm(dim=-1)  # (I,)
    return (weight[:, None] * c).sum(dim=0) / weight.sum()  # (J,)


for r in (1, 3, 7):
    v, c = dynamic_routing(digit_u_hat, r)  # (1, J, D_out), (1, I, J)
    shares = class_shares(c[0], digit_u[0])  # (J,)
    torch.testing.assert_close(shares, vote_shares(c[0], digit_u[0]))
    others = torch.cat([shares[:label], shares[label + 1:]])
    print(f"r = {r}: class {label} gets {shares[label]:.1%} of the votes (the others "
          f"{others.min():.1%} to {others.max():.1%}); its capsule is {v[0, label].norm():.3f} long")

# %% [markdown]
# After one iteration every coupling is still uniform, so every class gets exactly 10.0 % of the
# votes: routing has done nothing yet, and capsule 7 is already 0.519 long from the votes alone.
# The paper's three iterations move less than one point of the vote toward class 7 (10.8 %), yet
# its capsule grows to 0.952; seven iterations give it 15.4 % and a length of 0.996. **The length
# grows much faster than the share** because routing also reweights the votes *within* class 7:
# votes that agree with $\mathbf v_7$ gain coupling, votes that point elsewhere lose it, so fewer
# of them cancel in $\mathbf s_7$. On this trained network most of the decision is already in the
# votes $\hat{\mathbf u}$; lesson 07 measures this over many digits.
#
# ### The routing explorer
#
# Move the slider (it needs a running kernel): the votes are computed once, only the routing
# reruns. The explorer shows, after r iterations,
#
# - top middle: $J\,c_{ij}$ toward the predicted class on the primary grid, the capsule types at
#   each position averaged with the same length weights, over the digit (1 is a fair share, white;
#   red more, blue less);
# - top right: the vote shares of every class;
# - bottom left: every capsule's length after 1, 2, …, r iterations;
# - bottom right: $J\,c_{ij}$ of each capsule type on its own 6×6 grid.
#
# The true class is red, a different prediction orange, other classes grey; the colour scale is
# fixed for the image, so that moving the slider shows change. Type another test index to route
# another digit.

# %% tags=["remove-output"]
explorer = routing_explorer(model, test_data, index=0)
explorer

# %% [markdown]
# The live explorer above needs a running kernel: each move reruns the routing in Python.
# `explorer.frames()` computes its picture for every r in advance, for this digit, and ties them to
# a slider in the browser, so the one below moves on the course website too (typing another
# index needs the live one). And the same digit with r = 1, 2, 3, 5 and 7 side by side:

# %%
explorer.frames()

# %%
routing_strip(model, image, label)

# %% [markdown]
# At r = 1 every coupling is a fair share (white). By r = 3, the network's own number, the map
# toward 7 still looks pale on this colour scale, which is the same for every r, though its
# strongest position, on the bottom row, already gets clearly more than a fair share; meanwhile
# capsule 7 has grown from 0.519 to 0.952 long. Only with more iterations do the couplings
# concentrate (at r = 7 the darkest cell goes past the top of the colour scale) on a few grid
# positions, most of them along the bottom row, others at the left edge and the top of the grid;
# not all of them lie on the stroke, because each primary capsule sees a 17 × 17-pixel window of
# the digit, not one grid cell. The share of class 7 keeps rising without a plateau, the other
# classes stay short (their grey lengths rise a little after r = 3, far below class 7's), and none
# of it changes the prediction.

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
        ax.bar(classes + offset, lengths, width, label=f"{name}: longest {lengths.max():.2g}")
    ax.set(xticks=classes.tolist(), xlabel="digit class j", ylabel=r"$\|\mathbf{v}_j\|$ (log scale)",
           yscale="log", ylim=(1e-6, 1.5),
           title=f"Test digit {label}, r = 3: the wrong axis empties every capsule")
    ax.legend()
    return fig


draw_axis_comparison();

# %% [markdown]
# ### Things to try
#
# - Type the index of a digit the model gets wrong into the explorer (compare
#   `model(test_data.images[:200]).lengths.argmax(1)` with the labels; lesson 07 looks at one
#   in detail): does routing help or hurt with more iterations?
# - Route the *untrained* network's votes (`routing_explorer(capsedu.CapsNet(config), test_data)`):
#   what do the maps show, and why?
# - The paper found 3 iterations a good trade-off. Does the length of the right class keep
#   growing after r = 3 in the strip above, or does it saturate?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: prediction vectors with `matmul`
#
# Write `prediction_vectors_matmul(W, u)` that returns the votes $\hat{\mathbf u}_{j|i} = \mathbf
# W_{ij}\mathbf u_i$ **without** `einsum`, using the `@` operator and broadcasting. `W` is
# (I, J, D_out, D_in), `u` is (B, I, D_in), the result (B, I, J, D_out). Hint: make `u` a column
# vector per (b, i) and give it a J axis of size 1.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def prediction_vectors_matmul(W: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    columns = u[:, :, None, :, None]  # (B, I, 1, D_in, 1)
    return (W @ columns).squeeze(-1)  # (I, J, D_out, D_in) @ (B, I, 1, D_in, 1) -> (B, I, J, D_out)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_predictions(prediction_vectors_matmul)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 2: watch the coupling coefficients evolve
#
# Write `routing_history(u_hat, routing_iterations)` that runs Procedure 1 once and returns a list
# of the coupling coefficients used in each iteration, `[c_1, ..., c_r]`, each (B, I, J). The
# first is the uniform $1/J$; entry $k$ must equal the `c` of `dynamic_routing(u_hat, k)`.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def routing_history(u_hat: torch.Tensor, routing_iterations: int) -> list[torch.Tensor]:
    ### BEGIN SOLUTION
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    history = []
    for _ in range(routing_iterations):
        c = torch.softmax(b, dim=2)  # (B, I, J)
        history.append(c)
        v = squash((c[..., None] * u_hat).sum(dim=1), dim=-1)  # (B, J, D)
        b = b + (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)
    return history
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_routing_history(routing_history)  # prints ✅ or a hint

# %% [markdown]
# With your history you can measure whether routing settles: the largest change of any coupling
# coefficient of our test digit from one iteration to the next, and the largest coupling of all.

# %%
couplings = routing_history(digit_u_hat, 7)
changes = [float((after - before).abs().max()) for before, after in pairwise(couplings)]
largest = [float(c.max()) for c in couplings]
fig, (ax_change, ax_max) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
ax_change.plot(range(2, 8), changes, "o-")
ax_change.set(xlabel="iteration k", ylabel=r"max $|c^{(k)} - c^{(k-1)}|$", ylim=(0, 1.1 * max(changes)),
              title=f"Largest change of a coupling (test digit {label})")
ax_max.plot(range(1, 8), largest, "o-", color="tab:red")
ax_max.axhline(0.1, color="black", ls=":", lw=1, label="uniform 1/J")
ax_max.set(xlabel="iteration k", ylabel=r"max $c^{(k)}_{ij}$", ylim=(0, 1.05),
           title="Largest coupling of any capsule")
ax_max.legend(loc="lower right")
for ax in (ax_change, ax_max):
    ax.grid(alpha=0.3)
print("largest change per iteration:", " ".join(f"{x:.2f}" for x in changes))
print("largest coupling per iteration:", " ".join(f"{x:.2f}" for x in largest))

# %% [markdown]
# Routing does not settle within the paper's three iterations on this digit. The largest change
# of any coupling grows until iteration 4 (0.37) and is still 0.14 at iteration 7, while the
# largest coupling climbs from the uniform 0.10 to 0.99 at iteration 5 and prints as 1.00 after
# that: with more iterations some capsules give almost their whole vote to one class, and other
# couplings keep moving. That is how Procedure 1 behaves: agreement is *added* to
# $b$ at every iteration, so the softmax keeps sharpening instead of reaching a fixed point — the
# number of iterations works like an inverse temperature. The paper's Appendix A reports the
# opposite on average over MNIST: the change in the routing logits shrinks and routing has
# converged after about 5 iterations, while more iterations overfit; one digit of this narrower
# network is not that average, so read this as a disagreement to check ("Things to try" above),
# not a refutation. The paper chose three iterations, and the network was trained with three, so
# iterations beyond that are outside what training saw.

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
# - The logits are log priors (uniform at 0), agreement is a dot product (pose alignment times
#   confidence), and each primary capsule has its own $\mathbf W_{ij}$ so that a part's place
#   shapes its vote.
# - `detach_inner=True` leaves the forward pass unchanged and lets gradients reach
#   $\hat{\mathbf u}$ only through the last iteration. Trained both ways on the 55,000 digits
#   (three seeds each, 3 epochs), the non-detached network ended higher for every seed, as it did
#   on 4,000 digits, but each time by less than two standard errors — a tie — at 1.6 times the
#   training time.
# - On the shipped network, three iterations move class 7's share of the votes from 10.0 % to
#   10.8 % and its capsule's length from 0.519 to 0.952; the couplings keep sharpening past three
#   iterations instead of converging (the largest prints as 1.00 from six on).
#
# ## What's next
#
# The capsule lengths you just saw are trained by the **margin loss** (Eq. 4): lesson 04 builds
# it, including the two bugs peers most often make.
