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
# # Lesson 03 — Dynamic routing by agreement
#
# Primary capsules (lesson 02) each hold an 8-D vector. In this lesson they vote for the 10 digit
# capsules: every primary capsule $i$ predicts each digit capsule $j$ through its own matrix,
# $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$. *Routing by agreement* (Procedure 1 of
# Sabour et al., 2017) then decides how much of each vote reaches each digit: votes that agree with
# the emerging output get a larger share. You write Procedure 1 twice — as a literal loop, then
# vectorised — and a check tells you which typical mistake, if any, your version makes. You see
# what detaching the inner iterations changes, then route a real digit through a trained network
# with a slider from 1 to 7 iterations. In the exercises you predict what a softmax over the
# wrong axis does, and measure whether routing settles.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - compute the prediction vectors $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$ and name
#   every axis of the (B, I, J, D_out) result;
# - write Procedure 1 as a loop over capsules and as a few tensor operations, and prove they agree;
# - recognise the routing mistakes that published implementations make;
# - explain why $c_{ij}$ is a softmax over the output capsules $j$, and predict what breaks otherwise;
# - say why the logits are log priors, why agreement is a dot product and why every primary
#   capsule has its own $\mathbf W_{ij}$;
# - explain what `detach_inner` changes (gradients, not outputs), and what it did to training;
# - read coupling maps and vote shares of a trained network, and measure how the routing logits
#   change from one iteration to the next.
#
# ## Prerequisites and time
#
# Lessons 01 (squash) and 02 (primary capsules); tensor broadcasting and `torch.einsum` at the
# level of "which letters are summed". **Time:** about 90 minutes. The routing pictures come from a small
# CapsNet trained for you and shipped with the course (`capsedu.pretrained()`, trained on 55,000
# MNIST training images that none of the test digits here belong to), so nothing here takes more than a few
# seconds to run.

# %%
import time

# %matplotlib inline
import matplotlib.pyplot as plt
import scipy.stats
import torch
from torch.utils.data import DataLoader

import capsedu
from capsedu import CapsNetConfig, DigitCaps, dynamic_routing, squash
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.routing import check_routing, routing_with_mistake
from capsedu.course.checks.routing_exercises import (
    check_logit_changes,
    check_predictions,
    check_wrong_axis_output,
    logit_changes_reference,
)
from capsedu.explore.figures import routing_strip
from capsedu.explore.palette import COURSE_STYLE, HATCHES, VERMILLION
from capsedu.explore.probes import vote_shares
from capsedu.explore.widgets import routing_explorer
from capsedu.zoo.shipped import study

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
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
# Write `my_routing_loop(u_hat, routing_iterations)` exactly like that, one image and one capsule
# at a time: Python `for` loops over the images, the iterations, and the capsules $i$ and $j$,
# with `torch.softmax` on one row of logits and `squash` (from lesson 01) on one vector at a time.
# Each image is routed on its own votes. Return `(v, c)`: the output capsules (B, J, D) and the
# coupling coefficients (B, I, J) of the last iteration. Step 4 may be skipped after the last
# iteration: it only changes logits that nobody reads.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_routing_loop(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1, one image and one capsule at a time. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    batch, num_in, num_out, dim = u_hat.shape
    v = torch.zeros(batch, num_out, dim)  # (B, J, D)
    c = torch.zeros(batch, num_in, num_out)  # (B, I, J)
    ### BEGIN SOLUTION
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
    ### END SOLUTION
    return v, c


# %% tags=["nbval-check-output"]
_ = check_routing(my_routing_loop)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
routing_loop = yours_or_reference(check_routing, my_routing_loop, dynamic_routing, name="my_routing_loop")

