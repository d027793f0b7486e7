"""The NumPy capsule classifier (lesson 10): gradients equal torch's, Adam equals torch's, it learns."""

import ast
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from capsedu import load_offline
from capsedu.course.checks.backprop import torch_gradients
from capsedu.nets import numpy_classifier as ncl

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("iterations, detach_inner", [(1, True), (3, True), (3, False)])
def test_gradients_equal_autograd_through_capsedu(iterations, detach_inner):
    params = ncl.init_params(num_caps=6, pixels=20, seed=1, dtype=np.float64)
    rng = np.random.default_rng(2)
    images, targets = rng.random((5, 20)), np.array([0, 3, 9, 3, 1])
    loss, _, cache = ncl.forward(params, images, targets, iterations, detach_inner)
    grads = ncl.backward(cache)
    loss_t, grads_t = torch_gradients(params, images, targets, iterations, detach_inner)
    assert loss == pytest.approx(loss_t, rel=1e-12)
    for name in ("A", "a", "W"):
        np.testing.assert_allclose(grads[name], grads_t[name], rtol=1e-8, atol=1e-12, err_msg=name)


def test_adam_takes_the_same_steps_as_torch():
    params = ncl.init_params(num_caps=3, pixels=6, seed=0, dtype=np.float64)
    weights = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    ours, theirs = ncl.Adam(params, lr=0.01), torch.optim.Adam(weights.values(), lr=0.01)
    rng = np.random.default_rng(0)
    for _ in range(4):
        grads = {k: rng.normal(size=v.shape) for k, v in params.items()}
        ours.step(grads)
        for k, w in weights.items():
            w.grad = torch.tensor(grads[k])
        theirs.step()
    for k in params:
        np.testing.assert_allclose(params[k], weights[k].detach().numpy(), rtol=1e-10, err_msg=k)


@pytest.mark.tools  # 2 epochs on 1,500 images: more than a few steps
def test_fit_learns_real_digits_and_reports_each_epoch():
    train, test = load_offline("train", verbose=False).subset(1500, seed=0), load_offline("test", verbose=False)
    x, y = train.images.numpy(), train.labels.numpy()
    params = ncl.init_params(seed=0)
    seen = []
    history = ncl.fit(params, x, y, epochs=2, seed=0, on_epoch=lambda record: seen.append(record["epoch"]))
    assert seen == [1, 2] and history["epoch"] == [1, 2]
    assert history["train_loss"][1] < history["train_loss"][0] and min(history["train_seconds"]) > 0
    assert 0.5 < history["train_accuracy"][1] <= 1
    assert ncl.accuracy(params, test.images.numpy(), test.labels.numpy()) > 0.8
    assert params["A"].dtype == np.float32


def test_fit_is_deterministic_for_a_seed():
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 784)).astype(np.float32), rng.integers(0, 10, 40)
    results = []
    for _ in range(2):
        params = ncl.init_params(seed=3)
        ncl.fit(params, x, y, epochs=1, batch_size=16, seed=4)
        results.append(params["W"])
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("call, match", [
    (lambda p: ncl.forward(p, np.zeros((2, 783), np.float32), np.array([0, 1])), "784 pixels"),
    (lambda p: ncl.forward(p, np.zeros(784, np.float32), np.array([0])), r"images must be a numpy.ndarray \(B, P\)"),
    (lambda p: ncl.forward(p, np.zeros((2, 784), np.float32), np.array([0, 10])), r"targets must be in \[0, 9\]"),
    (lambda p: ncl.fit(p, np.zeros((2, 784), np.float32), np.array([0]), epochs=1), r"labels must be \(2,\)"),
    (lambda p: ncl.fit(p, np.zeros((2, 784), np.float32), np.array([0, 1]), epochs=0), "epochs must be >= 1"),
    (lambda p: ncl.forward(p, np.full((1, 784), np.nan, np.float32), np.array([0])), "contains"),
    (lambda p: ncl.init_params(num_caps=0), "num_caps must be >= 1"),
    (lambda p: ncl.Adam(p, lr=0), "lr must be a positive float"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call(ncl.init_params(num_caps=2))


def test_the_module_imports_only_numpy_the_standard_library_and_numpy_caps():
    tree = ast.parse(Path(ncl.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {f"{n.module}.{a.name}" if n.module == "capsedu.nets" else n.module
                 for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    outside = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside == {"numpy", "capsedu._history", "capsedu._numbers", "capsedu.nets.numpy_caps"}, outside
    history = ast.parse((Path(ncl.__file__).parents[1] / "_history.py").read_text())  # imports nothing
    assert {getattr(n, "module", None) or n.names[0].name for n in ast.walk(history)
            if isinstance(n, (ast.Import, ast.ImportFrom))} <= {"__future__", "collections.abc", "typing"}
