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
# # Lesson 12 — Beyond iterative routing: self-attention capsules, and three routers on one bench
#
# Dynamic routing (lesson 03) and EM routing (lesson 11) both *iterate*: the couplings depend on
# the output, the output on the couplings, and the loop runs a fixed number of times. In 2021
# Mazzia, Salvetti & Chiaberge ("Efficient-CapsNet: Capsule Network with Self-Attention Routing")
# dropped the loop. Their **self-attention routing** compares the predictions for an output
# capsule *with each other* and computes the couplings in one pass; with depthwise primary
# capsules and a new squash, their network has 161,824 parameters — 2 % of the 2017 CapsNet's
# 8.2 million — and a higher MNIST accuracy.
#
# In this lesson you build the new squash and self-attention routing, check them against
# `capsedu`, train Efficient-CapsNet briefly and load the shipped one, look at what its routing
# does on a real digit, and then put the course's four networks — dynamic routing, EM routing,
# self-attention and the CNN baseline — side by side: same data, same machine, one benchmark.
# Three routers, not all of them: variational-Bayes routing (Ribeiro et al. 2020), inverted
# dot-product attention routing (Tsai et al. 2020) and the stacked capsule autoencoders' set-based
# parts (Kosiorek et al. 2019) are left out, and so is a network trained with no routing at all -
# whose case is stronger than it sounds: Paik, Kwak and Kim (2019, *Capsule Networks Need an
# Improved Routing Algorithm*) found that uniform couplings lose little, and Exercise 1 tests
# that on this lesson's network, trained briefly with and without its attention.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can
#
# - write Efficient-CapsNet's squash, $(1 - e^{-\lVert s\rVert})\,s/\lVert s\rVert$, and say how it
#   differs from Eq. 1 near zero;
# - write **self-attention routing**, Efficient-CapsNet's one-pass router, from its description,
#   and check it;
# - explain how it differs from Procedure 1: no iterations, and agreement *between predictions*
#   instead of agreement with the output;
# - read a comparison of routing methods measured on one bench — parameters, accuracy on clean,
#   affNIST-like and rotated digits, training time, inference speed, memory — and say what it
#   does and does not show.
#
# ## Prerequisites and time
#
# Lessons 03 (dynamic routing), 08 (the CNN baseline and the transformed test sets) and 11 (EM
# routing). Scaled dot-product attention, if you know it, will look familiar. About 45 minutes,
# of which the computations take under 2 minutes on two CPU cores: the networks are shipped, the
# lesson trains only briefly.

# %%
# %matplotlib inline
import dataclasses
import math

import matplotlib.pyplot as plt
import torch

import capsedu
from capsedu.course.checks import yours_or_reference
from capsedu.course.checks.efficient import check_self_attention, check_uniform_couplings, uniform_routing
from capsedu.explore.critique import coupling_spread
from capsedu.nets.efficient_capsnet import EfficientCapsNet
from capsedu.nets.self_attention import efficient_squash, self_attention_routing
from capsedu.zoo.shipped import study
from capsedu.zoo.recipes import RECIPES
from capsedu.zoo.train import recipe_network, train_recipe

# %%
capsedu.set_seed(0)
test_digits = capsedu.load_mnist("test", download=False, verbose=False)
train_digits = capsedu.load_mnist("train", download=False, verbose=False)
print(f"{len(train_digits):,} training digits; {len(test_digits):,} test digits ({test_digits.source})")

# %% [markdown]
# ## Build it
#
# ### A different squash
#
# Eq. 1 of 2017 scales a vector to length $\lVert s\rVert^2 / (1 + \lVert s\rVert^2)$. Efficient-CapsNet
# uses $1 - e^{-\lVert s\rVert}$ instead, keeping the direction:
#
# $$\mathbf v = \Big(1 - \frac{1}{e^{\lVert\mathbf s\rVert}}\Big)\frac{\mathbf s}{\lVert\mathbf s\rVert}.$$

# %%
def squash_by_hand(s, eps=1e-8):
    norm = torch.sqrt((s * s).sum(dim=-1, keepdim=True) + eps)  # (..., 1); eps: no 0/0 at s = 0
    return (1 - torch.exp(-norm)) * s / norm


