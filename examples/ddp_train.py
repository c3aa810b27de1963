"""Data-parallel training of a compiled model with new_backendgraph, launched by torchrun.

    torchrun --nproc_per_node=2 examples/ddp_train.py [--steps 5] [--dynamic]

Every rank compiles the same graphs into the shared dicp cache (DICP_CACHE_DIR, or the user's
cache directory): concurrent builds are atomic, so ranks never see a half-written kernel.
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def build_model():
    torch.manual_seed(0)  # identical initial weights on every rank
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 10),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--dynamic", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(build_model())
    compiled = torch.compile(model, backend="new_backendgraph", dynamic=args.dynamic)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(rank)  # each rank its own shard
    for step in range(args.steps):
        images = torch.randn(4, 1, 8, 8, generator=data)
        labels = torch.randint(10, (4,), generator=data)
        optimizer.zero_grad()
        loss = F.cross_entropy(compiled(images), labels)
        loss.backward()
        optimizer.step()
        print(f"rank {rank}/{world} step {step}: loss {loss.item():.4f}", flush=True)
    checksum = sum(p.detach().sum() for p in model.parameters()).item()
    print(f"rank {rank}: parameter checksum {checksum:.6f} (equal on every rank)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
