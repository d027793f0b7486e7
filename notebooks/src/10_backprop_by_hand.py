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
# # Lesson 10 — Backpropagation by hand: the capsule layer in NumPy
#
# So far autograd computed every gradient for you. In this lesson you compute them yourself. The
# pieces of a capsule layer are the margin loss, the capsule lengths, the prediction vectors,
# squash, the softmax and the whole of Procedure 1. For each you derive the backward pass on
# paper, write it in NumPy, and **prove** it correct, against finite differences and autograd. Then
# you train a capsule classifier in which not one gradient comes from a framework.
#
# One of the implementations this course grew from (haofengac/pyCapsNet) did exactly this "to get
# a deeper understanding of the structure and the gradient flow" of CapsNet, and warned that
# routing's backward pass must accumulate gradients from every iteration. Its README says it
# unit-tested each module, basic and composite; yet its routing departs from the paper's in two
# ways: a softmax over the wrong axis and routing logits averaged over the batch. What kind of
# test catches which mistake is part of this lesson (Exercise 1). A gradient that is slightly
# wrong still trains, just worse: the only way to know is to check the gradient itself.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - draw Procedure 1 unrolled as a computation graph and say why the gradient of the votes
#   $\hat{\mathbf u}$ is a sum of $2r - 1$ contributions;
# - write a backward pass as "take the gradient of the output and a cache, return the gradients of
#   the inputs", and derive the ones of the margin loss, capsule lengths, $\mathbf W\mathbf u$,
#   the softmax and squash (its Jacobian);
# - write the backward passes of squash and of Procedure 1 through every iteration yourself;
# - check any gradient with central differences and read the relative error it reports;
# - test a routing implementation from the outside for properties Procedure 1 must have;
# - train a capsule classifier entirely in NumPy, comparing its gradients with torch's as it goes;
# - say in numbers what `detach_inner` does to the gradient.
#
# ## Prerequisites and time
#
# Lessons 01 (squash), 03 (dynamic routing) and 04 (margin loss); the chain rule for vectors
# (a Jacobian times a vector) and NumPy broadcasting. **Time:** about 75 minutes. Every computation here
# takes seconds, training the NumPy classifier included.

# %%
import inspect
import timeit

# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import torch

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.backprop import (
    ROUTINGS,
    check_batch_test,
    check_coupling_test,
    check_routing_backward,
    check_squash_backward,
    departed_routing,
    torch_gradients,
)
from capsedu.explore.graph import routing_graph
from capsedu.explore.palette import BLUISH_GREEN, COURSE_STYLE
from capsedu.nets import numpy_caps as nc
from capsedu.nets import numpy_classifier as ncl

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
capsedu.set_seed(0)  # seeds Python, NumPy and PyTorch
rng = np.random.default_rng(0)  # this lesson's NumPy draws

# %% [markdown]
# ## Build it
#
# ### 1. The pattern: a forward that keeps a cache, a backward that reads it
#
# Every piece is a pair of functions. The forward returns its output **and a cache** — whatever
# its backward will need. The backward receives $\partial L/\partial(\text{output})$, the
# gradient of the final loss with respect to this piece's output (we write it `d<name>`, for
# example `dv`), and returns the gradients with respect to the piece's inputs. Chained from the
# loss backwards, these are backpropagation. `capsedu.nets.numpy_caps` follows the same
# convention with the names of the torch API (`squash`, `dynamic_routing`, `margin_loss`, ...).
#
# Start at the end of the network. The **margin loss** (Eq. 4) of lesson 04, for capsule
# lengths $\ell_k$ (B, J) and targets $T_k \in \{0, 1\}$, averaged over the batch:
#
# $$L = \frac1B\sum_b\sum_k T_k \max(0, m^+ - \ell_k)^2 + \lambda\,(1 - T_k)\max(0, \ell_k - m^-)^2$$
#
# Each term depends on one $\ell_k$, so the gradient has the lengths' shape:
# $\partial L/\partial\ell_k = \frac1B\big(-2T_k\max(0, m^+ - \ell_k) + 2\lambda(1-T_k)\max(0, \ell_k - m^-)\big)$.

# %%
def my_margin_loss(lengths: np.ndarray, targets: np.ndarray, m_pos=0.9, m_neg=0.1, lam=0.5):
    """Eq. 4, batch mean: lengths (B, J), targets (B,) class indices -> (loss, cache)."""
    present = np.eye(lengths.shape[1])[targets]  # (B, J) one-hot T
    short = np.maximum(0.0, m_pos - lengths)  # (B, J)
    long = np.maximum(0.0, lengths - m_neg)  # (B, J)
    loss = (present * short ** 2 + lam * (1 - present) * long ** 2).sum(axis=1).mean()
    return loss, (present, short, long, lam)


def my_margin_loss_backward(cache) -> np.ndarray:
    """dL/dlengths (B, J)."""
    present, short, long, lam = cache
    return (-2 * present * short + 2 * lam * (1 - present) * long) / len(present)


# %% [markdown]
# The **capsule lengths** $\ell = \sqrt{\lVert\mathbf v\rVert^2 + \varepsilon}$ (the $\varepsilon$
# keeps the gradient finite at $\mathbf v = 0$): $\partial\ell/\partial\mathbf v = \mathbf v/\ell$,
# so the backward scales each capsule by its upstream gradient.

# %%
def my_lengths(v: np.ndarray, eps: float = 1e-8):
    """(B, J, D) -> lengths (B, J), cache."""
    lengths = np.sqrt((v * v).sum(axis=-1) + eps)  # (B, J)
    return lengths, (v, lengths)


def my_lengths_backward(dlengths: np.ndarray, cache) -> np.ndarray:
    """dL/dv (B, J, D) from dL/dlengths (B, J)."""
    v, lengths = cache
    return (dlengths / lengths)[..., None] * v  # (B, J, D)


