"""The stream and allocator seeds as PyTorch code on the GPU, each beside its fixed twin.

These need CUDA streams, pinned memory and the caching allocator: run them on the cuda backend
(``cprecord --python corpus/python_gpu --backend cuda``; ranks may share one GPU). Each ``bug/``
case's seeded_bug is the verdict cprr must reach; each ``fixed/`` twin must come out clean.
tools/device/csan_compare.py runs the same bodies under PyTorch's CUDA sanitizer.
"""

import torch
import torch.distributed as dist

import cprr

# ---- seed 001: max_logit read on the default stream before the CP stream wrote it ------------


def _cp_attention_max_logit(ctx, wait):
    """TransformerEngine's all-gather CP forward: this rank's queries against the gathered keys,
    step i's logits on flash_attn_streams[i] (alternating the default stream and cp_stream);
    step i reads step i-1's max_logit."""
    heads, seq, dim, steps = 8, 512, 64, 4
    q = torch.randn(ctx.world_size, heads, seq, dim, device=ctx.device)[ctx.rank]  # my shard
    k = torch.randn(steps, heads, seq, dim, device=ctx.device)  # the gathered keys
    cp_stream = torch.cuda.Stream()
    streams = [torch.cuda.current_stream(), cp_stream]
    cp_stream.wait_stream(torch.cuda.current_stream())  # q and k are ready
    max_logit_per_step = [None] * steps
    max_logit = None
    for i in range(steps):
        with torch.cuda.stream(streams[i % 2]):
            logits = torch.softmax(q @ k[i].transpose(-1, -2), dim=-1) @ k[i]
            max_logit_per_step[i] = (q @ logits.transpose(-1, -2)).amax(dim=-1) / dim**0.5
        if i == 1:
            max_logit = max_logit_per_step[0].clone()
        elif i > 1:
            if wait:  # the fix: the read waits for the stream that wrote step i-1
                torch.cuda.current_stream().wait_stream(streams[(i - 1) % 2])
            max_logit = torch.maximum(max_logit, max_logit_per_step[i - 1])
    torch.cuda.current_stream().wait_stream(cp_stream)  # the post-loop wait: too late
    max_logit = torch.maximum(max_logit, max_logit_per_step[-1])
    every_rank = [torch.empty_like(max_logit) for _ in range(ctx.world_size)]
    dist.all_gather(every_rank, max_logit)
    ctx.output("max_logit", torch.stack(every_rank))


@cprr.case(name="bug/py_cp_max_logit_race", world_sizes=[1, 2], seeded_bug="stream_race",
           description="seed 001: torch.maximum reads step 1's max_logit on the default stream "
           "before cp_stream wrote it")
def cp_max_logit_race(ctx):
    _cp_attention_max_logit(ctx, wait=False)


@cprr.case(name="fixed/py_cp_max_logit_race", world_sizes=[1, 2],
           description="the twin: current_stream().wait_stream(cp_stream) before the read")
def cp_max_logit_race_fixed(ctx):
    _cp_attention_max_logit(ctx, wait=True)


# ---- seed 003: one pinned staging buffer reused for several non_blocking H2D copies ----------


def _all_to_all_metadata(ctx, own_buffers):
    """alltoallv's counts and displacements staged through pinned memory to the GPU."""
    w, n = ctx.world_size, 1 << 16
    fields = {
        "send_counts": [(ctx.rank + p) % 3 + 1 for p in range(w)],
        "send_displs": [p * 4 for p in range(w)],
        "recv_counts": [(p + ctx.rank) % 3 + 1 for p in range(w)],
        "recv_displs": [p * 4 + 1 for p in range(w)],
    }
    shared = torch.empty(n, dtype=torch.int64, pin_memory=True)
    on_device = []
    for name, values in fields.items():
        staging = torch.empty(n, dtype=torch.int64, pin_memory=True) if own_buffers else shared
        staging[:w] = torch.tensor(values, dtype=torch.int64)  # the host writes the buffer...
        staging[w:] = len(on_device)
        d = torch.empty(n, dtype=torch.int64, device=ctx.device)
        d.copy_(staging, non_blocking=True)  # ...that this DMA reads later
        on_device.append(d)
    metadata = torch.stack(on_device)
    ctx.output("metadata", metadata)


@cprr.case(name="bug/py_pinned_staging_reuse", world_sizes=[1, 2], seeded_bug="stream_race",
           description="seed 003: one pinned buffer rewritten by the host for four non_blocking "
           "H2D copies still in flight")
def pinned_staging_reuse(ctx):
    _all_to_all_metadata(ctx, own_buffers=False)


@cprr.case(name="fixed/py_pinned_staging_reuse", world_sizes=[1, 2],
           description="the twin: a pinned buffer per field")
def pinned_staging_reuse_fixed(ctx):
    _all_to_all_metadata(ctx, own_buffers=True)


# ---- record_stream omitted: memory freed while a side stream still reads it ------------------


def _side_stream_reduce(ctx, record):
    n = 1 << 22
    x = torch.randn(n, device=ctx.device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x.clone()
        for _ in range(8):
            y = torch.sin(y) + x  # reads x for a while on the side stream
        if record:  # the fix: the allocator must wait for the side stream before reusing x
            x.record_stream(side)
    del x  # x's memory goes back to the default stream's pool at once
    z = torch.full((n,), 2.0, device=ctx.device)  # and is handed out again, here
    torch.cuda.current_stream().wait_stream(side)
    ctx.output("y", y)
    ctx.output("z", z)


@cprr.case(name="bug/py_record_stream_missing", world_sizes=[1, 2], seeded_bug="stream_race",
           description="a tensor used on a side stream is freed without record_stream: the next "
           "allocation overwrites it while the side stream still reads it")
def record_stream_missing(ctx):
    _side_stream_reduce(ctx, record=False)


@cprr.case(name="fixed/py_record_stream_missing", world_sizes=[1, 2],
           description="the twin: x.record_stream(side) before it is freed")
def record_stream_missing_fixed(ctx):
    _side_stream_reduce(ctx, record=True)


# ---- work the dispatcher never sees: counted, not checked -------------------------------------


@cprr.case(name="healthy/py_raw_driver_copy", world_sizes=[1],
           description="a copy issued through ctypes on the CUDA driver: correct, and outside "
           "the op log (its report counts it)")
def raw_driver_copy(ctx):
    import ctypes

    driver = ctypes.CDLL("libcuda.so.1")
    x = torch.arange(1024, dtype=torch.float32, device=ctx.device)
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream()
    rc = driver.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(y.data_ptr()), ctypes.c_uint64(x.data_ptr()),
                                     ctypes.c_size_t(x.numel() * 4),
                                     ctypes.c_void_p(stream.cuda_stream))
    assert rc == 0, f"cuMemcpyDtoDAsync_v2 returned {rc}"
    ctx.output("y", y)


# ---- what a test asks torch's allocator ---------------------------------------------------------


@cprr.case(name="healthy/py_memory_statistics", world_sizes=[1],
           description="a leak check through torch.cuda.memory_allocated and "
           "max_memory_allocated, as tests write it: the same answers under cprr's allocator")
def memory_statistics(ctx):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    x = torch.ones(1 << 20, device=ctx.device)
    assert torch.cuda.memory_allocated() >= before + x.numel() * 4, "the tensor is not counted"
    ctx.output("sum", x.sum())
    del x
    assert torch.cuda.memory_allocated() <= before + 4096, "a freed tensor is still counted"
    assert torch.cuda.max_memory_allocated() >= before + (1 << 22), "the peak missed the tensor"
