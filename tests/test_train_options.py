"""fit's one-cycle schedule, on_epoch_end callback and separate training-time keys."""

import pytest
import torch

from capsedu import CapsNet, CapsNetConfig, fit, set_seed

pytestmark = pytest.mark.unit

TINY = CapsNetConfig(conv1_channels=4, primary_types=2, primary_dim=4, digit_dim=4,
                     decoder_hidden=(8,))


def batches(n_batches: int = 3, size: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [(torch.rand(size, 1, 28, 28, generator=generator),
             torch.randint(0, 10, (size,), generator=generator)) for _ in range(n_batches)]


def test_onecycle_rises_then_anneals_every_batch():
    set_seed(0)
    model = CapsNet(TINY)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    history = fit(model, batches(), epochs=4, lr_schedule="onecycle", optimizer=optimizer,
                  progress=False)
    lrs = history["lr"]  # learning rate at the start of each epoch
    assert lrs[0] < lrs[1] and lrs[1] > lrs[3] and max(lrs) <= 1e-3
    assert optimizer.param_groups[0]["lr"] < max(lrs) / 20  # annealed towards 0 by the last batch


def test_epoch_callback_sees_history_and_can_stop_training():
    seen = []

    def stop_after_two(epoch, history):
        seen.append((epoch, len(history["train_loss"])))
        return epoch == 2

    history = fit(CapsNet(TINY), batches(), epochs=5, progress=False, on_epoch_end=stop_after_two)
    assert seen == [(1, 1), (2, 2)] and history["epoch"] == [1, 2]


def test_training_time_is_recorded_apart_from_validation():
    history = fit(CapsNet(TINY), batches(), epochs=2, progress=False, val_loader=batches(5))
    for key in ("seconds", "train_seconds", "train_cpu_seconds"):
        assert len(history[key]) == 2 and all(t > 0 for t in history[key])
    assert all(train <= total for train, total in zip(history["train_seconds"], history["seconds"]))


def test_bad_schedules_are_rejected():
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        fit(CapsNet(TINY), batches(), epochs=1, lr_schedule="cosine", progress=False)
    with pytest.raises(ValueError, match="needs a train_loader with a length"):
        fit(CapsNet(TINY), iter(batches()), epochs=1, lr_schedule="onecycle", progress=False)


def test_a_recipe_with_warps_turns_each_image_and_repeats_with_its_seed():
    from capsedu.zoo.recipes import Recipe
    from capsedu.zoo.train import _augmentation

    bars = torch.zeros(6, 1, 28, 28)
    bars[:, 0, 13:15, 10:20] = 1.0
    shifted = _augmentation(Recipe(kind="capsnet"))(bars)  # whole-pixel shifts only: still 0 or 1
    assert set(shifted.unique().tolist()) <= {0.0, 1.0}
    warped = _augmentation(Recipe(kind="capsnet", max_angle=15, max_scale=0.1))(bars)
    assert len(warped.unique()) > 2 and not torch.equal(warped[0], warped[1])  # resampled, each its own
    torch.testing.assert_close(_augmentation(Recipe(kind="capsnet", max_angle=15, max_scale=0.1))(bars),
                               warped)
    many = bars.repeat(4, 1, 1, 1)  # 24 bars right of centre
    mirrored = _augmentation(Recipe(kind="capsnet", max_shift=0, flip=True))(many)
    assert {int(bar[0, 13].argmax()) for bar in mirrored} == {10, 8}  # some mirrored (28 - 20), some not
    unshifted = _augmentation(Recipe(kind="capsnet", max_shift=0, flip=False))(bars)
    torch.testing.assert_close(unshifted, bars)