# %% [markdown]
# ### 2. Checking a gradient: central differences
#
# A derivative is a limit, $f'(x) \approx \frac{f(x + h) - f(x - h)}{2h}$ with an error of order
# $h^2$. To check a backward pass, nudge one input entry up and down, recompute the loss, and
# compare the slope with what the backward returned. The **relative error**
# $|a - n| / (|a| + |n|)$ of analytic $a$ and numerical $n$ is scale-free. In float64 with
# $h = 10^{-6}$ a right gradient's worst entry gives about $10^{-6}$ to $10^{-5}$ or less, a
# wrong term $10^{-2}$ or more. (The worst entries are those whose gradient is nearly 0, where
# rounding is large relative to it.)
# `nc.grad_check` does this for every entry (or a random sample of a large array) and names the
# worst one. Check the two backward passes above, chained, on small random capsules:

# %% tags=["nbval-check-output"]
v = rng.normal(0, 0.4, (4, 10, 16))  # (B, J, D) float64
labels = np.array([3, 0, 9, 3])


def loss_of_v() -> float:
    return my_margin_loss(my_lengths(v)[0], labels)[0]


lengths, length_cache = my_lengths(v)
loss, margin_cache = my_margin_loss(lengths, labels)
dv = my_lengths_backward(my_margin_loss_backward(margin_cache), length_cache)  # (B, J, D)
check = nc.grad_check(loss_of_v, {"v": v}, {"v": dv})
print(f"{check.checked} entries checked, largest relative error below 1e-6: "
      f"{check.max_relative_error < 1e-6}")

# %%
print(f"largest relative error: {check.max_relative_error:.1e} at {check.worst}")

# %% [markdown]
# Two warnings that save hours. **Check in float64**: in float32 the difference $f(x+h) - f(x-h)$
# loses most of its digits to rounding, and a right gradient looks wrong:

# %%
v32 = v.astype(np.float32)
lengths32, cache32 = my_lengths(v32)
dv32 = my_lengths_backward(my_margin_loss_backward(my_margin_loss(lengths32, labels)[1]), cache32)
check32 = nc.grad_check(lambda: float(my_margin_loss(my_lengths(v32)[0], labels)[0]),
                        {"v": v32}, {"v": dv32}, eps=1e-3)
print(f"float32, h = 1e-3: largest relative error {check32.max_relative_error:.1e} at {check32.worst}")

# %% [markdown]
# **Avoid kinks.** $\max(0, \cdot)$ has no derivative where its argument is 0; a central
# difference that straddles the kink averages two slopes. Random float64 inputs essentially never
# land within $h$ of one.
#
# ### 3. Prediction vectors: two matrix products
#
# $\hat{\mathbf u}_{j|i} = \mathbf W_{ij}\mathbf u_i$, in einsum notation `"ijdk,bik->bijd"`.
# Each output entry is a sum of products, so each input's gradient collects the upstream
# gradient times the *other* factor, summed over whatever the input did not have:
#
# - $\partial\mathbf W_{ij} = \sum_b \partial\hat{\mathbf u}_{j|i}\,\mathbf u_i^\top$
#   (`"bijd,bik->ijdk"`: the batch is summed, because every image used the same $\mathbf W$);
# - $\partial\mathbf u_i = \sum_j \mathbf W_{ij}^\top\,\partial\hat{\mathbf u}_{j|i}$
#   (`"bijd,ijdk->bik"`: the J output capsules are summed, because $\mathbf u_i$ voted for all).
#
# The rule behind both: **a variable used several times receives the sum of the gradients of its
# uses.** Routing is that rule applied many times over.

# %%
def my_prediction_vectors(W: np.ndarray, u: np.ndarray):
    """W (I, J, D_out, D_in), u (B, I, D_in) -> u_hat (B, I, J, D_out), cache."""
    return np.einsum("ijdk,bik->bijd", W, u), (W, u)


def my_prediction_vectors_backward(du_hat: np.ndarray, cache):
    """(dW (I, J, D_out, D_in), du (B, I, D_in)) from du_hat (B, I, J, D_out)."""
    W, u = cache
    return np.einsum("bijd,bik->ijdk", du_hat, u), np.einsum("bijd,ijdk->bik", du_hat, W)


# %% [markdown]
# ### 4. Squash's Jacobian, on paper — and its backward, yours
#
# Eq. 1 scales each vector by a number that depends on its squared length $q = \lVert\mathbf s\rVert^2$:
#
# $$\mathbf v = g(q)\,\mathbf s,\qquad g(q) = \frac{q}{(1+q)\sqrt{q+\varepsilon}}$$
#
# ($\varepsilon$ inside the root, as in lesson 01.) By the product rule, with
# $\partial q/\partial\mathbf s = 2\mathbf s$, the Jacobian is a scaled identity plus a rank-one
# term along $\mathbf s$:
#
# $$\frac{\partial\mathbf v}{\partial\mathbf s} = g(q)\,\mathbf I + 2\,g'(q)\,\mathbf s\,\mathbf s^\top .$$
#
# The Jacobian is symmetric, so the backward pass is the Jacobian times the upstream gradient —
# without ever building the D×D matrix. Deriving $g'(q)$ is yours.
#
# **Build it.** Write `my_squash_backward(dv, cache)` for the cache of `nc.squash(s)`, a dict
# with `"s"` (..., D), `"q"` $=\lVert\mathbf s\rVert^2$ and `"root"` $=\sqrt{q+\varepsilon}$
# (both (..., 1)), `"scale"` $= g(q)$ and `"eps"`. Return $\partial\mathbf s$ with the shape of
# `s`. It must stay finite at $\mathbf s = 0$. The check compares it with central differences.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_squash_backward(dv: np.ndarray, cache: dict) -> np.ndarray:
    """ds (..., D) from dv (..., D), for the cache of nc.squash(s)."""
    ### BEGIN SOLUTION
    s, q, root, scale, eps = cache["s"], cache["q"], cache["root"], cache["scale"], cache["eps"]
    g_prime = (q + 2 * eps - q * q) / (2 * root ** 3 * (1 + q) ** 2)  # (..., 1)
    return scale * dv + 2 * g_prime * (dv * s).sum(axis=-1, keepdims=True) * s  # (..., D)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_squash_backward(my_squash_backward)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
