"""One rank of the DDP training run of test_distributed.py (run as `python -m`).

Trains the compiled SmallConvNet under DistributedDataParallel (gloo) on this rank's shard of
each combined batch, then saves its final state, its losses and its C++ build count.
"""

import argparse
import datetime
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from ..common.utils import compile_model, parse_bool_arg, update_dynamo_config
from .helpers import dicp_builds
from .models.mlp import build_small_convnet

LR, MOMENTUM = 0.1, 0.9


def make_batches(rank_batches, world_size, seed=0):
    """Combined (images, labels) batches; rank r trains on rows [r*b, (r+1)*b) of each."""
    g = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(b * world_size, 1, 8, 8, generator=g),
            torch.randint(10, (b * world_size,), generator=g),
        )
        for b in rank_batches
    ]


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def train(model_fn, optimizer, batches):
    losses = []
    for images, labels in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model_fn(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def main():
    parser = argparse.ArgumentParser()
    for name in ("--rank", "--world-size", "--port"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--dynamic", type=parse_bool_arg, required=True)
    parser.add_argument(
        "--rank-batches", type=lambda s: [int(b) for b in s.split(",")], required=True
    )
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--watchdog-s",
        type=float,
        default=0,
        help="dump every thread's stack and exit if still running after this",
    )
    args = parser.parse_args()
    if args.watchdog_s:  # a hung rank shows where it hangs before the parent kills it
        faulthandler.dump_traceback_later(args.watchdog_s, exit=True)

    torch.set_num_threads(1)  # the ranks share the machine's cores
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=args.rank,
        world_size=args.world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    model = build_small_convnet()
    # dynamo's DDP optimizer (optimize_ddp, on by default) splits the graph at gradient-bucket
    # boundaries; this model fits one bucket and trains correctly with it, so it stays on.
    (compiled,) = compile_model(DistributedDataParallel(model), args.backend, args.dynamic)
    update_dynamo_config(args.dynamic)
    rows = lambda b: slice(args.rank * b, (args.rank + 1) * b)
    batches = [
        (x[rows(b)], y[rows(b)])
        for b, (x, y) in zip(args.rank_batches, make_batches(args.rank_batches, args.world_size))
    ]
    dist.barrier()  # both ranks start compiling at the same moment, into one cache directory
    losses = train(compiled.model, make_optimizer(model), batches)
    torch.save(
        {"state": model.state_dict(), "losses": losses, "builds": dicp_builds(args.backend)},
        args.out,
    )
    dist.barrier()  # every rank has saved its result
    # Skip the process-group teardown: under load, gloo's teardown has hung in rank 0 after its
    # peer exited (torch 2.13). Both ranks are past their last collective, so nothing is lost.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
