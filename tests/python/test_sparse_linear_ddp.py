"""BlockSparseLinear under DistributedDataParallel (gloo, 2 processes on this machine):
training on each process's half of the batch reaches the parameters one process reaches
on the whole batch, and GradualPruner chooses the same layouts on every process."""
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trnsparse.nn import BlockSparseLinear
from trnsparse.prune import GradualPruner

STEPS = 4


def _model():
    torch.manual_seed(0)  # the same layouts and values on every process
    return torch.nn.Sequential(BlockSparseLinear(48, 64, block_size=16, density=0.5), torch.nn.GELU(),
                               BlockSparseLinear(64, 24, block_size=8, density=0.5))


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 48, generator=g), torch.randn(8, 24, generator=g)) for _ in range(STEPS)]


def _train(model, batches, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, target in batches:
        half = x.shape[0] // world
        rows = slice(rank * half, (rank + 1) * half)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[rows]), target[rows]).backward()
        opt.step()
    return opt


def _worker(rank, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        model = _model()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = _train(ddp, _batches(), rank, 2)
        pruner = GradualPruner(model, final_density=0.25, start_step=0, end_step=1, every=1, optimizer=opt)
        pruner.step()
        pruner.step()
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch without gloo")
def test_ddp_matches_one_process_on_the_whole_batch_and_layouts_agree(tmp_path):
    out = str(tmp_path / "state")
    mp.spawn(_worker, args=(_free_port(), out), nprocs=2, join=True)
    states = [torch.load(f"{out}.{rank}") for rank in range(2)]
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key   # one model on both processes
    single = _model()
    opt = _train(single, _batches())
    pruner = GradualPruner(single, final_density=0.25, start_step=0, end_step=1, every=1, optimizer=opt)
    pruner.step()
    pruner.step()
    for key, value in single.state_dict().items():
        if key.endswith("layout"):
            assert torch.equal(states[0][key], value), key
        else:
            torch.testing.assert_close(states[0][key], value, rtol=1e-5, atol=1e-6)
