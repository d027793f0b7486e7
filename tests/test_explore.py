"""capsedu.explore: perturbations, Figure-4 sweeps and routing traces agree with the model."""

import pytest
import torch

from capsedu.explore.probes import (
    PERTURBATION_VALUES,
    coupling_map,
    couplings_on_grid,
    encode_image,
    perturb,
    perturbation_sweep,
    perturbed_reconstructions,
    routing_trace,
    sweep_offsets,
    vote_shares,
)

pytestmark = pytest.mark.unit


def test_encode_matches_forward(model, image):
    encoded = encode_image(model, image)
    with torch.no_grad():
        out = model(image[None])
    assert torch.allclose(encoded.capsules, out.capsules[0], atol=1e-6)
    assert encoded.prediction == int(out.lengths[0].argmax())
    assert encoded.u_hat.shape == (model.config.num_primary_caps, 10, 16)


def test_perturb_adds_offsets_to_one_capsule_only():
    capsules = torch.randn(10, 16)
    before = capsules.clone()
    offsets = torch.zeros(2, 16)
    offsets[1, 4] = 0.25
    batch = perturb(capsules, 3, offsets)
    assert torch.equal(capsules, before)
    assert torch.equal(batch[0], before)
    assert batch[1, 3, 4] == pytest.approx(float(before[3, 4]) + 0.25)
    changed = (batch[1] != before).nonzero().tolist()
    assert changed == [[3, 4]]


@pytest.mark.parametrize("label, error", [(-1, ValueError), (10, ValueError), (2.0, TypeError),
                                          (True, TypeError)])
def test_perturb_rejects_bad_label(label, error):
    with pytest.raises(error, match="label must be"):
        perturb(torch.zeros(10, 16), label, torch.zeros(1, 16))


def test_perturb_rejects_bad_offsets():
    with pytest.raises(ValueError, match="offsets"):
        perturb(torch.zeros(10, 16), 1, torch.zeros(1, 8))


def test_sweep_offsets_moves_one_dimension_per_row():
    offsets = sweep_offsets(16)
    assert offsets.shape == (16 * 11, 16)
    assert ((offsets != 0).sum(dim=1) <= 1).all()
    assert offsets[5 * 11 + 10, 5] == pytest.approx(0.25)
    assert offsets[5 * 11 + 0, 5] == pytest.approx(-0.25)
    assert PERTURBATION_VALUES[5] == 0.0


def test_sweep_middle_column_is_the_plain_reconstruction_and_the_others_move(strong_model, image):
    model = strong_model
    images, label = perturbation_sweep(model, image)
    assert images.shape == (16, 11, 28, 28)
    encoded = encode_image(model, image)
    with torch.no_grad():
        plain = model(image[None]).reconstruction[0, 0]
        for d, k in [(0, 0), (5, 10), (15, 2)]:
            moved = encoded.capsules.clone()
            moved[label, d] += PERTURBATION_VALUES[k]
            expected = model.decode(moved[None], torch.tensor([label]))[0, 0]
            assert torch.allclose(images[d, k], expected, atol=1e-6)
            assert (images[d, k] - plain).abs().max() > 1e-3  # a real offset changes the image
    for d in range(16):
        assert torch.allclose(images[d, 5], plain, atol=1e-6)
    assert label == encoded.prediction


def test_perturbed_reconstruction_lengths(model, image):
    encoded = encode_image(model, image)
    offsets = torch.zeros(1, 16)
    offsets[0, 0] = 0.25
    images, lengths = perturbed_reconstructions(model, encoded.capsules, encoded.prediction, offsets)
    expected = encoded.capsules.clone()
    expected[encoded.prediction, 0] += 0.25
    assert torch.allclose(lengths[0], expected.norm(dim=-1))
    assert images.shape == (1, 1, 28, 28)


def test_routing_trace_rows_match_the_model_with_r_iterations(strong_model, image):
    model = strong_model
    encoded = encode_image(model, image)
    trace = routing_trace(encoded.u_hat, 4, encoded.u)
    assert trace.lengths.shape == (4, 10) and trace.shares.shape == (4, 10)
    for r in range(1, 5):
        with torch.no_grad():
            out = model(image[None], routing_iterations=r, return_couplings=True)
        assert torch.allclose(trace.lengths[r - 1], out.lengths[0], atol=1e-6)
        assert torch.allclose(trace.shares[r - 1], vote_shares(out.couplings[0], encoded.u), atol=1e-6)
    assert (trace.lengths[0] - trace.lengths[3]).abs().max() > 0.01  # routing really moved them
    assert (trace.shares[3] - trace.shares[0]).abs().max() > 1e-3


def test_one_iteration_couples_uniformly(model, image):
    trace = routing_trace(encode_image(model, image).u_hat, 1)
    assert torch.allclose(trace.couplings, torch.full_like(trace.couplings, 0.1))


def test_couplings_on_grid_is_type_major():
    c = torch.arange(16 * 36 * 10, dtype=torch.float32).reshape(16 * 36, 10)
    grid = couplings_on_grid(c, 2, 16)
    assert grid.shape == (16, 6, 6)
    t, y, x = 5, 1, 4
    assert grid[t, y, x] == c[t * 36 + y * 6 + x, 2]
    with pytest.raises(ValueError, match="num_types"):
        couplings_on_grid(c, 2, 7)


def test_bad_image_is_named(model):
    with pytest.raises(ValueError, match="image"):
        encode_image(model, torch.zeros(2, 1, 28, 28))
    with pytest.raises(TypeError, match="model"):
        encode_image("not a model", torch.zeros(1, 28, 28))


def test_vote_shares_weight_each_capsule_by_its_length():
    c = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])  # (I, J)
    u = torch.tensor([[3.0, 4.0], [0.0, 1.0], [0.0, 0.0]])  # lengths 5, 1 and 0 (absent)
    shares = vote_shares(c, u)
    assert torch.allclose(shares, torch.tensor([(5 * 0.9 + 0.2) / 6, (5 * 0.1 + 0.8) / 6]))
    assert torch.allclose(shares.sum(), torch.tensor(1.0))
    batch = vote_shares(c.expand(4, 3, 2), u.expand(4, 3, 2))  # (B, I, J) -> (B, J)
    assert torch.allclose(batch, shares.expand(4, 2))
    with pytest.raises(ValueError, match="leading shape"):
        vote_shares(c, u[:2])


def test_coupling_map_averages_the_types_weighted_by_length():
    types, side = 2, 3
    c = torch.zeros(types * side * side, 4)  # (I, J)
    c[:9, 1], c[9:, 1] = 0.2, 0.6  # type 0 and type 1 toward class 1
    u = torch.zeros(types * side * side, 8)
    u[:9, 0], u[9:, 0] = 3.0, 1.0  # type 0 three times as long as type 1
    grid = coupling_map(c, u, 1, types)
    assert grid.shape == (3, 3)
    assert torch.allclose(grid, torch.full((3, 3), (3 * 0.2 + 1 * 0.6) / 4))