# %%
lengths_in = torch.linspace(0, 6, 200)
vectors = torch.stack([lengths_in, torch.zeros_like(lengths_in)], dim=1)  # (200, 2) along one axis
fig, ax = plt.subplots(figsize=(6.4, 3.4))
ax.plot(lengths_in, capsedu.squash(vectors).norm(dim=1), label="Eq. 1 (2017): |s|² / (1 + |s|²)")
ax.plot(lengths_in, efficient_squash(vectors).norm(dim=1), label="Efficient-CapsNet: 1 − exp(−|s|)")
ax.plot(lengths_in, lengths_in, ":", color="0.6", lw=1, label="length in = length out")
ax.set(xlabel="length of s", ylabel="length of v", ylim=(0, 1.05), title="Two squashes")
ax.legend(fontsize=8)
plt.show()

# %% tags=["nbval-check-output"]
for length in (0.01, 0.1, 0.5, 1.0, 3.0):
    one = torch.tensor([[length, 0.0]])
    print(f"|s| = {length:4.2f}: Eq. 1 gives {float(capsedu.squash(one).norm()):.4f}, "
          f"Efficient-CapsNet's {float(efficient_squash(one).norm()):.4f}")

# %% [markdown]
# Near zero Eq. 1 is flat — a vector of length 0.1 comes out at 0.0099, so a short capsule's
# gradient is small too — while the new squash starts with slope 1 (0.1 → 0.0952). Both approach
# 1 for long vectors, and the new one lies above Eq. 1 at every length (0.632 at length 1 against
# 0.5, 0.950 at length 3 against 0.9).
#
# ### Self-attention routing, by hand
#
# Take predictions $\hat{\mathbf u}_{j|i}$ (B, I, J, D), as in lesson 03. Procedure 1 finds its
# couplings by agreement with the output, iteration after iteration. Efficient-CapsNet (Mazzia et
# al. 2021, Section 3) finds them in one pass and never looks at the output: for each output
# capsule $j$, each prediction $\hat{\mathbf u}_{j|i}$ is scored by how well it agrees with *the
# other predictions for the same output* — scaled dot products, as in attention, with every
# prediction for $j$ (itself included), divided by $\sqrt D$ and summed. These scores become
# the couplings $c_{ij}$: each input capsule shares itself out over the outputs, as in
# Procedure 1. A learned prior $b_{ij}$ (`prior` in capsedu, (I, J)) is added to each coupling
# after that, and each output capsule is Efficient-CapsNet's squash of its predictions weighted
# by coupling plus prior. There is no loop.
#
# Write `my_self_attention_routing(u_hat, prior)`: predictions (B, I, J, D) and priors (I, J) in;
# the output capsules v (B, J, D) and the couplings c (B, I, J) out (c without the priors), with
# Efficient-CapsNet's squash (`efficient_squash`, or your `squash_by_hand`). Test it on six
# inputs and three outputs, four of whose predictions for output 0 agree:

# %%
generator = torch.Generator().manual_seed(0)
u_hat = torch.randn(1, 6, 3, 4, generator=generator)  # (B, I, J, D): 6 inputs, 3 outputs, 4-D
u_hat[0, :4, 0] = torch.tensor([1.0, 2.0, 0.0, 1.0]) + 0.2 * torch.randn(4, 4, generator=generator)  # 4 agree on output 0
no_prior = torch.zeros(6, 3)  # (I, J): b_ij = 0 for this example


