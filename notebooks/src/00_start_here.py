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
# # Lesson 00 — Start here
#
# This course teaches **Capsule Networks** — the network of Sabour, Frosst & Hinton,
# *Dynamic Routing Between Capsules* (NeurIPS 2017) — by building one in PyTorch, piece by piece.
# In this first lesson you learn how the course works, check that your environment is ready, and
# meet the one idea everything else rests on. A *capsule* is a group of neurons whose output is a
# **vector**: the vector's **length** says how likely it is that an entity (a stroke, an eye, a
# digit) is present, and its **direction** encodes the entity's *pose* (position, angle, size,
# thickness...). You will build a tiny layer of capsules by hand from the pixels of a real MNIST
# digit. Then you will see why a network that max-pools over the whole image cannot tell a face
# from a scrambled face, while parts that predict where the face should be can.

# %% [markdown]
# ## Learning objectives
#
# After this lesson you can:
#
# - find your way around the course (lesson map, exercises, checks, the `capsedu` package);
# - confirm that Python, PyTorch and the MNIST data work on your machine;
# - explain what the length and the direction of a capsule's vector stand for;
# - describe a capsule network as *inverse graphics*: from pixels back to the parameters of the
#   parts that drew them;
# - explain what max-pooling throws away about where the parts are, and why that matters;
# - measure how well parts *agree* about the whole they belong to.

# %% [markdown]
# ## Prerequisites and time
#
# **You need:** Python and NumPy basics, PyTorch tensors and `nn.Module`, and what a convolution
# does. No earlier lesson. **Time:** about 30 minutes.
#
# ### How to use this course
#
# - **On your own in JupyterLab.** In the course's folder, `make lab` installs everything (first
#   time only) and opens JupyterLab on **your workspace** at this lesson: `workspace/NN_name.ipynb`
#   are your copies of the lessons, to run and change; `workspace/worked/NN_name.worked.ipynb` are the
#   complete lessons, read-only, to compare with. Open the lessons in order and run the cells top
#   to bottom (Shift-Enter). Every lesson runs on its own: no state is carried between notebooks.
#   From lesson 01 on, each lesson follows the same path: **Build it** (you write the piece the
#   lesson is named for), **Check it** (against the reference in `capsedu`), **Use capsedu**
#   (later lessons import the tested version), **Explore**, **Exercises**, and a short
#   **Self-check** of multiple-choice questions.
# - **Your code.** In your copy the Build-it piece and each exercise are stubs — `# YOUR CODE
#   HERE` and `raise NotImplementedError` — for you to fill in. The cell after each runs a *check*
#   that prints "✅ ok" or "❌ not yet" with a specific hint about what is probably wrong ("still
#   the stub" until you start). Until your Build-it piece passes, the lesson goes on with `capsedu`'s
#   version and prints one line to say so; once it passes, the rest of the lesson runs on yours.
#   So "Run all" works from the start. The worked lesson, and the website, hold the reference
#   solution folded away: the cell shows as a thin bar with "…" in JupyterLab, a "Click to show"
#   button on the website. Try first.
# - **Handouts.** For a class, `make student` (or `python -m coursetools.handouts`) writes the
#   same stubbed copies of every lesson to `build/student/`, with no outputs.
# - **In a classroom.** An instructor can project a lesson and let students run their own copies;
#   the **Explore** and **Exercises** sections are natural places for pair work. Setting
#   `CAPSEDU_FAST=1` before starting JupyterLab runs every lesson on small data and few epochs
#   (handy to rehearse a class); without it each lesson runs its real, learner-sized version.
# - **As a book.** Every notebook is stored with its outputs, so it reads well without running
#   anything: on GitHub, in any notebook viewer, or on the course's static Jupyter Book site. The
#   site is built from these same notebooks and offers a download of the whole course (see the
#   README).
# - **How the networks were trained.** The lessons from 02 on load trained networks; how each one
#   was trained (recipe, data, time, validation curve) is on one page, [the training
#   record](training_record.md).
#
# ### The lesson map
#
# | lesson | you build | paper |
# | --- | --- | --- |
# | **00 Start here** | capsules as vectors, by hand | §1 |
# | **01 Squash** | the squashing non-linearity | Eq. 1 |
# | **02 Primary capsules** | conv1 and the primary-capsule layer, shape by shape | §4 |
# | **03 Dynamic routing** | prediction vectors and routing by agreement | Eqs. 2–3, Procedure 1 |
# | **04 Margin loss** | the loss on capsule lengths | Eq. 4 |
# | **05 Decoder** | masking and reconstruction | §4.1, Fig. 2 |
# | **06 Training** | the whole CapsNet, trained on MNIST | §5 |
# | **07 Exploring capsules** | what the 16 dimensions of a trained capsule mean | §5.1, Fig. 4 |
# | **08 CapsNet vs CNN** | a fair baseline, rotated and shifted digits, equivariance | §5.2 |
# | **09 MultiMNIST** | two overlapping digits, recognised and separated | §6, Fig. 5 |
# | **10 Backprop by hand** | the capsule layer's gradients in NumPy | Procedure 1 |
# | **11 EM routing** | matrix capsules and routing by clustering | Hinton et al. 2018 |
# | **12 Beyond routing** | self-attention routing (Efficient-CapsNet); three routers and a CNN on one bench | Mazzia et al. 2021 |
# | **13 Under pressure** | harder images, adversarial attacks (FGSM, the vote attack, each image's worst case), the scaling critique | Hinton et al. 2018, Gu et al. 2021, Mitterreiter et al. 2023 |
#
# ### Check your environment
#
# Run the next cell. It prints the versions, the device PyTorch will use, and which MNIST source
# `capsedu.load_mnist` found: MNIST files under `$CAPSEDU_DATA` (or `~/.cache/capsedu`), a
# download, or — with no network — the 5,000 real MNIST digits that ship with the course.
# (MNIST is by Yann LeCun, Corinna Cortes and Christopher J. C. Burges, under the CC BY-SA 3.0
# licence; the course's figures that show its digits are shared under it too.)

