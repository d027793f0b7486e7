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
# # Lesson 07 — Exploring trained capsules
#
# A digit capsule is a 16-D vector: its **length** says "this digit is here", its **direction**
# should say *how* it is drawn. Section 5.1 of Sabour et al. (2017) tests that claim with the
# decoder: nudge one dimension of the winning capsule, redraw, and see what changes (their
# Figure 4). In this lesson you do exactly that with a trained network - first by hand, then with
# a live explorer and the static Figure-4 grid - and name what a few dimensions do. Then you watch
# dynamic routing at work on real digits with a second explorer, and look at where routing
# agrees and where it does not: a digit the network gets wrong.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - read a **reconstruction** as what the winning capsule encodes about a digit;
# - **perturb** one dimension of a digit capsule and decode it, as in Figure 4 of the paper, and
#   **name** what some dimensions control (stroke width, slant, width, ...);
# - use the **perturbation explorer** and the **routing explorer** (`capsedu.explore.widgets`);
# - read **coupling coefficients** on the primary-capsule grid and the capsule lengths after each
#   routing iteration, and compare a correctly classified digit with a **misclassified** one.
#
# ## Prerequisites and time
#
# Lessons 03 (dynamic routing), 05 (decoder and masking) and 06 (training). About 40 minutes.
# Nothing is trained here: the lesson loads the network shipped with the course
# (`capsedu.pretrained()`, a few seconds, its checksum verified). The explorers need a live Python
# kernel (JupyterLab, VS Code, Colab); every explorer is followed by a static picture of the same
# figure for readers of the book.

# %%
import matplotlib.pyplot as plt
import torch

import capsedu
from capsedu.course.checks.exploring import (check_couplings_for_class, check_dimension_effects,
                                      check_dimension_names, check_perturb_dimension)
from capsedu.explore.probes import (couplings_on_grid, encode_image, perturbation_sweep,
                             perturbed_reconstructions, routing_trace)
from capsedu.explore.widgets import perturbation_explorer, perturbation_grid, routing_explorer

# %%
capsedu.set_seed(0)
model = capsedu.pretrained()  # the shipped CPU-configuration CapsNet, checksum verified
config = model.config
metrics = capsedu.pretrained_metrics()
print(f"shipped network: {config.num_primary_caps} primary capsules ({config.primary_types} types "
      f"on a {config.primary_grid}x{config.primary_grid} grid), {config.digit_dim}-D digit capsules")
print(f"its test accuracy when it was trained: {metrics['test_accuracy']:.2%}")

test = capsedu.load_mnist("test")
n_search = capsedu.choose(learner=len(test), fast=500)  # test images searched for mistakes below

# %% [markdown]
# ## Build it
#
# ### Reconstructions of test digits
#
# At test time the decoder sees only the **longest** capsule (the prediction), all others set to
# zero (lesson 05). If the reconstruction looks like the input, those 16 numbers carry enough to
# redraw the digit: its thickness, slant, size and position.

# %%
shown_images, shown_labels = test.images[:10], test.labels[:10]  # the first ten test digits
with torch.no_grad():
    out = model(shown_images)  # masked by the longest capsule
fig, axes = plt.subplots(2, 10, figsize=(10, 2.6))
for k in range(10):
    axes[0, k].imshow(shown_images[k, 0], cmap="gray", vmin=0, vmax=1)
    axes[1, k].imshow(out.reconstruction[k, 0], cmap="gray", vmin=0, vmax=1)
    axes[0, k].set_title(f"{int(shown_labels[k])} → {int(out.lengths[k].argmax())}", fontsize=9)
for ax in axes.flat:
    ax.set_axis_off()
axes[0, 0].text(-4, 14, "input", ha="right", va="center")
axes[1, 0].text(-4, 14, "redrawn", ha="right", va="center")
fig.suptitle("Test digits (true → predicted) and the decoder's reconstructions")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Perturbing one dimension by hand
#
# Take one digit, its digit capsules $\mathbf v$ (J × 16) and its prediction. Add 0.25 to one
# dimension of the winning capsule only, then decode with the mask on that capsule. The other
# capsules do not matter: the mask zeroes them.