squash_backward = yours_or_reference(check_squash_backward, my_squash_backward, nc.squash_backward,
                                     name="my_squash_backward")

# %% [markdown]
# Since the Jacobian is symmetric, the backward pass applied to the $k$-th unit vector returns its
# $k$-th column. Here it is for one 3-D capsule, built from `squash_backward` and compared with
# autograd's:

# %% tags=["nbval-check-output"]
s_one = np.array([0.6, -0.3, 0.9])
_, one_cache = nc.squash(s_one[None])  # a batch of one capsule, (1, D)
jacobian = np.stack([squash_backward(unit[None], one_cache)[0] for unit in np.eye(3)], axis=1)  # (D, D)
autograd_jacobian = torch.autograd.functional.jacobian(capsedu.squash, torch.tensor(s_one)).numpy()
print("Jacobian of squash at s =", s_one, f"(|s| = {np.linalg.norm(s_one):.3f}):")
print(np.array2string(jacobian, precision=4, suppress_small=True))
print("equal to autograd's:", np.allclose(jacobian, autograd_jacobian, rtol=1e-12, atol=1e-15))

# %% [markdown]
# The derivative you needed is
#
# $$g'(q) = \frac{q + 2\varepsilon - q^2}{2\,(q+\varepsilon)^{3/2}(1+q)^2}.$$
#
# $g' > 0$ for short vectors ($q < 1$: the scale factor grows with the length, though squash
# only ever shrinks a vector, $g(q) = \sqrt q/(1+q) \le \tfrac12$) and $g' < 0$ for long ones:
# there a longer $\mathbf s$ is scaled down more, and the gradient along $\mathbf s$ almost
# vanishes — the saturation you saw in lesson 01.
#
# ### 5. The softmax, backwards
#
# Routing's couplings are $c_{ij} = \operatorname{softmax}_j(b_{ij})$, over the output capsules.
# Its Jacobian is $\partial c_j/\partial b_k = c_j(\delta_{jk} - c_k)$, so
#
# $$\partial b_k = \sum_j \partial c_j\, c_j(\delta_{jk} - c_k) = c_k\Big(\partial c_k - \sum_j c_j\,\partial c_j\Big)$$
#
# — the same axis in the backward as in the forward (axis 2, J). Written and checked:

# %%
def my_softmax_backward(c: np.ndarray, dc: np.ndarray) -> np.ndarray:
    """db (B, I, J) from dc (B, I, J), for c = softmax(b) over axis 2."""
    return c * (dc - (c * dc).sum(axis=2, keepdims=True))


b_logits, dc = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))  # (B, I, J)
softmax_check = nc.grad_check(lambda: float((nc.softmax(b_logits, axis=2) * dc).sum()), {"b": b_logits},
                              {"b": my_softmax_backward(nc.softmax(b_logits, axis=2), dc)})
print(f"softmax backward: largest relative error {softmax_check.max_relative_error:.1e}")

# %% [markdown]
# ### 6. Routing, backwards: the graph
#
# Procedure 1 for $r$ iterations is a loop, but autograd — and you — see it unrolled: every
# iteration makes new $c$, $\mathbf s$, $\mathbf v$ and $b$, and the votes $\hat{\mathbf u}$ feed
# all of them.

# %% mystnb={"image": {"alt": "Diagram of dynamic routing unrolled for 3 iterations: boxes b, c, s and v per iteration, agreement boxes (votes dotted with v) feeding b(2) and b(3), and v(3) feeding its length ||v|| and the margin loss. The votes u-hat, at the bottom, feed s(1), s(2), s(3) and both agreements: 5 uses, 5 gradient contributions that add up. Only the solid vermillion path, votes to s(3), v(3), ||v|| and loss, remains with detach_inner=True; dashed blue paths join with detach_inner=False."}}
routing_graph(3)

# %% [markdown]
# Read it backwards, from the loss. The gradient $\partial\mathbf v^{(r)}$ comes through the
# lengths. Then each iteration, from the last to the first, undoes its forward in reverse order.
# First the squash (section 4), then the weighted sum
# $\mathbf s^{(t)}_j = \sum_i c^{(t)}_{ij}\hat{\mathbf u}_{j|i}$, which sends a gradient to the
# votes and to the couplings, then the softmax (section 5), from $c^{(t)}$ to $b^{(t)}$. Last
# comes the agreement $b^{(t)} = b^{(t-1)} + \hat{\mathbf u}\cdot\mathbf v^{(t-1)}$: it sends a
# gradient to the votes, to $b^{(t-1)}$ and to $\mathbf v^{(t-1)}$ — where the earlier iteration
# starts. A variable used more than once receives the **sum** of its uses'
# gradients (section 1): the votes feed every sum and every agreement, and each $b^{(t)}$ feeds
# both its own softmax and the next logits.
#
# Counting: $r$ uses of $\hat{\mathbf u}$ in the sums $\mathbf s^{(t)}$ and $r - 1$ in the
# agreements, **five contributions** for $r = 3$. Forget one and the gradient is wrong, yet
# training still runs — the classic silent bug. With `detach_inner=True` (lesson 03, and
# `capsedu`'s default) the votes of the inner iterations are detached: only the solid vermillion
# path remains, the last iteration's weighted sum with its couplings held fixed. That backward is
# two lines:

# %%
def routing_backward_detached(dv: np.ndarray, cache: dict) -> np.ndarray:
    """du_hat (B, I, J, D) from dv (B, J, D): through the last iteration's s, its c held fixed."""
    last = cache["steps"][-1]  # the last iteration's c, v and squash cache
    ds = squash_backward(dv, last["squash"])  # (B, J, D)
    return last["c"][..., None] * ds[:, None]  # (B, I, J, D): c_ij * ds_j for every vote


