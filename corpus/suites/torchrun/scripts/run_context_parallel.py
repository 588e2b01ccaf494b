"""Context-parallel attention, checked against a single-device reference: a torchrun script.

    torchrun --nproc-per-node 2 run_context_parallel.py --format thd --config cp_1_0

Each rank attends over its share of the keys; the partial outputs are summed across ranks and
compared with attention over all keys on one device. The thd format needs a padding mask: the
script derives it by rewriting the named config in place (the bug, seed 001's): the table is a
module shared with every later run in the same process, so a bshd run after a thd run masks as
thd does. --copy-config takes a copy first (the fix).
"""

import argparse
import math
import os
import sys

import torch
import torch.distributed as dist

from cp_configs import MODEL_CONFIGS


def masked_attention(q, k, v, mask, keys):
    seq, dim = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(dim)
    keep = torch.ones(seq, seq, dtype=torch.bool, device=q.device)
    if "causal" in mask:
        keep = torch.tril(keep)
    if mask.startswith("padding"):
        keep[:, seq - 4:] = False
    scores = scores.masked_fill(~(keep & keys), float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1)) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=["thd", "bshd"], required=True)
    ap.add_argument("--config", default="cp_1_0", choices=sorted(MODEL_CONFIGS))
    ap.add_argument("--copy-config", action="store_true")
    args = ap.parse_args()

    # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nccl" if torch.cuda.device_count() >= world else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    cfg = dict(MODEL_CONFIGS[args.config]) if args.copy_config else MODEL_CONFIGS[args.config]
    if args.format == "thd" and cfg["mask"] == "causal":
        cfg["mask"] = "padding_causal"
    expected_mask = "padding_causal" if args.format == "thd" else "causal"

    torch.manual_seed(1234)
    q, k, v = (torch.randn(cfg["heads"], cfg["seq"], cfg["dim"]).to(device) for _ in range(3))
    mine = torch.zeros(cfg["seq"], dtype=torch.bool, device=device)
    mine[rank::world] = True
    out = masked_attention(q, k, v, cfg["mask"], mine)
    dist.all_reduce(out)
    everything = torch.ones(cfg["seq"], dtype=torch.bool, device=device)
    reference = sum(masked_attention(q, k, v, expected_mask, everything.clone().fill_(False)
                                     .index_fill_(0, torch.arange(r, cfg["seq"], world,
                                                                  device=device), True))
                    for r in range(world))
    print(f"[rank {rank}] {args.format} {args.config}: mask {cfg['mask']}, "
          f"max error {(out - reference).abs().max().item():.3g}")
    if not torch.allclose(out, reference, atol=1e-5):
        print(f"[rank {rank}] FAILED: output differs from the reference", file=sys.stderr)
        sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