# %%
import platform

# %matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
import torch
import torchvision
import torchvision.transforms.functional as TF

import capsedu
from capsedu.course.checks.start import check_choose_threshold, check_moved_spread
from capsedu.explore.palette import COURSE_STYLE, HATCHES, LINE_STYLES, VERMILLION

plt.style.use(COURSE_STYLE)  # colour-blind-safe colours (Okabe-Ito) and maps (viridis)
device = capsedu.default_device()
print(f"Python       {platform.python_version()}")
print(f"PyTorch      {torch.__version__}")
print(f"torchvision  {torchvision.__version__}")
print(f"capsedu      {capsedu.__version__}")
print(f"device       {device}" + ("" if device.type != "cpu" else " (no GPU: every lesson runs on a CPU)"))
print(f"profile      {'fast (CAPSEDU_FAST=1)' if capsedu.fast_profile() else 'learner (the real one)'}")
train = capsedu.load_mnist("train")
test = capsedu.load_mnist("test")

# %% tags=["nbval-check-output"]
assert tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 0), "PyTorch 2 or newer needed"
assert train.images.shape[1:] == (1, 28, 28) and train.images.dtype == torch.float32
assert 0.0 <= float(train.images.min()) and float(train.images.max()) <= 1.0
assert set(train.labels.tolist()) == set(range(10)) and set(test.labels.tolist()) == set(range(10))
print("environment ready: images are (N, 1, 28, 28) floats in [0, 1], all ten digits present")

# %% [markdown]
# One digit of each class from the training set:

# %% mystnb={"image": {"alt": "Ten handwritten MNIST digits in a row, one of each class from 0 to 9, each titled with its label. They are dark strokes on a white 28 by 28 pixel grid, a first look at the data the course classifies."}}
first_of_class = [int((train.labels == k).nonzero()[0]) for k in range(10)]
fig, axes = plt.subplots(1, 10, figsize=(10, 1.6))
for k, (ax, index) in enumerate(zip(axes, first_of_class)):
    ax.imshow(train.images[index, 0], cmap="gray_r")
    ax.set_title(f"label {k}", fontsize=9)
    ax.axis("off")
fig.suptitle("MNIST: 28×28 grey-level digits", y=1.05)
plt.show()

# %% [markdown]
# ## Build it
#
# ### The capsule idea in pictures
#
# An ordinary neuron outputs one number: "how much of my feature is here". A **capsule** outputs
# a vector $\mathbf v$:
#
# - its **length** $\lVert\mathbf v\rVert \in [0, 1)$ is the probability that the entity is present;
# - its **direction** is the entity's *pose* — here one angle, in a real capsule 8 or 16 numbers
#   (position, rotation, scale, stroke width, skew...).
#
# The picture below is drawn by hand to show what an ideal "digit 4" capsule *should* output (a
# trained one, in lesson 07, learns something similar but messier). When the 4 rotates, the
# capsule's vector rotates with it — the pose is **equivariant** — while its length, the
# presence, stays the same: the detection is **invariant**. When there is no 4, the vector is short.

