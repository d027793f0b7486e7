"""Many processes with torchrun and DistributedDataParallel (capsedu.training.distributed): where a
process is, how a global batch is shared, and two CPU processes (gloo) training the zoo trainer's
tiny recipe to the weights of one process."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import REPO
from distributed_zoo import TINY, tiny_data

from capsedu.data.multimnist import PairTargets
from capsedu.training.checkpoint import load_checkpoint
from capsedu.training.distributed import ShardedBatches, World, shard, world
from capsedu.zoo.train import train_recipe

pytestmark = pytest.mark.tools


@pytest.mark.unit  # in-process, milliseconds
def test_world_is_read_from_torchruns_environment(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert world() == World(0, 1, 0)  # no torchrun: one process
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert world() == World(rank=3, world_size=4, local_rank=1)
    assert world({"RANK": "1", "WORLD_SIZE": "2"}) == World(1, 2, 0)
    with pytest.raises(ValueError, match="rank must be in \\[0, 1\\], got 2"):
        world({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="WORLD_SIZE must be a whole number"):
        world({"WORLD_SIZE": "two"})


@pytest.mark.unit  # in-process, milliseconds
def test_each_rank_gets_its_contiguous_share_of_every_global_batch():
    images = torch.arange(12.0).view(12, 1, 1, 1)
    pairs = PairTargets(torch.arange(12).view(12, 1), torch.arange(24).view(12, 2), images)
    shares = [shard(images, pairs, World(rank, 3)) for rank in range(3)]
    assert [s[0].flatten().tolist() for s in shares] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert isinstance(shares[2][1], PairTargets) and shares[2][1].labels.tolist()[0] == [16, 17]
    with pytest.raises(ValueError, match="12 images cannot be split evenly over 5 ranks"):
        shard(images, pairs, World(0, 5))


@pytest.mark.unit  # in-process, milliseconds
def test_an_epochs_last_short_batch_is_cut_to_a_multiple_of_the_ranks():
    batches = [(torch.arange(8.0), torch.arange(8)), (torch.arange(8.0, 13), torch.arange(8, 13))]
    first = ShardedBatches(batches, World(0, 2), batch_size=8, epoch_size=13)
    second = ShardedBatches(batches, World(1, 2), batch_size=8, epoch_size=13)
    assert len(first) == 2 and [x.tolist() for x, _ in first] == [[0, 1, 2, 3], [8, 9]]
    assert [y.tolist() for _, y in second] == [[4, 5, 6, 7], [10, 11]]  # image 12 left out
    eight = ShardedBatches(batches, World(0, 8), batch_size=8, epoch_size=13)
    assert len(eight) == 1 and len(list(eight)) == 1  # the last 5 images: fewer than 8 ranks
    moved = ShardedBatches(batches, World(1, 2), batch_size=8, epoch_size=13,
                           augment=lambda x: x + torch.arange(len(x)))  # each image by its place
    assert next(iter(moved))[0].tolist() == [8, 10, 12, 14]  # augmented before it is cut
    with pytest.raises(ValueError, match="batch_size .* multiple of the world size 3, got 8"):
        ShardedBatches(batches, World(0, 3), batch_size=8, epoch_size=13)


@pytest.mark.unit  # in-process, milliseconds
def test_several_ranks_need_a_process_group():
    with pytest.raises(ValueError, match="no process group is initialised"):
        train_recipe(TINY, tiny_data()["train"], progress=False, world=World(0, 2))


def test_two_processes_train_the_tiny_recipe_as_one_process_does(tmp_path):
    out_dir = tmp_path / "weights"
    script = REPO / "tests" / "distributed_zoo.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--standalone", str(script), "--out-dir", str(out_dir)]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    run = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True,
                         timeout=300)
    seconds = time.perf_counter() - start
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert sorted(path.name for path in out_dir.iterdir()) == ["tiny.json", "tiny.pt"]
    assert (tmp_path / "writers.txt").read_text() == "rank 0\n"  # rank 0 alone saved weights
    assert run.stdout.count("== tiny") == 1  # and printed
    record = json.loads((out_dir / "tiny.json").read_text())
    assert (record["world_size"], record["backend"]) == (2, "gloo")
    distributed, _ = load_checkpoint(out_dir / "tiny.pt")
    single, history = train_recipe(TINY, tiny_data()["train"], progress=False)  # the global batches
    weights = single.state_dict()
    gap = max(float((distributed.state_dict()[k] - weights[k]).abs().max()) for k in weights)
    print(f"two processes against one: max |weight difference| {gap:.2e}, torchrun {seconds:.1f} s")
    for key, value in distributed.state_dict().items():
        torch.testing.assert_close(value, weights[key], rtol=1e-4, atol=1e-6, msg=key)
    assert record["history"]["train_loss"] == pytest.approx(history["train_loss"], rel=1e-5)
    assert record["history"]["train_accuracy"] == pytest.approx(history["train_accuracy"])
