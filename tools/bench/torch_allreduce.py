"""The baseline of seed 001: one trivial PyTorch all-reduce per torchrun launch, which is what a
suite pays per case when every case spawns its own world. Run as
    torchrun --nproc-per-node 2 torch_allreduce.py           (CUDA: NCCL with a GPU per rank,
                                                              Gloo when ranks share one)
    torchrun --nproc-per-node 2 torch_allreduce.py --cpu     (Gloo on the CPU)
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cpu = "--cpu" in sys.argv[1:]
    if cpu:
        backend, device = "gloo", "cpu"
    else:
        # Ranks share the GPUs there are; NCCL refuses two ranks on one GPU, so a world larger
        # than the GPU count goes through Gloo (on CUDA tensors), as cprr's shared worlds do.
        gpus = torch.cuda.device_count()
        torch.cuda.set_device(rank % gpus)
        backend, device = ("nccl" if gpus >= world else "gloo"), "cuda"
    dist.init_process_group(backend)
    x = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(x)
    if not cpu:
        torch.cuda.synchronize()
    assert x[0].item() == world * (world + 1) / 2, x[0].item()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