# %% jupyter={"source_hidden": true} tags=["hide-input"]
def my_self_attention_routing(u_hat: torch.Tensor, prior: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention routing: u_hat (B, I, J, D), prior (I, J) -> v (B, J, D), c (B, I, J)."""
    ### BEGIN SOLUTION
    D = u_hat.shape[-1]
    A = torch.einsum("bijd,bkjd->bjik", u_hat, u_hat) / math.sqrt(D)  # (B, J, I, I) one matrix per output
    logits = A.sum(dim=-1).transpose(1, 2)  # (B, I, J): each prediction's summed agreement
    c = torch.softmax(logits, dim=2)  # (B, I, J): over the outputs j
    s = torch.einsum("bij,bijd->bjd", c + prior, u_hat)  # (B, J, D)
    return efficient_squash(s), c
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_self_attention(my_self_attention_routing)

# %% tags=["nbval-check-output"]
attention_routing = yours_or_reference(check_self_attention, my_self_attention_routing, self_attention_routing,
                                       name="my_self_attention_routing")

# %% [markdown]
# ## Check it
#
# What you wrote, as equations (Mazzia et al. 2021, Section 3):
#
# $$A_{j,ik} = \frac{\hat{\mathbf u}_{j|i}\cdot\hat{\mathbf u}_{j|k}}{\sqrt D},\qquad
#   c_{ij} = \operatorname{softmax}_j\Big(\sum_k A_{j,ik}\Big),\qquad
#   \mathbf s_j = \sum_i (c_{ij} + b_{ij})\,\hat{\mathbf u}_{j|i},\qquad
#   \mathbf v_j = \operatorname{squash}(\mathbf s_j).$$
#
# A prediction that many others agree with gets a large row sum of $A_j$, and so a large share
# of its input capsule. Both pieces against `capsedu.nets.self_attention`, on the six inputs
# above:

# %% tags=["nbval-check-output"]
s = torch.randn(4, 10, 16)
assert torch.allclose(squash_by_hand(s), efficient_squash(s))
print("squash_by_hand equals capsedu's efficient_squash ✅")
v_mine, c = attention_routing(u_hat, no_prior)
v_capsedu, c_capsedu = self_attention_routing(u_hat, no_prior)
assert torch.allclose(v_mine, v_capsedu, atol=1e-6) and torch.allclose(c, c_capsedu, atol=1e-6)
print("attention_routing equals capsedu's self_attention_routing ✅")
print("couplings of the 6 inputs (rows) to the 3 outputs (columns):")
print(c[0].numpy().round(3))
print("output lengths:", v_capsedu[0].norm(dim=-1).numpy().round(3))

# %% [markdown]
# Inputs 0–3, whose predictions for output 0 agree, send all of themselves there (1.000). Inputs 4
# and 5 predict at random; they go mostly to output 2 (0.988 and 0.671), where their predictions
# happen to agree best with the others'. Output 2's capsule comes out long as well (0.985 against
# output 0's 1.000): the new squash saturates quickly (length 3 already gives 0.95), so a long sum
# of disagreeing predictions is not told apart from an agreeing one by its length alone.
#
# The softmax runs over the output capsules $j$, as Procedure 1's does: each input capsule
# divides itself among the outputs. Over the inputs instead — the mistake lesson 03 met in the
# labml implementation of Procedure 1 — each output would share itself among the inputs, and a
# lone input would get all of an output. The $1/\sqrt D$ keeps the logits' size independent of
# the capsule dimension, as in scaled dot-product attention. The priors are added after the
# softmax, as in the authors' code (the paper calls them log priors).
#
# The I × I matrix is never needed: $\sum_k A_{j,ik} = \hat{\mathbf u}_{j|i}\cdot\sum_k
# \hat{\mathbf u}_{j|k} / \sqrt D$ — a prediction's agreement with the **sum of all predictions**
# for that output. `capsedu` computes it that way (I dot products per output instead of I²):

# %% tags=["nbval-check-output"]
D = u_hat.shape[-1]
logits = (torch.einsum("bijd,bkjd->bjik", u_hat, u_hat) / math.sqrt(D)).sum(dim=-1).transpose(1, 2)  # (B, I, J)
with_sum = (u_hat * u_hat.sum(dim=1, keepdim=True)).sum(dim=-1) / math.sqrt(D)  # (B, I, J)
print("row sums of A equal the agreement with the summed predictions:", torch.allclose(logits, with_sum, atol=1e-5))

# %% [markdown]
# ### How it differs from Procedure 1
#
# Procedure 1's first iteration measures almost the same thing — each prediction's agreement with
# $\mathbf v_j$ = squash of the *uniformly weighted* sum — and then updates the couplings and
# goes round again. Self-attention routing stops after that one comparison, scales it by
# $1/\sqrt D$, and has no output in the loop: the couplings depend only on the predictions.
# Side by side on the same predictions:

# %% tags=["nbval-check-output"]
for iterations in (1, 2, 3):
    _, c_dynamic = capsedu.dynamic_routing(u_hat, iterations)
    print(f"Procedure 1, {iterations} iteration(s): inputs 0-3 -> output 0 "
          f"{c_dynamic[0, :4, 0].numpy().round(3)}")
print(f"self-attention, one pass:        inputs 0-3 -> output 0 {c[0, :4, 0].numpy().round(3)}")

# %% [markdown]
# With one iteration Procedure 1 has uniform couplings (1/3): its first comparison only takes
# effect in the next. Self-attention's single pass already concentrates them, more sharply than
# three iterations of Procedure 1 here — because its logits grow with the *sum* of the predictions
# (their scale is not squashed away), not because it is a better clustering. On other
# predictions the order can differ; the point is the structure: one comparison, no feedback.
#
# ## Use capsedu
#
# `capsedu.nets.efficient_capsnet.EfficientCapsNet` is the paper's MNIST network: four
# convolutions with batch normalisation, a **depthwise** 9 × 9 convolution that turns each of the
# 128 channels into one number — 16 primary capsules of 8 dimensions, squashed — and the class
# capsules by self-attention routing. The decoder of lesson 05 is attached for the reconstruction
# loss, as in the paper; it is not counted in the paper's 161,824.

# %% tags=["nbval-check-output"]
efficient = EfficientCapsNet()
parts = {"convolutions": efficient.convolutions, "primary (depthwise)": efficient.primary,
         "class capsules (W, prior)": efficient.class_caps, "decoder": efficient.decoder}
for name, part in parts.items():
    print(f"{name:25s} {sum(p.numel() for p in part.parameters()):>9,}")
print(f"{'without the decoder':25s} {efficient.classifier_parameters():>9,}")
print("primary capsules:", tuple(efficient.encode(torch.rand(2, 1, 28, 28)).shape), "(B, I, D_in)")

# %% [markdown]
# ### Train it for a moment
#
# The shipped recipe (`RECIPES["efficient"]`: batch 32, 2-pixel shifts, one-cycle Adam peaking at
# 3e-3), shortened to 3 epochs of 4,000 training digits:

# %%
n_train = capsedu.choose(learner=4_000, fast=256)
recipe = dataclasses.replace(RECIPES["efficient"], epochs=capsedu.choose(learner=3, fast=1))
model, history = train_recipe(recipe, train_digits.subset(n_train, seed=0), progress=False)
few = test_digits.subset(capsedu.choose(learner=2_000, fast=200), seed=0)
quick = capsedu.evaluate(model, torch.utils.data.DataLoader(few, batch_size=128))
seconds = sum(history["train_seconds"])
print(f"{recipe.epochs} epoch(s) on {n_train:,} images in {seconds:.0f} s "
      f"({recipe.epochs * n_train / seconds:.0f} images/s): train accuracy "
      f"{history['train_accuracy'][-1]:.1%}, test accuracy {quick['accuracy']:.1%} on {len(few):,} test images")

# %% [markdown]
# ### The shipped network

# %%
shipped = capsedu.pretrained("efficient")
metrics = capsedu.pretrained_metrics("efficient")
measured = capsedu.evaluate(shipped, torch.utils.data.DataLoader(few, batch_size=128))
print(f"{shipped.classifier_parameters():,} parameters without the decoder; {metrics['epochs']} epochs in "
      f"{metrics['train_wall_seconds'] / 60:.1f} min ({metrics['train_images_per_second']:.0f} images/s, "
      f"load average {metrics['load_average_before'][0]:.1f} before, {metrics['load_average_after'][0]:.1f} after)")
print(capsedu.shipped_summary("efficient"))
print(f"measured now: {measured['accuracy']:.2%} on {len(few):,} test images")
reached = metrics["time_to_98.5"]
print(f"98.5 % on validation first reached after epoch {reached['epoch']} ({reached['train_seconds']:.0f} s "
      "of training)" if reached else "98.5 % on validation never reached")

# %% [markdown]
# The shipped network names **99.55 %** of the 10,000 official test digits after 4 epochs on the
# 55,000 digits of the train split (training time and rate printed above; 98.5 % on validation
# already after epoch 1). That is the best clean accuracy in the course, but shared: dynamic
# routing and the CNN also reach 99.55 % (table below), so the three are tied. The paper reports
# 99.84 % (0.16 % error) after training on all 60,000 digits for far longer (the authors' code
# runs 150 epochs); ours saw nearly as many digits but for 4 epochs, and its gap to the paper is a
# little larger than dynamic routing's to Sabour et al.'s 99.75 % (table below).

# %% [markdown]
# ## Explore
#
# ### What the routing does on a real digit
#
# The couplings of the shipped network for one test digit: 16 primary capsules (rows) and 10
# classes (columns). Each row sums to 1.

# %%
digit, label = test_digits.images[:1], int(test_digits.labels[0])
with torch.no_grad():
    out = shipped(digit, return_couplings=True)
fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.6), gridspec_kw={"width_ratios": [1, 2.2]})
axes[0].imshow(digit[0, 0], cmap="gray_r")
axes[0].set(title=f"test image 0 (a {label})", xticks=[], yticks=[])
image = axes[1].imshow(out.couplings[0], cmap="viridis", vmin=0, vmax=1, aspect="auto")
axes[1].set(xlabel="class j", ylabel="primary capsule i", xticks=range(10), yticks=range(0, 16, 3),
            title="self-attention couplings c_ij")
fig.colorbar(image, ax=axes[1], label="c_ij (each row sums to 1)")
plt.tight_layout()
plt.show()
print("class capsule lengths:", out.lengths[0].numpy().round(3))
print(f"couplings to class {label}: from {float(out.couplings[0, :, label].min()):.2f} to "
      f"{float(out.couplings[0, :, label].max()):.2f}; to the other classes at most "
      f"{float(out.couplings[0][:, torch.arange(10) != label].max()):.2f}")

# %% [markdown]
# The network names class 7 (length 0.99; every other class is below 0.1), and most primary
# capsules send their largest share to class 7 — but not every one: the couplings to class 7 run
# from 0.07 to 0.94, so the weakest capsules (the top rows of the figure) give class 7 less than a
# uniform share and spread themselves over all ten classes, none of which gets more than 0.14 from
# any capsule. One pass was enough: the predictions for class 7 agree with each other, the
# predictions for the other classes do not.
#
# ### Three routers and a CNN on one bench
#
# `benchmarks/compare_networks.py` measured the four shipped single-digit networks in one run on
# this machine: each trained by its own recipe on the same 55,000 digits of the train split, for
# few epochs (printed below: four to fifteen) — far shorter
# than the papers. The published column is what the papers (for EM routing, a reference port) report
# after training on all 60,000 digits, for far longer. The last lines print the same bench's clean
# accuracies when every network learned from 4,000 digits.

# %%
comparison = study("comparison")
rows = comparison["rows"]
print(f"{comparison['test_data']['images']:,} test images; load average "
      f"{comparison['load_average'][0][0]:.2f} before, {comparison['load_average'][1][0]:.2f} after\n")
print(f"{'network':42s} {'params':>9s} {'no dec.':>8s} {'clean':>7s} {'affNIST':>8s} {'rot ±45':>8s} "
      f"{'train':>9s} {'img/s':>6s} {'memory':>8s}")
for row in rows.values():
    print(f"{row['network']:42s} {row['parameters']:>9,} {row['parameters_without_decoder']:>8,} "
          f"{row['clean']:7.2%} {row['affnist_like']:8.2%} {row['rotated_45']:8.2%} "
          f"{row['train_minutes']:6.1f} min {row['inference_images_per_second']:6.0f} "
          f"{row['peak_training_mib']:5.0f} MiB")
print()
for name, row in rows.items():
    print(f"published, {name}: {row['published']}")

earlier = study("comparison_4000")["rows"]  # the same bench when every network learned from 4,000 digits
n_compared = comparison["test_data"]["images"]
print("\nclean test accuracy (± standard error), 4,000 training digits -> 55,000:")
for name, row in rows.items():
    if name in earlier:
        print(f"{name:10s} {capsedu.with_error(earlier[name]['clean'], n_compared)}"
              f" ({earlier[name]['train_epochs']} epochs) -> {capsedu.with_error(row['clean'], n_compared)}"
              f" ({row['train_epochs']} epoch{'s' * (row['train_epochs'] != 1)})")
print("\ndynamic routing against the CNN on transformed digits, 4,000 training digits and 55,000:")
for key, label in (("affnist_like", "affNIST-like"), ("rotated_45", "rotated ±45°")):
    for digits, table in (("4,000", earlier), ("55,000", rows)):
        print(f"{label:13s} {digits:>6s}: " + capsedu.compare_accuracies(
            "dynamic routing", table["capsnet"][key], n_compared, "CNN", table["cnn"][key], n_compared))

print("\neach column against its leader (rotated: the mean of two 10,000-image sets, counted as 10,000):")
for key, label in (("clean", "clean"), ("affnist_like", "affNIST-like"), ("rotated_45", "rotated ±45°")):
    leader = max(rows, key=lambda name: rows[name][key])
    for name in rows:
        if name != leader:
            print(f"{label:13s} {leader} vs {name}: " + capsedu.compare_accuracies(leader, rows[leader][key], n_compared,
                                                                name, rows[name][key], n_compared))

# %%
names = list(rows)
short = {"capsnet": "dynamic routing", "em": "EM routing", "efficient": "self-attention", "cnn": "CNN"}
fig, axes = plt.subplots(1, 3, figsize=(13, 4.6))
for offset, (key, label_text) in enumerate((("clean", "clean"), ("affnist_like", "affNIST-like"),
                                            ("rotated_45", "rotated ±45°"))):
    bars = axes[0].bar([k + 0.27 * (offset - 1) for k in range(len(names))],
                       [100 * rows[n][key] for n in names], width=0.27, label=label_text)
    axes[0].bar_label(bars, fmt="%.1f", fontsize=8, padding=2, rotation=90)
axes[0].set(xticks=range(len(names)), ylabel="test accuracy (%)", ylim=(0, 120))  # bars start at 0
axes[0].set_xticklabels([short[n] for n in names], rotation=20, ha="right", fontsize=10)
axes[0].legend(fontsize=9, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
n_compared = comparison["test_data"]["images"]
clean = [100 * rows[n]["clean"] for n in names]
for n, y in zip(names, clean):
    axes[1].errorbar(rows[n]["parameters_without_decoder"], y, fmt="o", capsize=3,
                     yerr=100 * capsedu.standard_error(rows[n]["clean"], n_compared))
    below = n in ("cnn", "efficient")  # level with dynamic routing's point: their labels go underneath
    axes[1].annotate(short[n], (rows[n]["parameters_without_decoder"], y), fontsize=10,
                     xytext=(6, -14 if below else 4), textcoords="offset points")
axes[1].set(xscale="log", xlim=(4e4, 8e6), ylim=(min(clean) - 0.4, min(100, max(clean) + 0.3)),
            xlabel="parameters without the decoder", ylabel="clean accuracy (%), ± 1 standard error",
            title="Clean accuracy against size")
axes[2].barh([short[n] for n in names], [rows[n]["train_minutes"] for n in names], color="tab:gray")
axes[2].set(xlabel="training time of the shipped recipe (min)", title="Training time here")
plt.tight_layout()
plt.show()

# %% [markdown]
# What the table shows, on this bench:
#
# - **Clean digits.** Efficient-CapsNet (161,824 parameters without its decoder), dynamic
#   routing and the CNN name the same 99.55 % (± 0.07) of the test digits: a tie, with gaps of
#   0.00 points. EM routing, trained ten epochs, is behind them (99.23 ± 0.09 %, 2.9 standard
#   errors behind dynamic routing).
# - **Transformed digits.** No capsule network is measurably more robust than the CNN: on the
#   affNIST-like set dynamic routing (98.14 %) and Efficient-CapsNet (98.02 %) are each within two
#   standard errors of the CNN (98.28 %) — ties — and EM routing is behind (97.31 %). Rotated
#   by ±45°, none gets much more than half the digits right: dynamic routing (57.87 %) and the CNN
#   (57.01 %) are tied; Efficient-CapsNet (56.43 %) is 2.1 standard errors behind dynamic routing,
#   just past the line, and EM routing far behind (53.32 %). The paper's affNIST result (79 %
#   against 66 %) came from a different protocol — all 60,000 digits placed anywhere on a
#   40 × 40 canvas for training, the real affNIST for testing — which lesson 08 discusses.
# - **Cost.** EM routing has the fewest parameters (68,444) and costs the most: the longest
#   training in the table (78.7 minutes for ten epochs, where the others took 11.8 to 17.7 for
#   four to fifteen), by far
#   the slowest inference, and the most memory to train even at its batch of 16 (the others use
#   32) — read the train, img/s and memory columns. Among the other three, dynamic routing was the
#   fastest at inference in this run and Efficient-CapsNet the slowest; such rates depend on the
#   machine and its load, so compare them only within one run. Efficient-CapsNet's training took
#   less time than dynamic routing's or the CNN's, but in 4 epochs against their 15: each of its
#   epochs took longer — read the train column against the epochs printed under the table (the
#   trainings ran at different times, under different loads).
# - **4,000 → 55,000 digits.** With about 14 times more training digits, all four networks gained
#   on clean digits, in fewer epochs (last lines of the table), EM routing among them
#   (97.92 % → 99.23 %, in ten epochs instead of 32). The three others were within two standard errors of each
#   other on 4,000 digits, and still are, now at the same 99.55 %. On transformed digits the
#   verdict moved: with 4,000 digits dynamic routing was behind the CNN on the affNIST-like set
#   and rotated by ±45°, by more than two standard errors; now the two tie on both (printed
#   above). With more data the capsule network caught up with the CNN; it did not pull ahead.
# - **Published figures** are higher for dynamic routing and Efficient-CapsNet, from nearly the
#   same number of digits trained far longer; EM routing's 99.23 % ties with the port's 99.1 %; Sabour et al.'s much larger baseline CNN (99.61 %) is within two
#   standard errors of ours (99.55 ± 0.07 %), a tie. The papers' order on clean digits —
#   Efficient-CapsNet, dynamic routing, the CNN — cannot show here, where the three are tied; EM
#   routing is behind dynamic routing here by about half as much (0.32 ± 0.11 points) as in the
#   published figures (99.1 % against 99.75 %).
#
# ### What are capsules good for?
#
# On clean MNIST, by this bench: **a CNN of the CapsNet's size does as well** (the table above;
# lesson 08 adds transformed digits, lesson 09 overlapping ones). What the capsules gave that the
# CNN did not, in this course, is something to read rather than a score: an explicit, decodable
# pose per class (lesson 07), class-wise reconstruction that pulls overlapping digits apart
# (lesson 09), routing you can inspect. Whether more holds — on harder images, under adversarial
# attack, in deeper capsule stacks — is not argued here: lesson 13 measures it on these networks.

# %% [markdown]
# ### How much does routing depend on the image?
#
# If routing adapted to each image, its couplings would change from digit to digit; if it were
# nearly static, they would hardly move. The coupling spread is the standard deviation of each
# $c_{ij}$ across 500 test digits, averaged over $i$ and $j$
# (`capsedu.explore.critique.coupling_spread`), set beside the mean coupling $1/J$:

# %%
sample = few.images[:500]
with torch.no_grad():
    attention_c = shipped(sample, return_couplings=True).couplings  # (N, 16, J)
    dynamic = capsedu.pretrained("capsnet")
    dynamic_c = dynamic(sample, return_couplings=True).couplings  # (N, 288, J), after 3 iterations
for name, c in (("self-attention (Efficient-CapsNet)", attention_c), ("dynamic routing, r = 3", dynamic_c)):
    print(f"{name:36s} coupling spread across {len(sample)} digits {float(coupling_spread(c)):.4f}; "
          f"mean coupling {float(c.mean()):.3f} (uniform 1/J = {1 / c.shape[2]:.3f})")

# %% [markdown]
# Self-attention's couplings move from digit to digit by 0.1080 on average, as much as the mean
# coupling itself (0.100): this routing is far from static. Dynamic routing's, after its three
# iterations, move by 0.0071, under a tenth of the mean: close to a fixed, learned weighting - the
# "near-static routing" that Mitterreiter et al. (2023, *Why Capsule Neural Networks Do Not
# Scale*) measure on larger capsule networks. The two averages are not of like things: 160
# couplings of 16 capsules that each see the whole digit, against 2,880 couplings of 288 capsules
# that each see a patch, many of them empty background. What the spread shows is how each routing
# behaves, not which routes better.

# %% [markdown]
# ### Ideas to try
#
# - Train the shortened recipe above without the learned priors (`shipped.class_caps.prior`
#   frozen at zero: `model.class_caps.prior.requires_grad_(False)` before training): do they
#   matter?
# - Swap `efficient_squash` for Eq. 1 in the primary capsules of a fresh `EfficientCapsNet`
#   (subclass it and override `encode`) and train 3 epochs: does the slope near zero matter?
# - Train a CNN of Efficient-CapsNet's size with the same recipe: `CNNConfig(channels=(32, 48, 64),
#   pool=(True, True, True), hidden=(64, 32))` has about 155,000 parameters
#   (`dataclasses.replace(RECIPES["cnn"], config=...to_dict())`). Does it reach 99 %?
# - Repeat Exercise 1 with all 55,000 training digits and the shipped recipe's 4 epochs: does
#   the gap between attention and uniform couplings grow or shrink with training?
# - Rerun `benchmarks/compare_networks.py --images 1000 --no-readme --out /tmp/c.json` on your
#   machine: which figures change, and which ratios stay?

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: does Efficient-CapsNet need its attention?
#
# Paik, Kwak & Kim (2019) trained capsule networks with uniform couplings and found that they
# lost little. Test it here: train the network of *Train it for a moment* again — the same recipe,
# digits and seed — with its class layer's attention switched off. Every coupling is then
# $c_{ij} = 1/J$; the priors $b_{ij}$ are still added and learned, and the sum is squashed with
# Efficient-CapsNet's squash.
#
# Write `uniform_capsules(u_hat, prior)`: predictions (B, I, J, D) and priors (I, J) in, the class
# capsules (B, J, D) out. The cell after the check trains the uniform network (about as long as
# `model` took above) and compares the two on the same test digits. Predict first: should a
# network that cannot route lose much, here?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def uniform_capsules(u_hat: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """Class capsules (B, J, D) with couplings 1/J + prior instead of the attention's."""
    ### BEGIN SOLUTION
    weights = 1 / u_hat.shape[2] + prior  # (I, J)
    return efficient_squash(torch.einsum("ij,bijd->bjd", weights, u_hat))  # (B, J, D)
    ### END SOLUTION


# %% tags=["nbval-check-output"]
_ = check_uniform_couplings(uniform_capsules)

# %%
uniform = yours_or_reference(check_uniform_couplings, uniform_capsules, uniform_routing, name="uniform_capsules")


class UniformCouplings(torch.nn.Module):
    """Efficient-CapsNet's class layer with the attention switched off: couplings 1/J, W and priors learned."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.layer = layer  # the SelfAttentionCaps whose W and prior it trains

    def forward(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u_hat = self.layer.prediction_vectors(u)  # (B, I, J, D)
        c = u_hat.new_full(u_hat.shape[:3], 1 / u_hat.shape[2])  # (B, I, J)
        return uniform(u_hat, self.layer.prior), c  # (B, J, D), (B, I, J)


flat_model = recipe_network(recipe)  # the same initial weights as model's
flat_model.class_caps = UniformCouplings(flat_model.class_caps)
flat_model, flat_history = train_recipe(recipe, train_digits.subset(n_train, seed=0), model=flat_model, progress=False)
flat = capsedu.evaluate(flat_model, torch.utils.data.DataLoader(few, batch_size=128))
print(f"{recipe.epochs} epoch(s) on {n_train:,} images each, tested on {len(few):,} digits:")
print(f"  trained with self-attention routing: {capsedu.with_error(quick['accuracy'], len(few))}")
print(f"  trained with uniform couplings:      {capsedu.with_error(flat['accuracy'], len(few))}")
print(capsedu.compare_accuracies("attention", quick["accuracy"], len(few), "uniform", flat["accuracy"], len(few)))
print(f"training loss in the last epoch: attention {history['train_loss'][-1]:.4f}, uniform "
      f"{flat_history['train_loss'][-1]:.4f}")

# %% [markdown]
# Trained alike, the network with uniform couplings names 98.10 % of the 2,000 test digits and the
# one with attention 98.30 %: a tie (printed above). Its training loss ends higher (0.0891 against
# 0.0599): the attention helps the network fit its training digits, but at this budget that does
# not show on digits it has not seen. That is what Paik, Kwak & Kim found: with the transformation
# matrices and the priors learned, the routing itself adds little that a fixed weighting cannot
# learn. The couplings vary a lot from digit to digit (*How much does routing depend on the
# image?*), yet varying is not the same as being needed. One short run of each cannot see a gap
# smaller than about two of its standard errors; *Ideas to try* repeats it with the full recipe.
# Swapping uniform couplings into the shipped network at test time would measure something else:
# a network asked to work with couplings it never trained with.

# %% [markdown]
# ## Summary
#
# - Efficient-CapsNet's squash, $(1 - e^{-\lVert s\rVert})\,s/\lVert s\rVert$, keeps the direction
#   and, unlike Eq. 1, rises with slope 1 at zero.
# - **Self-attention routing** compares every prediction for an output with all the others
#   ($A_j = \hat U_j\hat U_j^\top/\sqrt D$), turns each prediction's summed agreement into
#   couplings with a softmax over the output capsules, adds learned priors and squashes — one pass,
#   no iterations, no feedback from the output. The summed agreement is the agreement with the sum
#   of the predictions, so the I × I matrix is never needed.
# - The shipped Efficient-CapsNet (161,824 parameters without its decoder, 4 epochs on the 55,000
#   train-split digits) names 99.55 % of the official test digits. Whether its attention is worth
#   anything is a question for training, not for test time: Exercise 1 trains the same network
#   with uniform couplings.
# - On one bench, Efficient-CapsNet, dynamic routing and the CNN are tied on clean digits; the CNN
#   is as robust as the best capsule network to affNIST-like and rotated digits; EM routing,
#   trained ten epochs, is behind on every accuracy column, and is the smallest and by far the
#   slowest and hungriest.

# %% [markdown]
# ## Self-check
#
# Four questions on self-attention routing; click an answer to see whether it is right and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("12")

# %% [markdown]
# ## What's next
#
# Lesson 13, the last: the course's networks under pressure. Fashion-MNIST's harder images,
# adversarial attacks (FGSM by hand, PGD, and a check for gradient masking), and the critique that
# capsule networks do not scale — near-static routing, starving capsules, deeper stacks — each
# answered by measuring, with the tools of lessons 03–12.
