"""cprr's device arena as torch's CUDA allocator (python/native/torch_allocator.h), the Python
side: the swap, made once per cuda rank before its worker loop, and torch.cuda's byte counts
answered from cprr's allocator.
"""

import os
import sys

import torch


def use_cprr_allocator(rank, native):
    """cprr's device arena as torch's CUDA allocator, for every case of this cuda rank
    (native/torch_allocator.h): tensors are placed by the case's placement policy, as a C++
    case's buffers are, and a replay can move them. torch.cuda.change_current_allocator works only
    before torch first touches CUDA, so here, before the worker loop. CPRR_TORCH_ALLOCATOR=off
    (and CPRR_OP_CAPTURE=off, which this needs for record_stream) leaves torch's own; so does a
    torch without CUDAPluggableAllocator (before 2.0) or a case file that used CUDA on import.
    torch.cuda.memory_allocated, max_memory_allocated, memory_reserved and
    reset_peak_memory_stats answer from cprr's count (memory_statistics); the rest of torch's
    statistics (memory_stats, memory_snapshot) raise under any pluggable allocator. `native`: the
    _cprr module, whose library holds the allocator."""
    if rank.backend != "cuda" or "off" in (os.environ.get("CPRR_TORCH_ALLOCATOR"),
                                            os.environ.get("CPRR_OP_CAPTURE")):
        return
    memory = getattr(torch.cuda, "memory", None)
    pluggable = getattr(memory, "CUDAPluggableAllocator", None)
    if pluggable is None or not hasattr(memory, "change_current_allocator"):
        print(f"cprr: torch {torch.__version__} has no CUDAPluggableAllocator: tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    if torch.cuda.is_initialized():
        print("cprr: CUDA was initialized before the worker loop (at import?): tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    library = os.path.join(os.path.dirname(os.path.abspath(native.__file__)), "libcprr_pyrank.so")
    memory.change_current_allocator(pluggable(library, "cprr_torch_alloc", "cprr_torch_free"))
    native.use_torch_allocator()
    memory_statistics(torch, native)


def memory_statistics(torch, native):
    """torch.cuda's byte counts from cprr's allocator (torch's pluggable allocator has none): a
    case that checks it freed what it allocated works as under torch's caching allocator. cprr
    keeps no cache, so what is reserved is what is allocated. One device per rank: `device` is
    accepted and ignored. `native`: the _cprr module (torch_memory, reset_torch_peak)."""

    def memory_allocated(device=None):
        return native.torch_memory()[0]

    def max_memory_allocated(device=None):
        return native.torch_memory()[1]

    def reset_peak_memory_stats(device=None):
        native.reset_torch_peak()

    replacements = {
        "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "memory_reserved": memory_allocated,
        "max_memory_reserved": max_memory_allocated,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_max_memory_allocated": reset_peak_memory_stats,
    }
    for name, fn in replacements.items():
        for module in (torch.cuda, torch.cuda.memory):
            if hasattr(module, name):
                setattr(module, name, fn)