# %% [markdown]
# The cache of `nc.dynamic_routing(u_hat, r, detach_inner)` holds `u_hat`, the setting and one
# entry per iteration in `cache["steps"]`: that iteration's couplings `"c"` (B, I, J), output
# `"v"` (B, J, D) and squash cache `"squash"`.
#
# **Build it.** Write `my_routing_backward(dv, cache)` for the cache of
# `nc.dynamic_routing(u_hat, r, detach_inner=False)`: return $\partial\hat{\mathbf u}$
# (B, I, J, D), the gradient through *all* iterations, following the graph from the last
# iteration to the first. Use `squash_backward` (yours, or capsedu's) and
# `nc.softmax_backward(c, dc, axis=2)`. The check runs it with 1, 2 and 3 iterations against
# central differences.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_routing_backward(dv: np.ndarray, cache: dict) -> np.ndarray:
    """du_hat (B, I, J, D) from dv (B, J, D), through every iteration of Procedure 1."""
    ### BEGIN SOLUTION
    u_hat, steps = cache["u_hat"], cache["steps"]
    du_hat = np.zeros_like(u_hat)  # (B, I, J, D)
    db = np.zeros(u_hat.shape[:3])  # (B, I, J): gradient reaching b from later iterations
    for t in reversed(range(len(steps))):
        if t < len(steps) - 1:  # v of iteration t fed the agreement of iteration t + 1
            dv = np.einsum("bij,bijd->bjd", db, u_hat)  # (B, J, D)
            du_hat += db[..., None] * steps[t]["v"][:, None]
        ds = squash_backward(dv, steps[t]["squash"])  # (B, J, D)
        du_hat += steps[t]["c"][..., None] * ds[:, None]
        dc = np.einsum("bjd,bijd->bij", ds, u_hat)  # (B, I, J)
        db = db + nc.softmax_backward(steps[t]["c"], dc, axis=2)
    return du_hat
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_routing_backward(my_routing_backward)  # prints ✅ or a hint

# %% tags=["nbval-check-output"]
routing_backward = yours_or_reference(check_routing_backward, my_routing_backward,
                                      nc.dynamic_routing_backward, name="my_routing_backward")

# %% [markdown]
# The steps, written out. Two running arrays carry the sums: `du_hat`, to which every use of the
# votes adds, and `db`, the gradient reaching the logits from later iterations. For iteration
# $t = r, r-1, \dots, 1$:
#
# 1. through squash: $\partial\mathbf s^{(t)}$ from $\partial\mathbf v^{(t)}$ (section 4);
# 2. through $\mathbf s^{(t)}_j = \sum_i c^{(t)}_{ij}\hat{\mathbf u}_{j|i}$: the votes receive
#    $c^{(t)}_{ij}\,\partial\mathbf s^{(t)}_j$, **added** to what they already have; the couplings
#    receive $\partial c^{(t)}_{ij} = \hat{\mathbf u}_{j|i}\cdot\partial\mathbf s^{(t)}_j$;
# 3. through the softmax (section 5): $\partial b^{(t)}$ from $\partial c^{(t)}$, **plus** the
#    gradient $b^{(t)}$ already received from $b^{(t+1)} = b^{(t)} + \hat{\mathbf u}\cdot\mathbf v^{(t)}$;
# 4. through that agreement, into iteration $t - 1$: the votes receive
#    $\partial b^{(t)}_{ij}\,\mathbf v^{(t-1)}_j$ (added again), and
#    $\partial\mathbf v^{(t-1)}_j = \sum_i \partial b^{(t)}_{ij}\,\hat{\mathbf u}_{j|i}$ starts
#    step 1 of the earlier iteration.

# %% [markdown]
# ## Check it
#
# Each backward against `capsedu.nets.numpy_caps` (the same computation), against central
# differences, and — the independent referee — against torch autograd through `capsedu`'s torch
# versions, in float64:

# %%
def autograd_routing(u_hat: np.ndarray, dv: np.ndarray, r: int, detach_inner: bool) -> np.ndarray:
    """d(sum v * dv)/du_hat by torch autograd through capsedu.dynamic_routing."""
    votes = torch.tensor(u_hat, requires_grad=True)
    v_t, _ = capsedu.dynamic_routing(votes, r, detach_inner=detach_inner)
    return torch.autograd.grad((v_t * torch.tensor(dv)).sum(), votes)[0].numpy()


W = rng.normal(0, 0.5, (6, 4, 5, 3))  # (I, J, D_out, D_in)
u = rng.normal(0, 1, (2, 6, 3))  # (B, I, D_in)
u_hat, prediction_cache = my_prediction_vectors(W, u)  # (B, I, J, D)
dv_up = rng.normal(size=(2, 4, 5))  # (B, J, D): some upstream gradient
_, _, routing_cache = nc.dynamic_routing(u_hat, 3, detach_inner=True)
du_hat = routing_backward_detached(dv_up, routing_cache)
_, _, full_cache = nc.dynamic_routing(u_hat, 3, detach_inner=False)
du_hat_full = routing_backward(dv_up, full_cache)  # through every iteration
dW, du = my_prediction_vectors_backward(du_hat, prediction_cache)

W_t, u_t = torch.tensor(W, requires_grad=True), torch.tensor(u, requires_grad=True)
v_t, _ = capsedu.dynamic_routing(torch.einsum("ijdk,bik->bijd", W_t, u_t), 3, detach_inner=True)
(v_t * torch.tensor(dv_up)).sum().backward()
comparisons = {
    "margin loss + lengths (vs capsedu)": (dv, nc.capsule_lengths_backward(
        nc.margin_loss_backward(nc.margin_loss(nc.capsule_lengths(v)[0], labels)[1]),
        nc.capsule_lengths(v)[1])),
    "prediction vectors: dW (vs autograd)": (dW, W_t.grad.numpy()),
    "prediction vectors: du (vs autograd)": (du, u_t.grad.numpy()),
    "routing, detached (vs autograd)": (du_hat, autograd_routing(u_hat, dv_up, 3, True)),
    "routing, detached (vs capsedu)": (du_hat, nc.dynamic_routing_backward(dv_up, routing_cache)),
    "routing, every iteration (vs autograd)": (du_hat_full, autograd_routing(u_hat, dv_up, 3, False)),
}
for name, (mine, reference) in comparisons.items():
    error = np.abs(mine - reference).max() / np.abs(reference).max()
    print(f"{name:38s} largest difference / largest entry: {error:.1e}")

