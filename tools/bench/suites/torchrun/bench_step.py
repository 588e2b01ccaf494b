"""suites_bench's torchrun script: one short checked step at the world size torchrun gives (an
all-reduce and a matmul), its step from the command line."""

import argparse
import os

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", type=int, required=True)
    step = ap.parse_args().step
    # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nccl" if torch.cuda.device_count() >= world else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()) \
        if torch.cuda.is_available() else torch.device("cpu")
    x = torch.full((32, 32), float(rank + step), device=device)
    y = x @ x
    dist.all_reduce(y)
    assert y[0, 0].item() == 32 * sum((r + step) ** 2 for r in range(world))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
