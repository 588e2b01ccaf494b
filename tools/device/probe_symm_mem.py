"""What torch's symmetric memory does on this machine (run under torch.distributed.run, a GPU per
rank): its API, the NCCL backend's allocations and windows, and whether NCCL's all_reduce on a
pool tensor the caching allocator put into different windows on two ranks sums the wrong bytes
(seed 002 in PyTorch's own terms). Facts only: the cprr cases are planned from what this prints.

    python3 -m torch.distributed.run --nproc_per_node=2 tools/device/probe_symm_mem.py
"""

import inspect
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank)
dev = torch.device("cuda", rank)


def say(*a):
    print(f"[{rank}]", *a, flush=True)


def attempt(label, fn):
    try:
        r = fn()
        say(f"{label}: ok {r if r is not None else ''}")
        return r
    except Exception as e:  # noqa: BLE001 - a probe reports every failure
        say(f"{label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return None


import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

if rank == 0:
    say("torch", torch.__version__, "nccl", torch.cuda.nccl.version())
    for n in ("empty", "rendezvous", "set_backend", "get_backend", "get_mem_pool",
              "is_nvshmem_available", "is_symm_mem_tensor", "use_mem_pool"):
        f = getattr(symm_mem, n, None)
        say("symm_mem." + n, inspect.signature(f) if callable(f) else "absent")
    pg = dist.distributed_c10d.ProcessGroupNCCL
    say("ProcessGroupNCCL:", [a for a in dir(pg) if any(k in a.lower() for k in ("mem", "regist", "symm", "comm"))])
    sm = torch._C._distributed_c10d._SymmetricMemory
    say("_SymmetricMemory:", [a for a in dir(sm) if not a.startswith("__")])
    for n in ("get_mem_pool", "empty", "rendezvous"):
        f = getattr(symm_mem, n, None)
        if f is not None:
            try:
                say(f"source of {n}:\n" + inspect.getsource(f))
            except Exception as e:  # noqa: BLE001
                say(f"no source for {n}: {e}")

dist.init_process_group("nccl", device_id=dev)
group = dist.group.WORLD
backend_name = os.environ.get("PROBE_SYMM_BACKEND", "NCCL")
attempt(f"set_backend({backend_name})", lambda: symm_mem.set_backend(backend_name))
attempt("get_backend", lambda: symm_mem.get_backend(dev))

N = 256 * 1024  # 1 MiB of float32, seed 002's size: NCCL reads the peers' windows directly
# (AllReduce_RSxLD_AGxST); at 64 KiB its AGxLL_R stages through its own buffers


def check_sum(t, want, label):
    torch.cuda.synchronize()
    got = t.float()
    bad = (got != want).sum().item()
    say(f"{label}: data_ptr={t.data_ptr():#x} wrong elements {bad} of {t.numel()} "
        f"(first {got[0].item()}, last {got[-1].item()}, want {want})")


# 1. symm_mem.empty + rendezvous + NCCL all_reduce
t = attempt("symm_mem.empty", lambda: symm_mem.empty(N, dtype=torch.float32, device=dev))
if t is not None:
    say(f"empty data_ptr {t.data_ptr():#x} is_symm={getattr(symm_mem, 'is_symm_mem_tensor', lambda x: '?')(t)}")
    h = attempt("rendezvous(empty)", lambda: symm_mem.rendezvous(t, group))
    if h is not None:
        say("handle:", type(h).__name__, [a for a in dir(h) if not a.startswith("_")])
        for a in ("buffer_size", "buffer_ptrs", "rank", "world_size", "signal_pad_size"):
            attempt(f"handle.{a}", lambda a=a: getattr(h, a))
    t.fill_(rank + 1)
    attempt("all_reduce(empty)", lambda: dist.all_reduce(t))
    check_sum(t, world * (world + 1) / 2, "all_reduce on symm_mem.empty")

# 2. seed 002 with the symmetric pool (corpus/python_nccl's case in plain torch): two scratch
# buffers registered by rendezvous, each rank frees a different one, the partial sum takes the
# freed block. (A segment one rank registers alone hangs instead: registration is collective.)
pool = attempt("get_mem_pool", lambda: symm_mem.get_mem_pool(dev))
if pool is not None:
    for by_rank in (False, True):
        with torch.cuda.use_mem_pool(pool):
            scratch = [torch.full((N,), 100.0 * (e + 1), device=dev) for e in range(2)]
        for t in scratch:
            symm_mem.rendezvous(t, group)  # registers each segment as a window
        drop = rank % 2 if by_rank else 1
        kept = scratch[1 - drop]
        del scratch, t
        with torch.cuda.use_mem_pool(pool):
            partial = torch.full((N,), float(rank + 1), device=dev)
        segs = {s["address"]: i for i, s in enumerate(sorted(pool.snapshot(), key=lambda s: s["address"]))}
        seg = max(a for a in segs if a <= partial.data_ptr())
        say(f"free_by_rank={by_rank}: partial in segment #{segs[seg]} (by address) at offset "
            f"{partial.data_ptr() - seg}")
        attempt(f"all_reduce(partial, free_by_rank={by_rank})", lambda: dist.all_reduce(partial))
        check_sum(partial, world * (world + 1) / 2, f"seed 002 free_by_rank={by_rank}")
        del kept, partial
        torch.cuda.synchronize()
        dist.barrier()

dist.barrier()
dist.destroy_process_group()