# %%
image = test.images[0]  # (1, 28, 28): test digit number 0
with torch.no_grad():
    capsules = model(image[None]).capsules[0]  # (J, D_out) = (10, 16)
    label = int(capsules.norm(dim=-1).argmax())
    dim = 2
    moved = capsules.clone()
    moved[label, dim] += 0.25
    labels = torch.tensor([label])
    plain = model.decode(capsules[None], labels)[0, 0]  # (28, 28)
    nudged = model.decode(moved[None], labels)[0, 0]  # (28, 28)

fig, axes = plt.subplots(1, 4, figsize=(9, 2.6))
panels = [(image[0], "input"), (plain, "reconstruction"), (nudged, f"dim {dim} + 0.25"),
          (nudged - plain, "difference")]
for ax, (picture, title) in zip(axes, panels):
    is_diff = title == "difference"
    ax.imshow(picture, cmap="coolwarm" if is_diff else "gray",
              vmin=-0.5 if is_diff else 0, vmax=0.5 if is_diff else 1)
    ax.set_title(title)
    ax.set_axis_off()
fig.suptitle(f"Class-{label} capsule, dimension {dim} moved by +0.25 (red: ink added, blue: removed)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Routing from $\hat{\mathbf u}$, one iteration count at a time
#
# The routing explorer below never recomputes the convolutions when you move its slider: the
# prediction vectors $\hat{\mathbf u}_{j|i}$ depend only on the image, so they are computed once,
# and `capsedu.dynamic_routing(u_hat, r)` is re-run for each number of iterations $r$.

# %%
with torch.no_grad():
    u_hat = model.digits.predict(model.encode(image[None]))  # (1, I, J, D_out)
    lengths_by_r = torch.stack([capsedu.dynamic_routing(u_hat, r)[0][0].norm(dim=-1)
                                for r in range(1, 8)])  # (7, J)
print("length of the winning capsule after r = 1..7 iterations:",
      " ".join(f"{x:.3f}" for x in lengths_by_r[:, label].tolist()))

# %% [markdown]
# ## Check it
#
# The hand-made perturbation must match `capsedu.explore.probes.perturbed_reconstructions`, and routing
# with the network's own number of iterations must give the network's own capsules.

# %%
# NBVAL_CHECK_OUTPUT
offsets = torch.zeros(1, config.digit_dim)
offsets[0, dim] = 0.25
recon, recon_lengths = perturbed_reconstructions(model, capsules, label, offsets)
assert torch.allclose(recon[0, 0], nudged, atol=1e-6)
assert torch.allclose(recon_lengths[0], moved.norm(dim=-1), atol=1e-6)
with torch.no_grad():
    assert torch.allclose(lengths_by_r[config.routing_iterations - 1], model(image[None]).lengths[0],
                          atol=1e-6)
print("u_hat:", tuple(u_hat.shape), "| digit capsules:", tuple(capsules.shape),
      "| perturbed reconstruction:", tuple(recon.shape))
print("hand-made perturbation and routing agree with capsedu ✅")

# %% [markdown]
# ## Use capsedu
#
# ### The paper's Figure 4: every dimension, eleven offsets
#
# `perturbation_grid(model, image)` decodes the winning capsule with each of its 16 dimensions moved
# by −0.25, −0.20, ..., +0.25 (one row per dimension). The middle column is the plain
# reconstruction. Most rows change the digit *smoothly*: one direction of the capsule, one
# property of the drawing. Some dimensions do almost nothing for this digit.

# %%
perturbation_grid(model, image)

# %% [markdown]
# Which rows thicken the stroke? Which slant the digit, widen it, or move one part of it (the loop
# of a 6, the tail of a 9)? Keep your answers in mind for Exercise 2. A second digit:

# %%
perturbation_grid(model, test.images[6])

# %% [markdown]
# ### The perturbation explorer
#
# The same experiment, live: pick an image by its index in the test split, move the 16 sliders
# (several at once if you like), watch the reconstruction and the capsule lengths (the winning
# capsule in orange; the black tick marks its length before you moved anything). **reset** puts
# every slider back to 0. The figure is redrawn in place, so it follows the sliders smoothly.

# %%
explorer = perturbation_explorer(model, test, index=0)
explorer

# %% [markdown]
# Without a kernel, here is what it shows after moving two sliders (set from code - you can drive
# an explorer the same way; `snapshot()` returns the picture the widget shows):

# %%
explorer.sliders[dim].value = 0.25
explorer.sliders[(dim + 5) % config.digit_dim].value = -0.25
explorer.snapshot()

# %% [markdown]
# ### The routing explorer
#
# Move the slider from 1 to 7 routing iterations. With $r = 1$ every primary capsule splits its
# vote evenly ($c_{ij} = 1/10$); each further iteration gives more of it to the digit capsules its
# prediction agrees with. The top right panel shows, for every capsule type, its 6×6 grid of
# couplings toward the predicted class; the bottom left their mean per type; the bottom right the
# ten capsule lengths after 1, 2, ..., r iterations.

# %%
router = routing_explorer(model, test, index=0)
router

# %% [markdown]
# The same figure after one and after three iterations:

# %%
router.iterations.value = 1
router.snapshot()

# %%
router.iterations.value = 3
router.snapshot()

# %% [markdown]
# ## Explore
#
# ### Where routing agrees, and where it does not
#
# For a well-drawn digit the primary capsules agree: their predictions for the right class point
# the same way, the coupling toward it rises with each iteration, and that capsule gets longer
# while the others shrink. For a digit the network gets wrong, the votes are split. Let us find
# the mistakes among the test images searched:

# %%
with torch.no_grad():
    lengths = torch.cat([model(batch).lengths for batch in test.images[:n_search].split(500)])  # (N, J)
predicted = lengths.argmax(dim=1)
wrong = torch.nonzero(predicted != test.labels[:n_search]).flatten()  # test indices of the mistakes
print(f"{len(wrong)} mistakes among the first {n_search:,} test images")

# %% [markdown]
# The mistake on which the network is most sure of itself (longest wrong capsule), and how the
# lengths of its true and predicted classes move with the routing iterations:

# %%
if len(wrong) > 0:
    worst = int(wrong[lengths[wrong].max(dim=1).values.argmax()])
    true_class, wrong_class = int(test.labels[worst]), int(predicted[worst])
    encoded = encode_image(model, test.images[worst])
    trace = routing_trace(encoded.u_hat, 7)
    fig, (ax_img, ax_len, ax_true, ax_wrong) = plt.subplots(1, 4, figsize=(11, 2.9))
    ax_img.imshow(test.images[worst, 0], cmap="gray", vmin=0, vmax=1)
    ax_img.set_title(f"test image {worst}: true {true_class}, predicted {wrong_class}", fontsize=9)
    ax_img.set_axis_off()
    for k, style in [(true_class, "o-"), (wrong_class, "s--")]:
        ax_len.plot(range(1, 8), trace.lengths[:, k], style, label=f"class {k}")
    ax_len.set(xlabel="routing iterations r", ylabel="capsule length", title="Lengths", ylim=(0, 1))
    ax_len.legend(fontsize=8)
    with torch.no_grad():
        for ax, k in [(ax_true, true_class), (ax_wrong, wrong_class)]:
            redrawn = model.decode(encoded.capsules[None], torch.tensor([k]))[0, 0]
            ax.imshow(redrawn, cmap="gray", vmin=0, vmax=1)
            ax.set_title(f"redrawn as a {k}")
            ax.set_axis_off()
    fig.suptitle("A misclassified digit: routing favours the wrong capsule")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# A second routing explorer, opened on this digit: move its slider and compare with the
# confidently recognised 7 above. Are the couplings toward the predicted class as concentrated?
# (You can also type any test index into either explorer.)

# %%
wrong_router = routing_explorer(model, test, index=worst if len(wrong) > 0 else 0)
wrong_router

# %% [markdown]
# Its figure after three iterations, for readers without a kernel:

# %%
wrong_router.snapshot()

# %% [markdown]
# A number for "how much do the primary capsules agree": the mean coupling toward the predicted
# class after three iterations, weighted by how active each primary capsule is (its length).
# Averaged over correct and over wrong predictions:

# %%
def agreement(model: capsedu.CapsNet, images: torch.Tensor) -> torch.Tensor:
    """Length-weighted mean coupling toward the predicted class, one number per image (B,)."""
    with torch.no_grad():
        u = model.encode(images)  # (B, I, D_in)
        v, c = capsedu.dynamic_routing(model.digits.predict(u), 3)  # (B, J, D_out), (B, I, J)
        winner = v.norm(dim=-1).argmax(dim=1)  # (B,)
        toward = c[torch.arange(len(images)), :, winner]  # (B, I)
        weight = u.norm(dim=-1)  # (B, I)
    return (toward * weight).sum(dim=1) / weight.sum(dim=1)


scores = torch.cat([agreement(model, batch) for batch in test.images[:n_search].split(500)])  # (N,)
right = predicted == test.labels[:n_search]
print(f"agreement, correct predictions: {scores[right].mean():.3f} (uniform would be 0.100)")
if len(wrong) > 0:
    print(f"agreement, wrong predictions:   {scores[~right].mean():.3f}")

# %% [markdown]
# ### Ideas to try
#
# - In the perturbation explorer, move one slider far and watch the bars: the winning capsule
#   gets longer or shorter, the prediction never changes (the other capsules are untouched).
# - Find a dimension that does the same thing for every digit (say, stroke width) and one whose
#   meaning depends on the class.
# - In the routing explorer, go through several misclassified digits: do more iterations ever
#   *fix* a mistake, or only make the network more sure?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: perturb one dimension
#
# Write `perturb_dimension(capsules, label, dim, delta)`: given the digit capsules of one image
# (J × 16), return a **new** tensor with `delta` added to dimension `dim` of capsule `label` only.
# Leave the input unchanged.

# %%
def perturb_dimension(capsules: torch.Tensor, label: int, dim: int, delta: float) -> torch.Tensor:
    """A copy of ``capsules`` (J, D_out) with ``capsules[label, dim]`` moved by ``delta``."""
    ### BEGIN SOLUTION
    moved = capsules.clone()
    moved[label, dim] += delta
    return moved
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
check_perturb_dimension(perturb_dimension);

# %% [markdown]
# ### Exercise 2: which dimensions matter, and what do they do?
#
# Write `dimension_effects(model, image)`: for each of the 16 dimensions, how much the
# reconstruction changes between the −0.25 and the +0.25 perturbation, measured as the **mean
# absolute pixel difference**. `perturbation_sweep(model, image)` returns the decoded images of the
# grid above as a (16, 11, 28, 28) tensor (and the class).

# %%
def dimension_effects(model: capsedu.CapsNet, image: torch.Tensor) -> torch.Tensor:
    """Mean |reconstruction(+0.25) - reconstruction(-0.25)| for each dimension, shape (D_out,)."""
    ### BEGIN SOLUTION
    images, _ = perturbation_sweep(model, image)  # (D_out, V, H, W)
    return (images[:, -1] - images[:, 0]).abs().mean(dim=(1, 2))
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
check_dimension_effects(dimension_effects, model, image);

# %% [markdown]
# Rank the dimensions of the first digit by their effect, look at their rows in the first grid
# (and try them in the explorer on other digits), then describe **three** of the strongest in
# `my_names` - a dict from dimension number to a few words such as "stroke width", "slant to the
# right", "wider", "loop closes". The check only verifies that you picked dimensions that really
# change the digit and wrote something for each; what you write is yours to judge.

# %%
effects = dimension_effects(model, image)
ranking = effects.argsort(descending=True)
print("dimensions, strongest first:", ranking.tolist())

# %%
### BEGIN SOLUTION
top = ranking[:3].tolist()
my_names = {top[0]: "the strongest change: compare the -0.25 and +0.25 ends of its row",
            top[1]: "second strongest: stroke thickness or slant, depending on the digit",
            top[2]: "third strongest: width or position of one part of the digit"}
### END SOLUTION

# %%
check_dimension_names(my_names, effects);

# %% [markdown]
# ### Exercise 3: couplings on the primary-capsule grid
#
# The routing explorer lays the couplings (I × J) toward one class out as one 6×6 map per capsule
# type. Write `couplings_for_class(c, label, num_types)` returning that (T, 6, 6) tensor. Primary
# capsules are numbered type first: capsule $i = t \cdot 36 + y \cdot 6 + x$ (lesson 02).

# %%
def couplings_for_class(c: torch.Tensor, label: int, num_types: int) -> torch.Tensor:
    """Couplings ``c`` (I, J) toward class ``label`` as (T, G, G) maps, one per capsule type."""
    ### BEGIN SOLUTION
    side = int(round((c.shape[0] / num_types) ** 0.5))
    return c[:, label].reshape(num_types, side, side)
    ### END SOLUTION


# %%
# NBVAL_CHECK_OUTPUT
check_couplings_for_class(couplings_for_class);

# %% [markdown]
# With it, compare where the couplings of the digit of Exercise 2 go after three iterations:
# toward its own class, and toward the class its capsules rank second.

# %%
trace3 = routing_trace(encode_image(model, image).u_hat, 3)
second = int(trace3.lengths[-1].argsort(descending=True)[1])
top = float(trace3.couplings[:, [trace3.prediction, second]].quantile(0.95))  # colour scale
fig, axes = plt.subplots(2, config.primary_types, figsize=(1.1 * config.primary_types, 2.9),
                         squeeze=False)
for row, k in enumerate([trace3.prediction, second]):
    maps = couplings_for_class(trace3.couplings, k, config.primary_types)
    assert torch.equal(maps, couplings_on_grid(trace3.couplings, k, config.primary_types))
    for t in range(config.primary_types):
        axes[row, t].imshow(maps[t], cmap="viridis", vmin=0, vmax=top)
        axes[row, t].set_xticks([])
        axes[row, t].set_yticks([])
        axes[0, t].set_title(f"type {t}", fontsize=8)
    axes[row, 0].set_ylabel(f"to class {k}", fontsize=9)
fig.suptitle(f"Couplings after 3 iterations, per capsule type (colour 0 to {top:.2f}; "
             f"uniform is {1 / config.num_classes:.2f})")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Summary
#
# - The winning digit capsule alone lets the decoder redraw the digit: its 16 numbers encode how
#   it is drawn, not only which digit it is.
# - Moving one dimension by ±0.25 (Figure 4 of the paper) changes one property of the drawing
#   smoothly - stroke width, slant, width, one part of the digit - for many, not all, dimensions.
# - `capsedu.explore.widgets.perturbation_explorer` and `routing_explorer` make both experiments live;
#   `perturbation_grid` is the static version. Computations that do not depend on a slider
#   (capsules, $\hat{\mathbf u}$) are done once per image.
# - Routing concentrates each primary capsule's vote on the digit capsule it agrees with; on
#   misclassified digits the agreement is weaker and can favour the wrong class.

# %% [markdown]
# ## What's next
#
# You have built, trained and looked inside a Capsule Network. Go back to lesson 03's routing
# slider with the shipped network, train the paper's configuration on a GPU (lesson 06,
# *Explore*), or read on: *Matrix capsules with EM routing* (Hinton, Sabour & Frosst, 2018) replaces
# vectors by 4×4 pose matrices and routing by agreement by an EM procedure.