# %% mystnb={"image": {"alt": "Top row: a handwritten 4 rotated by -40, -20, 0, +20 and +40 degrees, then a 7 with no 4 in it. Below each, the hand-drawn output of an ideal '4' capsule as a vermillion arrow inside a dashed unit circle: for every rotated 4 the arrow keeps length 0.95 and turns with the digit (directions 50, 70, 90, 110, 130 degrees); for the 7 it shrinks to a stub of length 0.08."}}
four = train.images[first_of_class[4]]  # (1, 28, 28)
seven = train.images[first_of_class[7]]  # (1, 28, 28)
angles = [-40, -20, 0, 20, 40]
images = [TF.rotate(four, angle, TF.InterpolationMode.BILINEAR) for angle in angles] + [seven]
poses = [(0.95, 90 + angle) for angle in angles] + [(0.08, 90)]  # hand-made (length, direction °)
titles = [f"4 rotated {angle:+d}°" for angle in angles] + ["a 7: no 4 here"]

fig, axes = plt.subplots(2, 6, figsize=(10, 3.9), gridspec_kw={"height_ratios": [1, 1]})
for col, (image, (length, direction), title) in enumerate(zip(images, poses, titles)):
    axes[0, col].imshow(image[0], cmap="gray_r")
    axes[0, col].set_title(title, fontsize=9)
    axes[0, col].axis("off")
    ax = axes[1, col]
    ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.7", linestyle="--"))
    rad = np.deg2rad(direction)
    ax.annotate("", xy=(length * np.cos(rad), length * np.sin(rad)), xytext=(0, 0),
                arrowprops={"arrowstyle": "-|>", "color": VERMILLION, "lw": 2.5})
    ax.set(xlim=(-1.1, 1.1), ylim=(-1.1, 1.1), aspect="equal", xticks=[], yticks=[])
    ax.set_xlabel(f"length {length:.2f}\ndirection {direction}°", fontsize=9)
axes[1, 0].set_ylabel("'4' capsule\n(unit circle dashed)", fontsize=9)
fig.suptitle("A capsule's length = is a 4 there?   Its direction = the 4's pose (here: its angle)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Inverse graphics
#
# Computer graphics turns a description of parts and their poses into pixels. Hinton's view of
# vision is the reverse, **inverse graphics**: from the pixels, recover which parts are there and
# in which pose. Each capsule does a small piece of that inversion for one kind of entity.
#
# Let us make both directions concrete with the simplest part there is, a **stroke**. The renderer
# below draws a stroke from its pose (centre, angle); the inverse measures, from the pixels alone,
# whether a stroke is present and at which angle. Its presence is the amount of ink $m$, squashed
# into $[0, 1)$ as $(m/k)^2 / (1 + (m/k)^2)$ (lesson 01's *squash*, in one dimension); its angle
# comes from the second moments of the ink, the way one finds the axis of an ellipse.

# %%
def render_stroke(size: int, centre: tuple[float, float], angle_deg: float,
                  half_length: float = 8.0, width: float = 1.2) -> torch.Tensor:
    """Graphics: draw a stroke with the given pose on a (size, size) canvas (rows go down)."""
    rows, cols = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                                torch.arange(size, dtype=torch.float32), indexing="ij")
    x, y = cols - centre[0], centre[1] - rows  # y points up, like the angle
    direction = torch.tensor([np.cos(np.deg2rad(angle_deg)), np.sin(np.deg2rad(angle_deg))])
    along = x * direction[0] + y * direction[1]
    across = -x * direction[1] + y * direction[0]
    inside = (along.abs() <= half_length).float()
    return inside * torch.exp(-0.5 * (across / width) ** 2)  # (size, size) ink in [0, 1]


