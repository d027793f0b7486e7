import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, capsnet_loss, mask_capsules

pytestmark = pytest.mark.unit


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_paper_config_has_the_papers_parameter_count():
    model = CapsNet(CapsNetConfig.paper())
    assert count(model) == 8_215_568
    assert model.config.num_primary_caps == 1152
    assert count(model.decoder) == 160 * 512 + 512 + 512 * 1024 + 1024 + 1024 * 784 + 784


def test_cpu_config_is_smaller_with_the_same_structure():
    paper, cpu = CapsNetConfig.paper(), CapsNetConfig.cpu()
    assert count(CapsNet(cpu)) < count(CapsNet(paper)) / 2
    assert (cpu.num_classes, cpu.routing_iterations) == (paper.num_classes, paper.routing_iterations)


def test_forward_shapes_and_couplings(rng):
    model = CapsNet(CapsNetConfig.cpu())
    x = torch.rand(3, 1, 28, 28, generator=rng)
    out = model(x, return_couplings=True)
    n_primary = model.config.num_primary_caps
    assert out.capsules.shape == (3, 10, 16)
    assert out.lengths.shape == (3, 10)
    assert out.reconstruction.shape == (3, 1, 28, 28)
    assert out.couplings.shape == (3, n_primary, 10)
    assert model(x).couplings is None
    assert ((out.reconstruction >= 0) & (out.reconstruction <= 1)).all()
    torch.testing.assert_close(out.lengths, out.capsules.norm(dim=-1))


def test_reconstruction_is_masked_by_label_in_training_and_by_longest_capsule_otherwise(rng):
    model = CapsNet(CapsNetConfig.cpu()).eval()
    with torch.no_grad():
        model.class_caps.W.mul_(300)  # untrained capsules are ~1e-5 long: make them matter
    x = torch.rand(4, 1, 28, 28, generator=rng)
    out = model(x)
    predicted = out.lengths.argmax(dim=1)
    torch.testing.assert_close(model(x, predicted).reconstruction, out.reconstruction)
    other = (predicted + 1) % 10
    assert not torch.allclose(model(x, other).reconstruction, out.reconstruction)


def test_mask_capsules():
    caps = torch.zeros(2, 3, 2)
    caps[0, 1] = torch.tensor([3.0, 4.0])
    caps[0, 2] = torch.tensor([1.0, 0.0])
    caps[1, 0] = torch.tensor([0.0, 2.0])
    torch.testing.assert_close(mask_capsules(caps), torch.tensor([[0, 0, 3, 4, 0, 0], [0, 2, 0, 0, 0, 0.0]]))
    torch.testing.assert_close(mask_capsules(caps, torch.tensor([2, 0])),
                               torch.tensor([[0, 0, 0, 0, 1, 0], [0, 2, 0, 0, 0, 0.0]]))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 2\]"):
        mask_capsules(caps, torch.tensor([0, 3]))


def test_config_round_trip():
    cfg = CapsNetConfig.cpu()
    assert CapsNetConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown field"):
        CapsNetConfig.from_dict({**cfg.to_dict(), "dropout": 0.5})


@pytest.mark.parametrize("x, y, error, words", [
    (torch.rand(2, 28, 28), None, ValueError, r"x must be a 4-D tensor \(B, 1, 28, 28\)"),
    (torch.rand(2, 3, 28, 28), None, ValueError, r"x must have shape \(B, 1, 28, 28\)"),
    (torch.rand(2, 1, 32, 32), None, ValueError, r"x must have shape \(B, 1, 28, 28\)"),
    (torch.rand(0, 1, 28, 28), None, ValueError, "empty batch"),
    (torch.full((1, 1, 28, 28), float("nan")), None, ValueError, "NaN"),
    (torch.zeros(1, 1, 28, 28, dtype=torch.uint8), None, TypeError, "floating-point"),
    (torch.rand(2, 1, 28, 28), torch.tensor([1, 10]), ValueError, r"labels must be in \[0, 9\]"),
    (torch.rand(2, 1, 28, 28), torch.tensor([1]), ValueError, "1 labels but the batch has 2"),
])
def test_bad_inputs(x, y, error, words):
    model = CapsNet(CapsNetConfig.cpu())
    with pytest.raises(error, match=words):
        model(x, y)


def test_bad_config():
    with pytest.raises(TypeError, match="config must be a CapsNetConfig"):
        CapsNet({"conv1_channels": 8})
    with pytest.raises(ValueError, match="empty primary-capsule grid"):
        CapsNet(CapsNetConfig(image_size=12))


def test_routing_is_a_config_choice_with_a_clear_error():
    assert CapsNetConfig().routing == "factored"
    assert CapsNet(CapsNetConfig.cpu()).class_caps.routing == "factored"
    with pytest.raises(ValueError, match=r"routing must be one of \('readable', 'factored'\), got 'fast'"):
        CapsNetConfig(routing="fast")
    with pytest.raises(ValueError, match="routing must be one of"):
        CapsNetConfig.from_dict({**CapsNetConfig.cpu().to_dict(), "routing": None})


def test_a_config_saved_before_the_routing_field_loads_with_the_default():
    old = {key: value for key, value in CapsNetConfig.cpu().to_dict().items() if key != "routing"}
    assert CapsNetConfig.from_dict(old) == CapsNetConfig.cpu()


@pytest.mark.parametrize("detach_inner", [True, False])
def test_readable_and_factored_networks_train_alike(rng, detach_inner):
    """Same weights, either routing: the same loss and the same gradient for every parameter."""
    small = dict(conv1_channels=8, primary_types=2, primary_dim=4, detach_inner=detach_inner)
    models = {routing: CapsNet(CapsNetConfig(**small, routing=routing)).double()
              for routing in ("readable", "factored")}
    models["factored"].load_state_dict(models["readable"].state_dict())
    with torch.no_grad():
        models["readable"].class_caps.W.mul_(100)  # capsules long enough for routing to matter
        models["factored"].class_caps.W.copy_(models["readable"].class_caps.W)
    x, y = torch.rand(3, 1, 28, 28, generator=rng, dtype=torch.float64), torch.tensor([1, 2, 3])
    grads = {}
    for routing, model in models.items():
        loss = capsnet_loss(model, x, y)[0]
        grads[routing] = (loss, *torch.autograd.grad(loss, list(model.parameters())))
    for readable, factored in zip(grads["readable"], grads["factored"]):
        torch.testing.assert_close(factored, readable)