# %% [markdown]
# Differences of $10^{-16}$ are float64 rounding: the same numbers. Note what autograd does *not*
# check: `capsedu.dynamic_routing` with `detach_inner=True` computes exactly the detached
# gradient, which is **not** the derivative of the function routing computes. Central
# differences see the true derivative, so they disagree with both:

# %%
def routed_loss(detach_inner: bool = True) -> float:
    return float((nc.dynamic_routing(my_prediction_vectors(W, u)[0], 3, detach_inner)[0] * dv_up).sum())


detached_check = nc.grad_check(routed_loss, {"W": W, "u": u}, {"W": dW, "u": du})
dW_full, du_full = my_prediction_vectors_backward(du_hat_full, prediction_cache)
full_check = nc.grad_check(routed_loss, {"W": W, "u": u}, {"W": dW_full, "u": du_full})
print(f"detach_inner=True : largest relative error vs central differences "
      f"{detached_check.max_relative_error:.2f} ({detached_check.worst})")
print(f"detach_inner=False: largest relative error vs central differences "
      f"{full_check.max_relative_error:.1e}")

# %% [markdown]
# With `detach_inner=True` the largest relative error is 1.00: the two numbers have opposite
# signs, or one of them is 0. The gradient through every iteration matches the central
# differences to within a millionth (the figure printed above moves between machines and runs:
# float rounding). Both backward passes are right for
# what they compute: the detached one is the exact gradient of routing *with its last couplings
# held constant*, which is not the function the forward pass computes. Autograd, which only
# follows the graph it was given, agrees with either; only central differences tell you which
# function you are differentiating.

# %% [markdown]
# ## Use capsedu
#
# ### A capsule classifier with no framework
#
# `capsedu.nets.numpy_classifier` puts the pieces together, using `capsedu.nets.numpy_caps` for
# each: pixels → a linear layer → 32 primary capsules of 8-D (squashed) → $\hat{\mathbf u} =
# \mathbf W\mathbf u$ → 3 routing iterations → 10 class capsules of 16-D → lengths → margin
# loss. The linear layer stands in for lesson 02's convolutions, so that the whole network fits
# on a screen; Adam is written out too. Its backward is its forward read from the bottom up:

# %%
print(inspect.getsource(ncl.backward))

# %% [markdown]
# Before training anything, compare its gradients with autograd's on one batch of real digits.
# `torch_gradients` builds the same network from `capsedu.squash`, `capsedu.dynamic_routing` and
# `capsedu.margin_loss`, copies the NumPy weights in, and lets autograd differentiate (float64
# on both sides):

# %%
train = capsedu.learner_subset(capsedu.load_mnist("train"))
train = train.subset(capsedu.choose(learner=len(train), fast=1000), seed=0)  # class-balanced order
n_val = capsedu.choose(learner=500, fast=100)  # held out of training: watched during training
images = train.images.numpy().reshape(len(train), -1)  # (N, 784) float32 in [0, 1]
val_images, val_labels = images[:n_val], train.labels.numpy()[:n_val]  # every class equally
train_images, train_labels = images[n_val:], train.labels.numpy()[n_val:]
test = capsedu.load_mnist("test")
test = test.subset(capsedu.choose(learner=len(test), fast=1000), seed=0)
test_images, test_labels = test.images.numpy().reshape(len(test), -1), test.labels.numpy()
print(f"train {len(train_labels):,} | validation {len(val_labels):,} | test {len(test_labels):,} images")

# %% tags=["nbval-check-output"]
params = ncl.init_params(seed=0)  # float32, as trained
print({name: p.shape for name, p in params.items()}, f"{sum(p.size for p in params.values()):,} parameters")
probe_images, probe_labels = train_images[:32], train_labels[:32]


def gradient_agreement(params: dict, detach_inner: bool = True) -> dict[str, float]:
    """Largest |NumPy - autograd| / largest |autograd| per parameter, one batch in float64."""
    weights64 = {name: p.astype(np.float64) for name, p in params.items()}
    _, _, cache = ncl.forward(weights64, probe_images.astype(np.float64), probe_labels,
                              detach_inner=detach_inner)
    ours = ncl.backward(cache)
    _, theirs = torch_gradients(weights64, probe_images, probe_labels, detach_inner=detach_inner)
    return {name: float(np.abs(ours[name] - theirs[name]).max() / np.abs(theirs[name]).max())
            for name in ours}


agreement = gradient_agreement(params)
print("before training, NumPy vs autograd within 1e-10 for A, a, W:",
      all(error < 1e-10 for error in agreement.values()))

# %% [markdown]
# ### Training, entirely in NumPy
#
# `ncl.fit` shuffles, runs forward, backward and an Adam step per batch of 64. After each epoch
# it calls our `on_epoch`, outside the timed part: it measures the accuracy on the
# **validation** digits and compares the gradients with autograd's on the same probe batch again
# — the weights change, the gradients must still agree. The test digits wait until training is
# over: a number watched every epoch (to decide when to stop, say) is no longer an unbiased test.

# %%
epochs = capsedu.choose(learner=15, fast=2)


