"""The baseline of seed 001: one trivial PyTorch all-reduce per torchrun launch, which is what a
suite pays per case when every case spawns its own world. Run as
    torchrun --nproc-per-node 2 torch_allreduce.py
"""
import os

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    x = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    world = dist.get_world_size()
    assert x[0].item() == world * (world + 1) / 2, x[0].item()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