# %% [markdown]
# ### 3. Vectorised
#
# The loops over the images and the capsules become broadcasting; only the loop over the $r$
# iterations stays. Write `my_routing_vectorised(u_hat, routing_iterations)`, with the same
# inputs and outputs as the loop, from whole-tensor operations. Follow the shapes:
#
# | quantity | shape | axis it comes from |
# |---|---|---|
# | logits `b`, couplings `c` | (B, I, J) | one logit per image and pair $(i, j)$ |
# | votes scaled by their couplings | (B, I, J, D) | `c` with a trailing axis of size 1 |
# | `s`, `v` | (B, J, D) | summed over I; squash on each D-vector |
# | agreement | (B, I, J) | one dot product over D per image and pair $(i, j)$ |
#
# Broadcasting and a `.sum` over the right axis write each line; `torch.einsum` writes the same
# sums (the letters that disappear are summed) without building the (B, I, J, D) product first,
# which makes each of lesson 06's training steps about a fifth shorter
# (`benchmarks/my_capsnet_speed.py`).

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_routing_vectorised(u_hat: torch.Tensor, routing_iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1 with tensor operations. u_hat (B, I, J, D) -> v (B, J, D), c (B, I, J)."""
    ### BEGIN SOLUTION
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    for iteration in range(routing_iterations):
        c = torch.softmax(b, dim=2)  # (B, I, J)  Eq. 3
        s = torch.einsum("bij,bijd->bjd", c, u_hat)  # (B, J, D)  Eq. 2: summed over i
        v = squash(s, dim=-1)  # (B, J, D)  Eq. 1
        if iteration < routing_iterations - 1:
            b = b + torch.einsum("bijd,bjd->bij", u_hat, v)  # (B, I, J)  agreement: summed over d
    return v, c
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_routing(my_routing_vectorised)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
routing_vectorised = yours_or_reference(check_routing, my_routing_vectorised, dynamic_routing,
                                        name="my_routing_vectorised")

# %% [markdown]
# **The same mistakes, in the wild.** The check knows the slips that published CapsNets make,
# because a routing bug rarely crashes: the shapes stay right and a network still trains.
#
# - The labml annotated implementation, one of this course's sources, builds its router with
#   `nn.Softmax(dim=1)` on logits of shape (batch, inputs, outputs): the softmax over the
#   **inputs**. Exercise 2 asks what that does.
# - pyCapsNet, the NumPy CapsNet whose README is another source, keeps one set of logits of
#   shape (1, I, J, 1) for the whole batch and moves it by the **batch mean** of the agreements,
#   so every image of a batch gets the same couplings. Its `F.softmax(b)` names no axis, and for
#   a 4-D tensor PyTorch's legacy default is dim 1: the inputs again.
# - The MultiMNIST blog post, a third source, writes the three iterations out by hand and adds
#   each round's agreement to the *initial* scores: the logits are **replaced**, not accumulated,
#   so the third iteration forgets the second.
#
# The course's own `capsedu.dynamic_routing` is the vectorised version you just wrote.

# %% [markdown]
# ### 4. Why Procedure 1 looks like this
#
# **The logits $b_{ij}$ are log priors.** The paper calls the initial $b_{ij}$ "the log prior
# probabilities that capsule $i$ should be coupled to capsule $j$". A softmax turns
# log-probabilities into probabilities, so $c_{ij} = \operatorname{softmax}_j(b_{ij})$ is a
# distribution over the parents of child $i$. Starting from $b = 0$ is a uniform prior: before any
# evidence, every parent is equally likely. The paper's own experiments start every $b_{ij}$ at 0
# (its section 4), although it notes the priors could be learned with the other weights; this
# course does the same.
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
stand_in = " (capsedu's vectorised routing stands in for your loop)" if routing_loop is dynamic_routing else ""
print(f"loop: {loop_seconds:.2f} s for 1 image{stand_in}; vectorised: {1000 * vectorised_seconds:.1f} ms "
      f"for {len(u_hat)} images")

# %% [markdown]
# ### The softmax runs over the output capsules J
#
# $c_{ij}$ is how much of capsule $i$'s vote goes to parent $j$: each input capsule has one unit
# of "vote" to share among the J parents, so $\sum_j c_{ij} = 1$ for every $i$, and a vote that
# goes to one parent is taken from the others. That competition between the parents of one child
# is the point of routing. What the softmax over the other axis does to the outputs is
# Exercise 2.
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
# `benchmarks/detach_inner.py` trained the shipped network's recipe both ways on the 55,000
# training digits, three seeds each. Both settings of one seed start from the same initial
# weights and see the same data, so they differ only in `detach_inner`. To keep the study cheap, each run was
# shortened to a few of the recipe's epochs (the first line below says how many):

# %% tags=["nbval-check-output"]
detach_study = study("detach_inner")  # benchmarks/detach_inner.py, on the 55,000 training digits
test_images = detach_study["test_data"]["images"]
print(f"{detach_study['epochs']} of the recipe's {detach_study['recipe']['epochs']} epochs on "
      f"{detach_study['train_data']['images']:,} training images, {len(detach_study['runs']) // 2} seeds each, "
      f"tested on the same {test_images:,} test images")
for setting, row in detach_study["summary"].items():
    print(f"detach_inner={setting:5s}: test accuracy {row['mean_accuracy']:.2%} (seeds from "
          f"{row['min_accuracy']:.2%} to {row['max_accuracy']:.2%}), {row['mean_train_seconds']:.0f} s of training")
by_seed = {}
for run in detach_study["runs"]:
    by_seed.setdefault(run["seed"], {})[run["detach_inner"]] = run["test_accuracy"]
gaps = torch.tensor([100 * (pair[False] - pair[True]) for pair in by_seed.values()])  # (seeds,) points
print(f"not detached minus detached, seed by seed: {', '.join(f'{g:+.2f}' for g in gaps)} points, that is "
      f"{', '.join(f'{g * test_images / 100:+.0f}' for g in gaps)} test images")
seed_error = float(gaps.std() / len(gaps) ** 0.5)  # the spread of the gap over seeds
t_value, freedom = float(gaps.mean()) / seed_error, len(gaps) - 1
p_value = 2 * scipy.stats.t.sf(abs(t_value), freedom)  # two-sided t-test on the seeds' gaps
same_sign = 2 * 0.5 ** len(gaps)  # chance that every seed leans one way (either way) if neither setting is better
significance = 0.05  # the usual level below which a gap is called real
print(f"mean gap {gaps.mean():+.2f} ± {seed_error:.2f} points (standard error from the spread of the "
      f"{len(gaps)} seeds): t = {t_value:.2f} with {freedom} degrees of freedom, p = {p_value:.2f} "
      f"(a real gap needs p < {significance})")
print(f"all {len(gaps)} gaps of one sign: chance {same_sign:.2f} if the two settings were equally good "
      f"(with {len(gaps)} seeds it cannot be smaller)")
slower = detach_study["summary"]["False"]["mean_train_seconds"] / detach_study["summary"]["True"]["mean_train_seconds"]
print(f"training time, not detached / detached: {slower:.1f}x")

# %% [markdown]
# Without detaching, each of the three seeds ended slightly *higher*, by the few test images
# printed above. The study kept each run's accuracy but not which test images it got right, so
# no seed's gap can be tested image by image (a paired test). The spread of the gaps over the
# seeds is the test that remains, and it covers what a new seed would change. Three seeds give a
# rough standard error, so the t-test's p (2 degrees of freedom) is the verdict, not the count of
# standard errors, and the printed p exceeds 0.05. Even all three seeds leaning one way happens by
# chance with the printed probability. A tie, then, and a hint worth a larger study (more seeds,
# all of the recipe's epochs), not a finding. All the runs answered the same test images, so this spread says
# nothing about how the gap would move on other test images.
#
# The time factor measures two changes at once. When the study ran, `detach_inner=True` trained
# with the factored implementation of `DigitCaps` (`capsedu/nets/routing_fast.py`, its backward
# written by hand). `detach_inner=False` trained with the readable one, which builds û and lets
# autograd differentiate all three iterations. Today both settings run the factored
# implementation (the default, `CapsNetConfig(routing="factored")`), so the study does not say how
# much of the factor the longer gradient alone costs. The course keeps `detach_inner=True`, which
# cost no measurable accuracy here; `CapsNetConfig(detach_inner=False)` follows the paper.

# %% [markdown]
# ## Use capsedu
#
# ### A trained CapsNet
#
# Coupling coefficients of an untrained network tell you nothing, so we load a trained one:
# `capsedu.pretrained()` is the CPU configuration (`CapsNetConfig.cpu()`, a narrower network
# with the paper's routing and decoder: 8 primary capsule types instead of 32) trained for you
# on 55,000 MNIST training images. It loads in a second and checks its file's checksum first. Lesson 06
# shows how such a network is trained, [the training record](training_record.md) how this one was,
# and lesson 07 explores it further.

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
# We take one test digit - the first 7 of the test split, chosen by its class so that every
# learner gets a 7 - compute its votes $\hat{\mathbf u}$ **once**, and route them with any
# number of iterations. `model(x, return_couplings=True)` does the same in one call; the asserts
# show that the pieces agree with it.

# %% tags=["example-digits"]
index = test_data.first_index(7)
image, label = test_data.images[index], int(test_data.labels[index])
print(test_data.describe_examples([index]))
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
# The numbers in this section are those of the official test split's first 7 (test image 0);
# with the offline data your 7 is another one, so its numbers differ, though not the story.
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
# The true class is vermillion (thick solid lines, bars hatched //), a different prediction blue
# (thick dashed lines, dotted bars), other classes thin and grey; the colour scale is fixed for
# the image, so that moving the slider shows change. Type another test index to route another
# digit.

# %% tags=["remove-output"]
explorer = routing_explorer(model, test_data, index=index)
explorer

# %% [markdown]
# The live explorer above needs a running kernel: each move reruns the routing in Python.
# For a static page, `explorer.frames()` computes this digit's picture for every r in advance and
# ties the pictures to a slider in the browser. So the one below moves on the course website too;
# typing another index needs the live one. And the same digit with r = 1, 2, 3, 5 and 7 side by
# side:

# %%
explorer.frames(colours=256)  # the most a PNG palette holds: finer steps in the colour bar

# %% mystnb={"image": {"alt": "A test 7 routed with up to 7 iterations. Top: J times c_ij toward class 7 on the 6 by 6 primary grid over the digit (white: fair share, red: more): uniform at first, pale at r = 3, by r = 7 concentrated on a few cells, mostly along the bottom row. Bottom: class 7's vote share climbs from 10.0% to 15.4%, its length from 0.519 (0.952 at r = 3) to near 1; other classes stay short."}}
routing_strip(model, image, label)

# %% [markdown]
# At r = 1 every coupling is a fair share (white). By r = 3, the network's own number, the map
# toward 7 still looks pale, because the colour scale is the same for every r. Its strongest
# position, on the bottom row, already gets clearly more than a fair share, and capsule 7 has
# grown from 0.519 to 0.952 long. Only with more iterations do the couplings concentrate on a few
# grid positions; at r = 7 the darkest cell goes past the top of the colour scale. Most of these
# positions lie along the bottom row, others at the left edge and the top of the grid. Not all of
# them lie on the stroke, because each primary capsule sees a 17 × 17-pixel window of the digit,
# not one grid cell. The share of class 7 keeps rising without a plateau. The other classes stay
# short (their grey lengths rise a little after r = 3, far below class 7's), and none of it
# changes the prediction.

# %% [markdown]
# ## Explore
#
# ### Things to try
#
# - Type the index of a digit the model gets wrong into the explorer (compare
#   `model(test_data.images[:200]).lengths.argmax(1)` with the labels; lesson 07 looks at one
#   in detail): does routing help or hurt with more iterations?
# - Route the *untrained* network's votes (`routing_explorer(capsedu.CapsNet(config), test_data)`):
#   what do the maps show, and why?
# - The paper found 3 iterations a good trade-off. Does the length of the right class keep
#   growing after r = 3 in the strip above, or does it saturate?
# - `routing_with_mistake(u_hat, r, mistake)` (from `capsedu.course.checks.routing`) routes with
#   one of the mistakes of *Build it*. Route a few test digits with each: which mistakes change
#   the predicted class, and which only the lengths?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: prediction vectors with `matmul`
#
# Write `prediction_vectors_matmul(W, u)` that returns the votes $\hat{\mathbf u}_{j|i} = \mathbf
# W_{ij}\mathbf u_i$ **without** `einsum`, using the `@` operator and broadcasting. `W` is
# (I, J, D_out, D_in), `u` is (B, I, D_in), the result (B, I, J, D_out). Hint: think about which
# axes `@` multiplies and which it broadcasts over.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def prediction_vectors_matmul(W: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    columns = u[:, :, None, :, None]  # (B, I, 1, D_in, 1)
    return (W @ columns).squeeze(-1)  # (I, J, D_out, D_in) @ (B, I, 1, D_in, 1) -> (B, I, J, D_out)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_predictions(prediction_vectors_matmul)  # prints ✅ or a hint

# %% [markdown]
# ### Exercise 2: the wrong axis, predicted
#
# Suppose Procedure 1 takes its softmax over the **input** capsules (dim=1), as two of the
# sources above do. Reason out what comes out, before you run anything.
#
# Write `wrong_axis_output(u_hat)`: the output capsules $\mathbf v$, (B, J, D), that this routing
# gives after its **first** iteration, for votes `u_hat` of shape (B, I, J, D). Compute them
# directly from `u_hat` in a line or two, with no routing loop and no softmax call: first work out
# what every $c_{ij}$ is when $b = 0$.
#
# Then, before running the cell after the check, write down three guesses for the shipped
# network of *Use capsedu* and its test digit. How many times shorter is $\mathbf s_j$ than with
# the right axis? Do the two further iterations of $r = 3$ change the outputs? Does the predicted
# class (the longest capsule) change?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def wrong_axis_output(u_hat: torch.Tensor) -> torch.Tensor:
    """v after the first iteration with the softmax over the inputs: (B, I, J, D) -> (B, J, D)."""
    ### BEGIN SOLUTION
    return squash(u_hat.mean(dim=1), dim=-1)  # every c_ij = 1/I: s_j is the mean vote, (B, J, D)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_wrong_axis_output(wrong_axis_output)  # prints ✅ or a hint

# %% [markdown]
# Now measure. `routing_with_mistake` (from the check module) is Procedure 1 with the softmax over
# the inputs; $\mathbf s_j$ is recomputed from the couplings each routing returns:

# %% tags=["nbval-check-output"]
num_in, num_out = digit_u_hat.shape[1], digit_u_hat.shape[2]  # I, J of the shipped network
print(f"shipped network: I = {num_in} inputs, J = {num_out} outputs, I/J = {num_in / num_out:.1f}")
lengths = {}
for axis in ("right", "wrong"):
    for r in (1, 3):
        if axis == "right":
            v, c = dynamic_routing(digit_u_hat, r)  # (1, J, D_out), (1, I, J)
        else:
            v, c = routing_with_mistake(digit_u_hat, r, "softmax over inputs")
        s = (c[..., None] * digit_u_hat).sum(dim=1)  # (1, J, D_out): Eq. 2 with these couplings
        lengths[axis, r] = s[0].norm(dim=-1), v[0].norm(dim=-1)  # (J,), (J,)
        print(f"{axis} axis, r = {r}: longest s_j {lengths[axis, r][0].max():.3g}, longest v_j "
              f"{lengths[axis, r][1].max():.3g} (class {int(lengths[axis, r][1].argmax())})")
ratio = lengths["right", 1][0] / lengths["wrong", 1][0]  # (J,)
print(f"r = 1: ||s_j|| with the right axis / with the wrong one: {ratio.min():.1f} to {ratio.max():.1f} "
      f"over the {num_out} classes")
no_routing = squash(digit_u_hat.mean(dim=1))[0].norm(dim=-1)  # (J,): the mean vote, squashed
print(f"squash of the mean vote, no routing at all: longest {no_routing.max():.3g}")
if result:
    print(f"your wrong_axis_output: longest {wrong_axis_output(digit_u_hat)[0].norm(dim=-1).max():.3g}")
else:
    print("→ your wrong_axis_output joins this cell once it passes its check")

with torch.no_grad():
    many_u_hat = model.class_caps.prediction_vectors(model.encode(test_data.images[:200]))  # (N, I, J, D_out)
right_class = dynamic_routing(many_u_hat, 3)[0].norm(dim=-1).argmax(dim=1)  # (N,)
wrong_class = routing_with_mistake(many_u_hat, 3, "softmax over inputs")[0].norm(dim=-1).argmax(dim=1)
print(f"first {len(many_u_hat)} test digits, r = 3: the wrong axis predicts the right axis's class "
      f"for {int((wrong_class == right_class).sum())} of them")
many_labels = test_data.labels[:len(many_u_hat)]  # (N,)
print(capsedu.compare_paired("softmax over J", right_class == many_labels,
                             "softmax over I", wrong_class == many_labels))  # same digits: paired

# %% mystnb={"image": {"alt": "Bar chart, on a log scale, of the ten digit-capsule lengths for test digit 7 after 3 routing iterations, with the softmax over the output capsules (right) and over the input capsules (wrong). With the right axis class 7 reaches 0.95 and the other classes stay far below 0.1; with the wrong axis every bar is orders of magnitude shorter, class 7's only 0.0013, yet class 7 is still the longest."}}
def draw_axis_comparison() -> plt.Figure:
    """Capsule lengths for this digit with the softmax over J (right) and over I (wrong), r = 3."""
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    width, classes = 0.4, torch.arange(config.num_classes)
    for offset, axis, name, hatch in ((-width / 2, "right", "softmax over J (dim=2, right)", HATCHES[0]),
                                      (width / 2, "wrong", "softmax over I (dim=1, wrong)", HATCHES[1])):
        v_lengths = lengths[axis, 3][1]  # (J,)
        ax.bar(classes + offset, v_lengths, width, hatch=hatch, label=f"{name}: longest {v_lengths.max():.2g}")
    ax.set(xticks=classes.tolist(), xlabel="digit class j", ylabel=r"$\|\mathbf{v}_j\|$ (log scale)",
           yscale="log", ylim=(1e-6, 1.5), title=f"Test digit {label}, r = 3")
    fig.legend(loc="outside lower center", ncols=2)
    return fig


draw_axis_comparison();

# %% [markdown]
# With the softmax over the inputs, $b = 0$ gives every $c_{ij} = 1/I$ instead of $1/J$. So
# $\mathbf s_j$ is the **mean** of the $I$ votes where it should be their sum divided by $J$. It
# is shorter by the factor $I/J$ exactly, 28.8 here, for every class alike: the longest
# $\mathbf s_j$ drops from 1.04 to 0.0361. The votes do not disagree any more than before; they
# are only normalised over the wrong axis. Squash then turns a short vector into one about
# $\lVert\mathbf s\rVert^2$ long, so the digit capsule that was 0.519 long after one right
# iteration is 0.0013 long.
#
# The iterations do nothing: at $r = 3$ the wrong axis gives 0.00131, the squashed mean vote with
# no routing at all 0.0013. Each update adds $\hat{\mathbf u}_{j|i}\cdot\mathbf v_j$ to $b$, and
# with $\mathbf v$ about a thousandth long the logits barely move. Yet the predicted class
# survives: at $r = 1$ every $\mathbf s_j$ is the right one scaled by the same $J/I$, so the
# longest capsule stays the longest. Over the 200 test digits the two axes agree on every
# prediction (the printed count). Both routings answered the same digits, so their accuracies are
# compared image by image (`capsedu.compare_paired`): no digit is right under one axis only. A
# network with this bug still classifies; what it has lost is routing, and every capsule sits far
# below the margin loss's $m^+ = 0.9$ (lesson 04).

# %% [markdown]
# ### Exercise 3: does routing settle?
#
# The paper's Appendix A (Figure A.1) plots, for a network training on MNIST, the average change
# of each routing logit $b_{ij}$ by each routing iteration. It reports that this change decreases
# almost linearly on a log scale with more iterations: routing settles. Measure the same quantity
# on the shipped network, after training, on test digits.
#
# Write `logit_changes(u_hat, routing_iterations)`: run Procedure 1 for $r$ iterations on votes
# `u_hat` (B, I, J, D) and return a tensor of $r - 1$ numbers, one per update of $b$: the mean,
# over the images and all pairs $(i, j)$, of $|\Delta b_{ij}|$, the change that update makes.
#
# Before you run the cell after the check, predict from step 4 of Procedure 1: as the outputs
# $\mathbf v_j$ settle, does the mean $|\Delta b|$ fall toward 0? What else could it do?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def logit_changes(u_hat: torch.Tensor, routing_iterations: int) -> torch.Tensor:
    """Mean |Δb| of each of the r - 1 updates of b: u_hat (B, I, J, D) -> (r - 1,)."""
    ### BEGIN SOLUTION
    b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
    changes = []
    for _ in range(routing_iterations - 1):
        c = torch.softmax(b, dim=2)  # (B, I, J)
        v = squash((c[..., None] * u_hat).sum(dim=1), dim=-1)  # (B, J, D)
        delta = (u_hat * v[:, None]).sum(dim=-1)  # (B, I, J)
        changes.append(delta.abs().mean())
        b = b + delta
    return torch.stack(changes)  # (r - 1,)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_logit_changes(logit_changes)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
measure_logit_changes = yours_or_reference(check_logit_changes, logit_changes, logit_changes_reference,
                                           name="logit_changes")

# %% [markdown]
# On the 200 test digits of Exercise 2, with up to 7 iterations, next to the mean length of each
# digit's longest capsule:

# %% mystnb={"image": {"alt": "Two line plots over 200 test digits. Left, log scale: the mean absolute change of the routing logits grows at every update, from 0.0078 after iteration 1 to 0.0199 after iteration 6, while the dashed change of that update from the one before falls from 0.0048 to about 0.0016 and then stops falling. Right: the mean length of the winning capsule rises from 0.462 after one iteration to 0.942 after three and 0.993 after seven."}}
most_iterations = 7
with torch.no_grad():
    changes = measure_logit_changes(many_u_hat, most_iterations)  # (r - 1,)
    outputs = [dynamic_routing(many_u_hat, k)[0] for k in range(1, most_iterations + 1)]  # each (N, J, D_out)
    updates = [(many_u_hat * v[:, None]).sum(dim=-1) for v in outputs[:-1]]  # Δb after iteration k: (N, I, J)
drift = [float((later - earlier).abs().mean()) for earlier, later in zip(updates, updates[1:])]  # r - 2
longest = [float(v.norm(dim=-1).max(dim=1).values.mean()) for v in outputs]  # r
print("mean |Δb| of the update after iteration k = 1 ..", most_iterations - 1, ":",
      " ".join(f"{float(x):.4f}" for x in changes))
print("mean change of that update from one update to the next:     ",
      " ".join(f"{x:.4f}" for x in drift))
print(f"mean length of the longest capsule after k = 1 .. {most_iterations} iterations:",
      " ".join(f"{x:.3f}" for x in longest))
fig, (ax_change, ax_length) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
ax_change.plot(range(1, most_iterations), changes, "o-", label=r"mean $|\Delta b_{ij}|$")
ax_change.plot(range(2, most_iterations), drift, "s--", label="mean change of $\\Delta b_{ij}$\nfrom the update before")
ax_change.set(xlabel="update after iteration k", ylabel="mean absolute change (log scale)", yscale="log",
              title=f"{len(many_u_hat)} test digits")
ax_change.legend(fontsize="small")
ax_length.plot(range(1, most_iterations + 1), longest, "o-", color=VERMILLION)
ax_length.set(xlabel="iterations k", ylabel=r"mean longest $\|\mathbf{v}_j\|$", ylim=(0, 1.05),
              title="The winning capsule")
for ax in (ax_change, ax_length):
    ax.grid(alpha=0.3)

# %% [markdown]
# The mean $|\Delta b|$ does not fall: it grows at every update, from 0.0078 to 0.0199. Step 4
# says why. Each update adds $\hat{\mathbf u}_{j|i}\cdot\mathbf v_j$, the agreement with the
# *current* output, and nothing subtracts it again. As the couplings concentrate, the winning
# capsule lengthens (from 0.462 to 0.993 on average) and lines up with the votes it keeps, so the
# agreements with it grow. Even where its length has almost stopped changing (0.980 after four
# iterations, 0.991 after six) the change of $b$ still grows. If the outputs settled on some
# $\mathbf v^*$, each update would settle on $\hat{\mathbf u}_{j|i}\cdot\mathbf v^*_j$, not on 0.
# The logits grow without end and the softmax keeps sharpening, so the number of iterations works
# like an inverse temperature.
#
# What settled outputs would send to 0 is the change *of the update*,
# $\hat{\mathbf u}_{j|i}\cdot(\mathbf v^{(k+1)}_j - \mathbf v^{(k)}_j)$, the second printed row
# (dashed). It falls over the first updates and then stops falling, because the outputs have not
# stopped changing: in the strip above, the other classes' grey lengths keep rising. The paper's
# curve was measured during training, and its caption is all it says about what it averages; here
# one trained network routes 200 test digits. The network was trained with three iterations, so
# iterations beyond that are outside what training saw.

# %% [markdown]
# ## Summary
#
# - Every primary capsule votes for every digit capsule: $\hat{\mathbf u}_{j|i} = \mathbf
#   W_{ij}\mathbf u_i$, shape (B, I, J, D_out), through 1.5 million weights at the paper's size.
# - Procedure 1: $c = \operatorname{softmax}_j(b)$, $\mathbf s_j = \sum_i c_{ij}\hat{\mathbf
#   u}_{j|i}$, $\mathbf v_j = \operatorname{squash}(\mathbf s_j)$, $b_{ij} \mathrel{+}=
#   \hat{\mathbf u}_{j|i}\cdot\mathbf v_j$. You wrote it as loops and vectorised;
#   `capsedu.dynamic_routing` is the vectorised one.
# - Routing bugs rarely crash. The course's sources show three: the softmax over the inputs
#   (labml, pyCapsNet), one set of logits averaged over the batch (pyCapsNet), logits replaced
#   instead of accumulated (the MultiMNIST blog post).
# - The softmax runs over the output capsules: each input shares one unit of vote among the
#   parents. Over the inputs every $c_{ij}$ starts at $1/I$, so $\mathbf s_j$ is $I/J$ times too
#   short (28.8 on the shipped network), the iterations do nothing, and only the predicted class
#   survives.
# - The logits are log priors (uniform at 0), agreement is a dot product (pose alignment times
#   confidence), and each primary capsule has its own $\mathbf W_{ij}$ so that a part's place
#   shapes its vote.
# - `detach_inner=True` leaves the forward pass unchanged and lets gradients reach
#   $\hat{\mathbf u}$ only through the last iteration. Trained both ways, three seeds each, the
#   non-detached network ended higher for every seed, yet over the seeds the gap is a tie (a
#   t-test on the three gaps); its longer training also measured a slower implementation.
# - On the shipped network, three iterations move class 7's share of the votes from 10.0 % to
#   10.8 % and its capsule's length from 0.519 to 0.952. Over 200 test digits the mean change of
#   the logits per update grows instead of falling (from 0.0078 to 0.0199 over six updates):
#   every update adds the agreement with the current output, so the softmax keeps sharpening.
#
# ## Self-check
#
# Four questions on this lesson; click an option to see whether it is right, and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("03")

# %% [markdown]
# ## What's next
#
# The capsule lengths you just saw are trained by the **margin loss** (Eq. 4): lesson 04 builds
# it, including the two bugs peers most often make.