def after_epoch(record: dict) -> None:
    record["validation_accuracy"] = ncl.accuracy(params, val_images, val_labels)
    record["gradient_error"] = max(gradient_agreement(params).values())
    print(f"epoch {record['epoch']:2d}: loss {record['train_loss']:.4f}, validation accuracy "
          f"{record['validation_accuracy']:.2%}, {record['train_seconds']:.1f} s of training this "
          f"epoch, NumPy vs autograd {record['gradient_error']:.0e}")


history = ncl.fit(params, train_images, train_labels, epochs=epochs,
                  batch_size=64, lr=2e-3, seed=0, on_epoch=after_epoch)

# %% mystnb={"image": {"alt": "Two line charts of the NumPy CapsNet's 15 training epochs, plotted against seconds of training. Left: the mean margin loss of each epoch, on a log scale, falls steadily along a nearly straight line from about 0.2 to below 0.01. Right: accuracy on 500 validation digits, with a dotted line at 90 %: already above it after the first epoch, rising to about 94 to 95 % and levelling off over the second half of training."}}
def plot_history(history: dict[str, list]) -> plt.Figure:
    """Training loss and validation accuracy against seconds of training (so far, at each epoch's end)."""
    seconds = np.cumsum(history["train_seconds"])
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    ax_loss.plot(seconds, history["train_loss"], "o-")
    ax_loss.set(xlabel="seconds of training (NumPy, 2 cores)", ylabel="mean margin loss of the epoch",
                yscale="log", title="Training loss", xlim=(0, None))
    ax_acc.plot(seconds, 100 * np.array(history["validation_accuracy"]), "o-", color=BLUISH_GREEN)
    ax_acc.axhline(90, color="black", ls=":", lw=1, label="90 %")
    ax_acc.set(xlabel="seconds of training (NumPy, 2 cores)", ylabel="validation accuracy (%)",
               title=f"Accuracy on {len(val_labels):,} validation digits", ylim=(85, 100), xlim=(0, None))
    ax_acc.legend(loc="lower right")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
    return fig


plot_history(history);