def stroke_capsules(image: torch.Tensor, cell: int = 4,
                    ink_scale: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse graphics by hand: one 2-D stroke capsule per (cell x cell) patch.

    image (H, W) -> presence (G, G) in [0, 1), angle in degrees (G, G) in (-90, 90].
    """
    grid = image.shape[0] // cell
    patches = image[: grid * cell, : grid * cell].reshape(grid, cell, grid, cell)
    patches = patches.permute(0, 2, 1, 3)  # (G, G, cell, cell)
    rows, cols = torch.meshgrid(torch.arange(cell, dtype=image.dtype),
                                torch.arange(cell, dtype=image.dtype), indexing="ij")
    x, y = cols, -rows  # y points up
    mass = patches.sum(dim=(-2, -1))  # (G, G) the amount of ink
    w = patches / mass.clamp_min(1e-8)[..., None, None]  # (G, G, cell, cell) sums to 1
    mean_x, mean_y = (w * x).sum(dim=(-2, -1)), (w * y).sum(dim=(-2, -1))  # (G, G)
    dx, dy = x - mean_x[..., None, None], y - mean_y[..., None, None]  # (G, G, cell, cell)
    mu20, mu02 = (w * dx * dx).sum(dim=(-2, -1)), (w * dy * dy).sum(dim=(-2, -1))
    mu11 = (w * dx * dy).sum(dim=(-2, -1))
    angle = 0.5 * torch.rad2deg(torch.atan2(2 * mu11, mu20 - mu02))  # (G, G) axis of the ink
    presence = (mass / ink_scale) ** 2 / (1 + (mass / ink_scale) ** 2)  # (G, G)
    return presence, angle


def as_vectors(presence: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """(G, G) lengths and angles -> (G, G, 2) capsule vectors."""
    rad = torch.deg2rad(angle)
    return presence[..., None] * torch.stack([torch.cos(rad), torch.sin(rad)], dim=-1)


# %% [markdown]
# First the round trip on rendered strokes: render with a known angle, then read the angle back
# with one capsule that looks at the whole 28×28 canvas.

# %% mystnb={"image": {"alt": "Four panels, each a single dark stroke rendered on a 28 by 28 canvas at a known angle: -60, -15, +30 and +75 degrees. Reading the pixels back recovers each angle to within a fraction of a degree and gives the same presence for all four strokes: the direction changes, the length does not."}}
true_angles = [-60.0, -15.0, 30.0, 75.0]
canvases = [render_stroke(28, (13.5, 13.5), angle) for angle in true_angles]
recovered = [stroke_capsules(canvas, cell=28, ink_scale=30.0) for canvas in canvases]

fig, axes = plt.subplots(1, 4, figsize=(10, 3.1), layout="constrained")
for ax, canvas, true, (presence, angle) in zip(axes, canvases, true_angles, recovered):
    ax.imshow(canvas, cmap="gray_r")
    ax.set_title(f"graphics: drawn at {true:+.0f}°\ninverse: read {float(angle):+.1f}°,\n"
                 f"presence {float(presence):.2f}", fontsize=9)
    ax.set(xticks=[], yticks=[])
plt.show()

# %% [markdown]
# ### A layer of capsules, by hand
#
# Now apply the same capsule to every 4×4 patch of a real digit: a 7×7 grid of 2-D capsules.
# Each segment is one capsule's vector — long where a stroke passes, short on blank paper, lying
# along the stroke. (A stroke has no head or tail, so the angle lives in $(-90°, 90°]$ and the
# segments are drawn without arrowheads.)

# %% mystnb={"image": {"alt": "Left: a real MNIST 4. Right: the same 4, faded, under a 7 by 7 grid of hand-made stroke capsules, one per 4 by 4 patch, each drawn as a vermillion segment whose length is the presence and whose direction is the stroke angle. Segments are long and lie along the ink, vertical on the two uprights and nearly horizontal along the crossbar, while capsules on blank paper shrink to dots."}}
digit = train.images[first_of_class[4], 0]  # (28, 28)
presence, angle = stroke_capsules(digit)  # (7, 7), (7, 7)
vectors = as_vectors(presence, angle)  # (7, 7, 2)
centres = torch.arange(7) * 4 + 1.5  # pixel coordinates of the patch centres

fig, (ax_img, ax_caps) = plt.subplots(1, 2, figsize=(9, 4.4))
ax_img.imshow(digit, cmap="gray_r")
ax_img.set_title("a real MNIST 4 (28×28 pixels)")
ax_img.axis("off")
ax_caps.imshow(digit, cmap="gray_r", alpha=0.25)
cx, cy = torch.meshgrid(centres, centres, indexing="xy")
ax_caps.quiver(cx, cy, vectors[..., 0], vectors[..., 1], color=VERMILLION, angles="uv",
               scale_units="xy", scale=1 / 3.6, pivot="middle", width=0.012,
               headwidth=0, headlength=0, headaxislength=0)  # a stroke has no head: segments, not arrows
ax_caps.set_title("7×7 hand-made stroke capsules\nsegment length = presence, direction = stroke angle")
ax_caps.set_xticks(centres, [str(i) for i in range(7)])
ax_caps.set_yticks(centres, [str(i) for i in range(7)])
ax_caps.set(xlabel="capsule column", ylabel="capsule row", xlim=(-0.5, 27.5), ylim=(27.5, -0.5))
fig.tight_layout()
plt.show()

# %% [markdown]
# In a CapsNet nothing is hand-made: the primary capsules (lesson 02) are 1,152 vectors of 8
# numbers computed by learned convolutions, and their poses mean whatever training makes useful.
# But they play exactly this role: a grid of "is a part here, and in which pose?" vectors.

# %% [markdown]
# ## Check it
#
# What we claimed for capsules should hold for our hand-made ones. Turn the digit a quarter turn
# (`torch.rot90`, exact on the pixel grid): the grid of capsules must turn with it. Every
# **length** must stay the same (presence is invariant), and every stroke **angle** must change by
# 90° (pose is equivariant; angles of strokes are compared modulo 180°).

# %% tags=["nbval-check-output"]
turned = torch.rot90(digit, 1, dims=(0, 1))  # a quarter turn anticlockwise, (28, 28)
presence_t, angle_t = stroke_capsules(turned)  # (7, 7) each
moved_presence = torch.rot90(presence, 1, dims=(0, 1))  # where each capsule went
moved_angle = torch.rot90(angle, 1, dims=(0, 1))
torch.testing.assert_close(presence_t, moved_presence)
stroke = moved_presence > 0.2  # capsules that see a real stroke
difference = torch.remainder(angle_t - moved_angle + 90.0, 180.0) - 90.0  # in [-90, 90)
assert torch.allclose(difference[stroke].abs(), torch.full_like(difference[stroke], 90.0), atol=1e-3)
assert stroke.sum() >= 5, "the digit should cross several patches"
print("after a quarter turn: every length unchanged, every stroke angle turned by 90°")

# %% [markdown]
# ## Use capsedu
#
# The `capsedu` package holds a tested version of every piece the course builds. Our presence
# formula is `capsedu.squash` applied to one-number capsules — lesson 01 builds it for vectors.

# %%
mass_vector = (digit.reshape(7, 4, 7, 4).sum(dim=(1, 3)) / 3.0).unsqueeze(-1)  # (7, 7, 1) ink
torch.testing.assert_close(capsedu.squash(mass_vector).squeeze(-1), presence)
print("our presence = capsedu.squash(ink / 3) for every capsule")

# %% [markdown]
# And here is where the course is heading: `capsedu.CapsNet`, the paper's network, already
# assembled. Untrained, its outputs mean nothing yet; lesson 06 trains it. Look at the shapes: ten
# digit capsules of 16 numbers each for every image, and their ten lengths.

# %% tags=["nbval-check-output"]
capsedu.set_seed(0)
paper_net = capsedu.CapsNet(capsedu.CapsNetConfig.paper())
with torch.no_grad():
    out = paper_net(train.images[:2])
print(f"parameters:         {sum(p.numel() for p in paper_net.parameters()):,}")
print(f"primary capsules:   {tuple(paper_net.encode(train.images[:2]).shape)}  (B, 1152, 8)")
print(f"digit capsules:     {tuple(out.capsules.shape)}  (B, 10, 16)")
print(f"lengths:            {tuple(out.lengths.shape)}  (B, 10)")
print(f"reconstruction:     {tuple(out.reconstruction.shape)}  (B, 1, 28, 28)")

# %% [markdown]
# ## Explore
#
# ### Why max-pooling loses pose
#
# A convolutional network usually summarises a feature map with **max-pooling**: it keeps the
# strongest response of each window and forgets *where* in the window it was. Pool over the whole
# map - the extreme case, a global max - and a "face" unit only knows that eyes, a nose and a mouth
# are *somewhere*. Let us build that failure with real detectors, and then see what the usual
# local pooling keeps.
#
# We draw a face from three parts, and a scrambled face from the very same parts in the wrong
# places. Each part detector is a convolution with the part's template (normalised
# cross-correlation: 1.0 means a perfect match).

# %%
def part_templates() -> dict[str, torch.Tensor]:
    """Three face parts as small binary images."""
    ring = torch.ones(5, 5)
    ring[1:4, 1:4] = 0
    eyes = torch.zeros(5, 13)
    eyes[:, :5], eyes[:, 8:] = ring, ring
    nose = torch.zeros(6, 3)
    nose[:, 1] = 1
    mouth = torch.zeros(3, 9)
    mouth[2, :] = 1
    mouth[:2, 0], mouth[:2, -1] = 1, 1
    return {"eyes": eyes, "nose": nose, "mouth": mouth}


def draw(parts: dict[str, torch.Tensor], places: dict[str, tuple[int, int]], size: int = 40) -> torch.Tensor:
    """Paste each part with its top-left corner at places[name] = (row, col)."""
    canvas = torch.zeros(size, size)
    for name, (row, col) in places.items():
        h, w = parts[name].shape
        canvas[row:row + h, col:col + w] = torch.maximum(canvas[row:row + h, col:col + w], parts[name])
    return canvas


def detect(image: torch.Tensor, template: torch.Tensor) -> torch.Tensor:
    """Normalised cross-correlation map, (H - h + 1, W - w + 1), 1.0 = perfect match."""
    h, w = template.shape
    patches = torch.nn.functional.unfold(image[None, None], (h, w))[0].T  # (Q, h*w): Q positions
    patches = patches - patches.mean(dim=1, keepdim=True)
    kernel = (template - template.mean()).flatten()
    scores = patches @ kernel / (patches.norm(dim=1) * kernel.norm()).clamp_min(1e-8)  # (Q,)
    return scores.view(image.shape[0] - h + 1, image.shape[1] - w + 1)


parts = part_templates()
face_places = {"eyes": (12, 13), "nose": (18, 18), "mouth": (25, 15)}
scrambled_places = {"eyes": (27, 8), "nose": (14, 30), "mouth": (8, 16)}
scenes = {"face": draw(parts, face_places), "scrambled face": draw(parts, scrambled_places)}
offsets = {name: (20 - row, 20 - col) for name, (row, col) in face_places.items()}  # part -> face centre (20, 20)

# %% [markdown]
# For each scene we record, per part, the **max-pooled** response (what a pooling network keeps)
# and the **pose** — here just the position of the best match (what a capsule keeps). With the
# pose, each part can *predict* where the face's centre should be (knowing where, on a face, that
# part sits). We measure their agreement by the **spread**: the mean distance of the predicted
# centres from their average. That agreement is exactly what dynamic routing (lesson 03) looks for.

# %% mystnb={"image": {"alt": "First: a simple face (two ring eyes, a vertical nose, a horizontal mouth), each part boxed in its own colour and line style (eyes blue, solid; nose vermillion, dashed; mouth green, dotted) with a line to the face centre it predicts; all three predictions fall on one point, spread 0.0 px. Second: the same parts scrambled; their predicted centres land far apart, spread 14.4 px. Third: bar chart of max-pooled detector responses for eyes, nose and mouth, all 1.0 in both scenes (the scrambled face's bars hatched)."}}
def summarise(image: torch.Tensor) -> dict[str, dict]:
    """Per part: pooled score, best position (row, col), predicted face centre."""
    summary = {}
    for name, template in parts.items():
        scores = detect(image, template)
        best = int(scores.argmax())
        row, col = divmod(best, scores.shape[1])
        centre = (row + offsets[name][0], col + offsets[name][1])
        summary[name] = {"pooled": float(scores.max()), "at": (row, col), "centre": centre}
    return summary


def spread(summary: dict[str, dict]) -> float:
    """Mean distance (pixels) of the predicted centres from their average: 0 = full agreement."""
    centres = torch.tensor([part["centre"] for part in summary.values()], dtype=torch.float32)
    return float((centres - centres.mean(dim=0)).norm(dim=1).mean())


summaries = {name: summarise(image) for name, image in scenes.items()}

fig, axes = plt.subplots(1, 3, figsize=(11, 3.9), gridspec_kw={"width_ratios": [1, 1, 1.25]})
for ax, (name, image) in zip(axes, scenes.items()):
    ax.imshow(image, cmap="gray_r")
    for k, (part, info) in enumerate(summaries[name].items()):
        h, w = parts[part].shape
        (row, col), (crow, ccol) = info["at"], info["centre"]
        style = LINE_STYLES[k]  # each part its colour and line style
        ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), w, h, fill=False, color=f"C{k}", lw=2,
                                   linestyle=style))
        ax.plot([col + w / 2 - 0.5, ccol], [row + h / 2 - 0.5, crow], color=f"C{k}", lw=1, linestyle=style)
        ax.plot(ccol, crow, "x", color=f"C{k}", ms=12, mew=3, linestyle=style, label=f"{part} → centre")
    ax.set_title(f"{name}\nspread of predicted centres: {spread(summaries[name]):.1f} px", fontsize=10)
    ax.set(xticks=[], yticks=[])
axes[0].legend(loc="lower left", fontsize=8, framealpha=0.9)
names = list(parts)
pooled = {scene: [summaries[scene][part]["pooled"] for part in names] for scene in scenes}
positions = np.arange(len(names))
for shift, scene, hatch in zip((-0.2, 0.2), scenes, HATCHES):
    axes[2].bar(positions + shift, pooled[scene], width=0.4, hatch=hatch, label=scene)
axes[2].set_xticks(positions, names)
axes[2].set(ylim=(0, 1.25), ylabel="max-pooled detector response",
            title="what max-pooling keeps:\nthe same for both scenes")
axes[2].legend(loc="upper right", fontsize=9)
fig.tight_layout()
plt.show()

# %% tags=["nbval-check-output"]
face, mess = summaries["face"], summaries["scrambled face"]
assert all(abs(face[p]["pooled"] - mess[p]["pooled"]) < 1e-5 for p in parts)  # pooling: identical
assert spread(face) < 0.5 < 5.0 < spread(mess)  # poses: agreement only for the real face
print("max-pooled responses: identical for the face and the scrambled face")
print(f"predicted face centres: agree for the face ({spread(face):.1f} px), "
      f"disagree for the scrambled face ({spread(mess):.1f} px)")

# %% [markdown]
# On the real face the three predicted centres coincide: the three crosses sit on one point, a
# spread of zero. On the scrambled face they land far apart, although every part was found with a
# perfect score.

# %% [markdown]
# That was a *global* max. Real CNNs pool locally - a 2 × 2 or 3 × 3 window at a time, layer after
# layer - and local pooling keeps *coarse* position: which window a part was strongest in. Pool
# each part's response map in 8 × 8 windows and the two scenes no longer look the same. What local
# pooling throws away is the position *within* each window, and with it the precise pose a
# capsule keeps; deep CNNs recover some arrangement from the coarse positions, at the price of
# learning each arrangement from examples.

# %% tags=["nbval-check-output"]
def local_pool(image: torch.Tensor, template: torch.Tensor, window: int = 8) -> torch.Tensor:
    """The part's response map max-pooled in window x window blocks: where it was, coarsely."""
    scores = detect(image, template)[None, None]  # (1, 1, H', W')
    return torch.nn.functional.max_pool2d(scores, window, ceil_mode=True)[0, 0]


coarse = {scene: {part: local_pool(image, parts[part]).argmax().item() for part in parts}
          for scene, image in scenes.items()}
for part in parts:
    print(f"{part:5s}: strongest 8x8 window {coarse['face'][part]:2d} on the face, "
          f"{coarse['scrambled face'][part]:2d} on the scrambled face")

# %% [markdown]
# Things to try:
#
# - Draw the face twice as large (scale every template and offset). What would a capsule need in
#   its pose, besides position, so that the parts still agree?
# - In the hand-made stroke capsules, change `cell` to 7 (a 4×4 grid) or 2. What do bigger
#   receptive fields gain and lose?

# %% [markdown]
# ## Exercises
#
# A real face is never drawn perfectly: its parts sit a little off where a template puts them. So
# agreement cannot mean a spread of exactly zero. These two exercises measure how disagreement
# grows when a part is out of place, and then choose how much of it is still "a face".
#
# ### Exercise 1: move a part
#
# Write `spread_after_moving(part, shift)`: draw the face of `face_places` with one part (`"eyes"`,
# `"nose"` or `"mouth"`) moved by `shift` = (rows, columns) pixels, and return the spread of the
# predicted centres, one number in pixels. Leave `face_places` itself unchanged. Before you run the
# sweep below it: if one part moves by $d$ pixels and the other two stay, how large do you expect
# the spread to be?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def spread_after_moving(part: str, shift: tuple[int, int]) -> float:
    ### BEGIN SOLUTION
    places = dict(face_places)  # a copy: the real face stays as it is
    row, col = places[part]
    places[part] = (row + shift[0], col + shift[1])
    return spread(summarise(draw(parts, places)))
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_moved_spread(spread_after_moving)  # prints ✅ or a hint

# %% [markdown]
# Slide the nose sideways and the mouth down, one pixel at a time:

# %%
if result:
    for part, step in (("nose", (0, 1)), ("mouth", (1, 0))):
        spreads = [spread_after_moving(part, (d * step[0], d * step[1])) for d in range(5)]
        print(f"{part:5s} moved by 0-4 px: spread " + ", ".join(f"{value:.2f}" for value in spreads)
              + f" px  ({spreads[-1] / 4:.2f} px per pixel moved)")
else:
    print("→ this cell runs once Exercise 1 passes its check")

# %% [markdown]
# The spread grows in proportion to the displacement, by 0.44 px for every pixel the part moves,
# whichever part it is. That is 4/9: the moved part's prediction goes $d$ away, their average
# follows by $d/3$, so the three predictions end $2d/3$, $d/3$ and $d/3$ from it. A small error in
# one part is diluted by the parts that agree, and more parts would dilute it further.
#
# ### Exercise 2: where does a face stop being a face?
#
# Below are two groups of scenes: faces with one part moved by up to 2 pixels in each direction
# (still faces), and scrambled faces with the three parts at random places. Each scene's spread is
# measured; the histogram shows both groups.

# %% mystnb={"image": {"alt": "Histogram of the spread of the predicted face centres, in pixels, for two groups of scenes. Faces with one part moved by up to 2 px pile up near zero, while scrambled faces (hatched bars) are scattered thinly over much larger spreads. An empty gap separates the two groups; the exercise asks where in that gap to put the threshold between face and not-face."}}
generator = torch.Generator().manual_seed(0)


def random_scene(scrambled: bool, max_shift: int = 2) -> float:
    """Spread of a face with one part moved by up to max_shift px, or of the parts at random places."""
    places = dict(face_places)
    if scrambled:
        for name, template in parts.items():
            h, w = template.shape
            places[name] = (int(torch.randint(0, 40 - h + 1, (1,), generator=generator)),
                            int(torch.randint(0, 40 - w + 1, (1,), generator=generator)))
    else:
        name = list(parts)[int(torch.randint(0, len(parts), (1,), generator=generator))]
        d_row, d_col = torch.randint(-max_shift, max_shift + 1, (2,), generator=generator).tolist()
        places[name] = (places[name][0] + d_row, places[name][1] + d_col)
    return spread(summarise(draw(parts, places)))


examples = capsedu.choose(learner=100, fast=40)
face_spreads = [random_scene(scrambled=False) for _ in range(examples)]
scrambled_spreads = [random_scene(scrambled=True) for _ in range(examples)]

fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
bins = np.linspace(0, max(scrambled_spreads) + 1, 40)
ax.hist(face_spreads, bins=bins, alpha=0.7, label=f"{examples} faces, one part off by up to 2 px")
ax.hist(scrambled_spreads, bins=bins, alpha=0.7, hatch=HATCHES[1], label=f"{examples} scrambled faces")
ax.set(xlabel="spread of the predicted centres (px)", ylabel="scenes")
ax.legend()
plt.show()

# %% [markdown]
# Write `choose_threshold(face_spreads, scrambled_spreads)`: from the two lists of spreads, return
# one threshold so that a scene counts as a face when its spread is below it. It must sort these
# examples right, and it will be judged on new scenes it has not seen, faces a little more
# displaced and scrambled faces a little more face-like than any here. Where in the gap should it
# go?

# %% jupyter={"source_hidden": true} tags=["hide-input"]
def choose_threshold(face_spreads: list[float], scrambled_spreads: list[float]) -> float:
    ### BEGIN SOLUTION
    return (max(face_spreads) + min(scrambled_spreads)) / 2  # halfway across the gap
    ### END SOLUTION


# %% tags=["nbval-check-output"]
result = check_choose_threshold(choose_threshold)  # prints ✅ or a hint

# %% [markdown]
# Now the test: new faces and new scrambled faces, drawn the same way, and faces with one part off
# by up to 4 pixels, sloppier than any the threshold was chosen on.

# %%
if result:
    threshold = choose_threshold(face_spreads, scrambled_spreads)
    print(f"largest face spread {max(face_spreads):.2f} px, smallest scrambled {min(scrambled_spreads):.2f} px: "
          f"threshold {threshold:.2f} px")
    tests = capsedu.choose(learner=300, fast=50)
    new_faces = [random_scene(scrambled=False) for _ in range(tests)]
    new_scrambled = [random_scene(scrambled=True) for _ in range(tests)]
    sloppy = [random_scene(scrambled=False, max_shift=4) for _ in range(tests)]
    print(f"new faces called scrambled:          {sum(s >= threshold for s in new_faces)} of {tests}")
    print(f"new scrambled faces called faces:    {sum(s < threshold for s in new_scrambled)} of {tests} "
          f"(smallest spread {min(new_scrambled):.2f} px)")
    print(f"faces off by up to 4 px called scrambled: {sum(s >= threshold for s in sloppy)} of {tests}")
else:
    print("→ this cell runs once Exercise 2 passes its check")

# %% [markdown]
# Halfway across the gap, the threshold sorts every new face and every new scrambled face right.
# The margin earned its keep: the most face-like new scrambled face came to 3.31 px, closer than
# any scrambled face the threshold was chosen on, and a threshold pushed against that side would
# have let it through. The sloppier faces show where a hard threshold breaks: some of them, the
# count printed above, fall on the scrambled side. A real network cannot know in advance how
# sloppy its parts will be. Dynamic routing (lesson 03) uses no threshold at all: it weighs each
# part's vote by how well it agrees with the others, with soft coupling coefficients.

# %% [markdown]
# ## Summary
#
# - The course goes from a single formula (lesson 01) to a trained CapsNet (lesson 06) and a
#   look inside it (lesson 07). From lesson 01 on, you write each lesson's piece, a check tells
#   you what is wrong, and the lesson goes on with your code once it passes.
# - A capsule outputs a vector: its **length** is the probability that an entity is present, its
#   **direction** the entity's pose. Presence should be invariant, pose equivariant — as our
#   hand-made stroke capsules are under a quarter turn.
# - A CapsNet is inverse graphics: from pixels to parts and their poses, then to wholes.
# - A global max-pool keeps *whether* parts fire and forgets *where*: a face and a scrambled face
#   look the same to it. Local pooling keeps only coarse positions. Capsules keep the pose, so
#   parts can check whether their predictions of the whole agree.
# - Agreement is a matter of degree: one part out of place spreads the predictions in proportion
#   to its error, and a threshold with room on both sides tells faces from scrambled faces.

# %% [markdown]
# ## Self-check
#
# A few questions to test your understanding; click an answer to see whether it is right and why.

# %% tags=["hide-input"]
from capsedu.course.self_check import self_check  # noqa: E402

self_check("00")

# %% [markdown]
# ## What's next
#
# Lengths must lie in $[0, 1)$ for them to be probabilities, whatever a layer computes.
# **Lesson 01 — Squash** builds the non-linearity that does this (the paper's Eq. 1), and shows a
# subtle numerical trap at the zero vector.
