"""Diagnostic: does a default-stream read overtake a delayed Triton write under cprr?"""
import os
import time

import torch

import cprr

N = 1 << 16


def _scale():
    import triton
    import triton.language as tl

    @triton.jit
    def scale(src, dst, n, factor, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i, mask=i < n) * factor, mask=i < n)

    return lambda s, d, f: scale[(triton.cdiv(s.numel(), 1024),)](s, d, s.numel(), f, BLOCK=1024)


def _run(ctx, what):
    src = torch.arange(N, dtype=torch.float32, device=ctx.device)
    dst = torch.zeros(N, device=ctx.device)
    scale = _scale()
    scale(src, torch.empty_like(src), 1.0)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(1 << 26)
        t0 = time.perf_counter()
        if what == "triton":
            scale(src, dst, 3.0)
        else:
            dst.fill_(1.0)
        t1 = time.perf_counter()
    s = dst.sum()
    t2 = time.perf_counter()
    v = s.item()
    with open(os.environ.get("DIAG_OUT", "/tmp/diag.txt"), "a") as f:
        f.write(f"{what} launch {1e3 * (t1 - t0):.2f} ms, to sum {1e3 * (t2 - t1):.2f} ms, "
                f"sum {v} (0 = overtook)\n")
    ctx.output("sum", s.reshape(1))


@cprr.case(name="diag/overtake_triton", world_sizes=[1])
def overtake_triton(ctx):
    _run(ctx, "triton")


@cprr.case(name="diag/overtake_fill", world_sizes=[1])
def overtake_fill(ctx):
    _run(ctx, "fill")