# %%
final, seconds = history.last(), np.cumsum(history["train_seconds"])  # seconds of training so far
first_90 = next((i for i, a in enumerate(history["validation_accuracy"]) if a >= 0.9), None)
late = history["validation_accuracy"][len(history["validation_accuracy"]) // 2:]  # the second half
print(f"after {final['epoch']} epochs ({seconds[-1]:.1f} s of training on {len(train_labels):,} "
      f"images): validation accuracy {final['validation_accuracy']:.2%}")
print("90 % on validation first reached after "
      + (f"epoch {history['epoch'][first_90]} ({seconds[first_90]:.1f} s)" if first_90 is not None else "no epoch"))
print(f"validation accuracy over the second half of training: {min(late):.2%} to {max(late):.2%} "
      f"(one standard error on {len(val_labels):,} digits: "
      f"{100 * capsedu.standard_error(final['validation_accuracy'], len(val_labels)):.1f} points)")
test_right = ncl.predict_lengths(params, test_images).argmax(axis=1) == test_labels  # (N,) per test digit
print(f"test accuracy, measured once, now: {capsedu.with_error(test_right.mean(), len(test_labels))} "
      f"on {len(test_labels):,} test digits")
print(f"largest NumPy-vs-autograd gradient difference over training: "
      f"{max(history['gradient_error']):.0e}")

# %% [markdown]
# The classifier passes 90 % on the validation digits early and ends at the test accuracy
# printed above, after seconds of training, not minutes, because it has 241,920 parameters and 32
# primary capsules instead of 1,152. The training loss keeps falling while the validation
# accuracy levels off: over the second half of training it moves within a few standard errors of
# 500 digits (the range is printed above), and the network starts to memorise its training
# images. At every epoch its gradients agreed with autograd's to float64 rounding, relative to
# their size: the hand-written backward is right at trained weights too, not only at the initial
# ones. A linear layer is a weak feature extractor, and the convolutional CapsNets of the earlier
# lessons do far better; that is the price of a network whose every gradient fits on one screen.

# %% [markdown]
# ## Explore
#
# ### What `detach_inner` does to the gradient, in numbers
#
# On the trained classifier and the probe batch, the gradient of every parameter both ways: how
# far apart (relative to the full gradient's size) and how aligned (cosine similarity):

# %%
def gradients(params: dict, detach_inner: bool) -> dict[str, np.ndarray]:
    weights64 = {name: p.astype(np.float64) for name, p in params.items()}
    _, _, cache = ncl.forward(weights64, probe_images.astype(np.float64), probe_labels,
                              detach_inner=detach_inner)
    return ncl.backward(cache)


def compare_detach(params: dict, title: str) -> None:
    detached, full = gradients(params, True), gradients(params, False)
    for name in full:
        size, full_size = np.linalg.norm(detached[name]), np.linalg.norm(full[name])
        difference = np.linalg.norm(detached[name] - full[name]) / full_size
        cosine = (detached[name] * full[name]).sum() / (size * full_size)
        print(f"{title}, {name}: |detached - full| / |full| = {difference:.1%}, cosine {cosine:.3f}, "
              f"|detached| / |full| = {size / full_size:.2f}")


compare_detach(ncl.init_params(seed=0), "untrained")
compare_detach(params, "trained  ")

# %% [markdown]
# On the untrained network the two gradients are nearly the same (a few per cent apart, cosine
# 1.000): its couplings hardly depend on the votes yet. On the trained one they still point in
# similar directions (the cosines printed above), but the detached gradient is several times
# shorter than the full one. Once routing concentrates the couplings, moving a vote also moves
# the couplings, and that path — the one detaching cuts — carries most of the gradient's size.
#
# Does it change what the network learns? Each run takes seconds, so we train the same recipe
# both ways with several seeds (the seed sets the initial weights and the batch order). Both
# networks of a seed answer the same test digits, so each seed's comparison is **paired**
# (`capsedu.compare_paired`: only the digits on which they disagree count):

# %%
def train_and_test(seed: int, detach_inner: bool) -> tuple[np.ndarray, float]:
    """One run of the recipe above: (which test digits it gets right (N,), seconds of training)."""
    weights = ncl.init_params(seed=seed)
    run = ncl.fit(weights, train_images, train_labels, epochs=epochs, batch_size=64, lr=2e-3,
                  seed=seed, detach_inner=detach_inner)
    right = ncl.predict_lengths(weights, test_images).argmax(axis=1) == test_labels  # (N,)
    return right, sum(run["train_seconds"])


seeds = capsedu.choose(learner=(0, 1, 2), fast=(0, 1))
runs = {(True, 0): (test_right, seconds[-1])}  # the run trained above: detach_inner=True, seed 0
for seed in seeds:
    for detach_inner in (True, False):
        if (detach_inner, seed) not in runs:
            runs[detach_inner, seed] = train_and_test(seed, detach_inner)
    (right_full, time_full), (right_detached, time_detached) = runs[False, seed], runs[True, seed]
    print(f"seed {seed}: {time_full:.1f} s with the full gradient, {time_detached:.1f} s detached; "
          + str(capsedu.compare_paired("full", right_full, "detached", right_detached)))
gaps = np.array([100 * (runs[False, s][0].mean() - runs[True, s][0].mean()) for s in seeds])  # points
for detach_inner, name in ((False, "full gradient"), (True, "detached     ")):
    accuracies = np.array([100 * runs[detach_inner, s][0].mean() for s in seeds])
    print(f"{name}: test accuracy {accuracies.mean():.2f} % on average over {len(seeds)} seeds, "
          f"from {accuracies.min():.2f} to {accuracies.max():.2f} %")
print("full minus detached, per seed: " + ", ".join(f"{g:+.2f}" for g in gaps)
      + f" points (mean {gaps.mean():+.2f}, spread across seeds {gaps.std(ddof=1):.2f})")

# %% [markdown]
# Adam divides every step by a running estimate of the gradient's own size, so a gradient several
# times longer barely changes the steps. Seed by seed, the paired tests disagree (printed
# above): a tie with some seeds, a gap of more than two standard errors with another. Each seed's
# ± covers only the sampling of test digits, for that one pair of runs; the spread of the gap across seeds adds what the initial
# weights and the batch order do. The full gradient costs more time (printed above): its backward
# pass goes through all three iterations. Lesson 03's recorded three-seed study of the
# convolutional CapsNet gives the same picture.
#
# ### NumPy against torch at the paper's size
#
# Is hand-written NumPy slow? Routing at the paper's sizes (I = 1152 votes for J = 10 capsules of
# 16-D, r = 3) and the paper's batch of 64, forward and backward, float32, best of three runs
# (`benchmarks/numpy_routing.py` measures more carefully, and the whole layer too). Your
# timings will differ:

# %%
paper_votes = rng.normal(0, 0.05, (64, 1152, 10, 16)).astype(np.float32)  # (B, I, J, D)
paper_dv = rng.normal(size=(64, 10, 16)).astype(np.float32)  # (B, J, D)
votes_t = torch.from_numpy(paper_votes).requires_grad_(True)


def numpy_routing_step(detach: bool) -> np.ndarray:
    _, _, cache = nc.dynamic_routing(paper_votes, 3, detach)
    return nc.dynamic_routing_backward(paper_dv, cache)  # (B, I, J, D)


def torch_routing_step(detach: bool) -> torch.Tensor:
    v_t, _ = capsedu.dynamic_routing(votes_t, 3, detach_inner=detach)
    return torch.autograd.grad((v_t * torch.from_numpy(paper_dv)).sum(), votes_t)[0]


for detach in (True, False):  # the best of three runs: the one least disturbed by other work
    numpy_seconds = min(timeit.repeat(lambda detach=detach: numpy_routing_step(detach), number=1, repeat=3))
    torch_seconds = min(timeit.repeat(lambda detach=detach: torch_routing_step(detach), number=1, repeat=3))
    print(f"detach_inner={detach!s:5s}: NumPy {1000 * numpy_seconds:.0f} ms, torch "
          f"{1000 * torch_seconds:.0f} ms (NumPy / torch = {numpy_seconds / torch_seconds:.2f})")

# %% [markdown]
# At the paper's size the NumPy routing and `capsedu.dynamic_routing` take times of the same order,
# both with `detach_inner=True` and through every iteration (the times and their ratio are printed
# above; they move between runs and machines): hand-written NumPy is not slow here. Both do the
# same operations in the same order on the CPU, and both sum with `einsum`, without first building
# the (B, I, J, D) product of couplings and votes. What NumPy
# lacks is everything around it: a GPU, autograd for new ideas, and formulations such as the fast
# path `capsedu.DigitCaps` runs (lesson 03), which never builds $\hat{\mathbf u}$ —
# `benchmarks/numpy_routing.py` compares the whole layer with it.
#
# ### Things to try
#
# - Break `my_softmax_backward` on purpose (sum over axis 1) and watch the gradient check of
#   section 5 fail: how large is the relative error?
# - Train the NumPy classifier with one routing iteration (`routing_iterations=1` in `ncl.fit`): is
#   routing worth its cost here?
# - Make the probe batch float32 in `gradient_agreement`: how close do NumPy and torch stay?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: what a gradient check cannot see
#
# pyCapsNet's routing departs from Procedure 1 in its forward pass, twice: it adds to every
# image's logits $b$ the agreement **averaged over the batch**, and its softmax normalises the
# couplings **over the input capsules** $i$ instead of the output capsules $j$. Its backward
# passes follow its own forward.
#
# First, predict: would the central-difference check of section 2, run on that routing, catch
# either departure? Write your answer down; the cell after the two checks runs it.
#
# Then write two black-box tests. Each receives a routing function `routing(u_hat) -> (v, c)`
# (votes (B, I, J, D) in; outputs (B, J, D) and last couplings (B, I, J) out) and returns `True`
# when the routing passes. Each must pass Procedure 1 and fail one of the two departures, using
# only a property that Procedure 1 must have — not a copy of Procedure 1 to compare with. Make your
# own votes inside the test (`np.random.default_rng(...)`).
#
# (a) `batch_test(routing)`: catches the logits averaged over the batch.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def batch_test(routing) -> bool:
    """True when the routing passes: (your property of Procedure 1 that the batch mean breaks)."""
    ### BEGIN SOLUTION
    votes = np.random.default_rng(1).normal(0, 0.5, (3, 6, 4, 5))  # (B, I, J, D)
    changed = votes.copy()
    changed[1] = np.random.default_rng(2).normal(0, 0.5, votes[1].shape)  # another image 1
    v, _ = routing(votes)
    v_changed, _ = routing(changed)
    return bool(np.allclose(v[[0, 2]], v_changed[[0, 2]]))  # images 0 and 2 must not move
    ### END SOLUTION


# %% tags=["nbval-check-output"]
batch_result = check_batch_test(batch_test)

# %% [markdown]
# (b) `coupling_test(routing)`: catches the softmax over the input capsules.

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def coupling_test(routing) -> bool:
    """True when the routing passes: (your property of Procedure 1's couplings)."""
    ### BEGIN SOLUTION
    votes = np.random.default_rng(3).normal(0, 0.5, (2, 6, 4, 5))  # (B, I, J, D), I != J
    _, c = routing(votes)  # (B, I, J)
    return bool(np.allclose(c.sum(axis=2), 1.0))  # each lower capsule shares out all of its vote
    ### END SOLUTION


# %% tags=["nbval-check-output"]
coupling_result = check_coupling_test(coupling_test)

# %% [markdown]
# Now the gradient check on each routing, in float64: autograd differentiates the routing's own
# forward pass (as pyCapsNet's hand-written backward does), central differences measure the
# slope of that same forward. Beside it, your two tests:

# %%
votes_check = rng.normal(0, 0.5, (2, 5, 3, 4))  # (B, I, J, D)
dv_check = rng.normal(size=(2, 3, 4))  # (B, J, D)
departures = {"Procedure 1": {}, "logits averaged over the batch": {"batch_mean": True},
              "softmax over the input capsules": {"softmax_axis": 1},
              "both of pyCapsNet's departures": {"batch_mean": True, "softmax_axis": 1}}
for name, options in departures.items():
    votes_t = torch.tensor(votes_check, requires_grad=True)
    v_t, _ = departed_routing(votes_t, **options)
    analytic = torch.autograd.grad((v_t * torch.tensor(dv_check)).sum(), votes_t)[0].numpy()
    gradient = nc.grad_check(lambda options=options: float((departed_routing(votes_check, **options)[0]
                                                             * dv_check).sum()),
                             {"u_hat": votes_check}, {"u_hat": analytic})
    routing = ROUTINGS[name][0]
    verdicts = (f"batch test {'passes' if batch_test(routing) else 'FAILS'}, coupling test "
                f"{'passes' if coupling_test(routing) else 'FAILS'}" if batch_result and coupling_result
                else "(your tests run here once both pass their checks)")
    print(f"{name:32s} gradient check {gradient.max_relative_error:.0e}; {verdicts}")

# %% [markdown]
# The gradient check passes on all four routings, departures included: every largest relative
# error printed above is orders of magnitude below the $10^{-2}$ or more that a wrong term gives
# (section 2). A gradient check compares a backward pass with the
# forward pass it belongs to, so it cannot tell whether that forward is the paper's; a backward
# written from a wrong forward is a correct gradient of the wrong function. The two tests look at
# the forward itself, through properties of Procedure 1. Each image is routed on its own, so no
# image's output may depend on another's votes. Each lower capsule shares out its whole vote
# among the parents, so every row of $c$ sums to 1 over $j$. Each test catches its departure and
# passes the other (printed above). Averaging the logits over the batch makes one image's parse
# depend on what else is in its batch — at test time, on the batch size.
#
# ## Summary
#
# - A backward pass takes the gradient of its output and a cache, and returns the gradients of
#   its inputs; a variable used several times receives the **sum** of its uses' gradients.
# - Squash's Jacobian is $g\,\mathbf I + 2g'\,\mathbf s\mathbf s^\top$; the softmax's backward is
#   $c\,(\partial c - \sum_j c\,\partial c)$ over the same axis as the forward.
# - Unrolled, Procedure 1 uses the votes $2r - 1$ times; the backward through all iterations
#   walks them from last to first, carrying `db` and adding into `du_hat`. With `detach_inner=True`
#   only the last iteration's sum remains — the gradient of a different function than the one
#   routing computes, on purpose.
# - Check every gradient twice: central differences in float64 (relative error about $10^{-6}$
#   to $10^{-5}$ or less when right, $10^{-2}$ or more for a wrong term) and autograd.
# - A gradient check cannot catch a wrong forward pass, such as pyCapsNet's softmax over the
#   input capsules or its logits averaged over the batch: test the forward for Procedure 1's
#   properties — images routed independently, each row of $c$ summing to 1 over $j$.
# - A capsule classifier with no framework — a linear layer, 32 primary capsules, Procedure 1
#   and the margin loss, 241,920 parameters — trains in seconds. It is watched on validation
#   digits and tested once, at the end; its gradients stayed within float64 rounding of
#   autograd's throughout.
# - On the trained classifier the detached gradient is several times shorter than the full one
#   but points in a similar direction. Trained both ways, the two end close, and the gap moves
#   from seed to seed by more than one paired standard error: one run of each settles nothing.
#
# ## Self-check
#
# A few questions to test your understanding; click an answer to see whether it is right and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("10")

# %% [markdown]
# ## What's next
#
# Lesson 11 replaces Procedure 1 with EM routing (*Matrix capsules with EM
# routing*, 2018): capsules with a 4×4 pose matrix and an activation, routed by fitting a
# mixture of Gaussians to the votes. The gradient checks of this lesson are how its
# implementation is tested.
