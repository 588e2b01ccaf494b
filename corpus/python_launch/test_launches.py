"""Kernels the dispatcher does not see, on the GPU (issue 40): a Triton kernel and a CUDA
extension's kernel called through pybind, each racing with the default stream beside its fixed
twin, and two Triton kernels that only read one weight (a race candidate no replay confirms).

Run with the launch capture on: ``CPRR_LAUNCH_CAPTURE=1 cprecord --python
corpus/python_launch --backend cuda`` (tools/device/run_gpu_checks.sh launches). Without it the
undeclared kernels are only counted as work outside the op log. The extension case also runs
declared (``cprr.accesses``), which needs no launch capture. Triton and the extension are
imported or built inside the bodies: listing these cases needs neither.
"""

import os

import torch

import cprr

N = 1 << 16


def _triton_scale():
    import triton
    import triton.language as tl

    @triton.jit
    def scale(src, dst, n, factor, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i, mask=i < n) * factor, mask=i < n)

    def run(src, dst, factor):
        scale[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), factor, BLOCK=1024)

    return run


def _side_stream_write_then_read(ctx, write, wait):
    """`write(src, dst)` fills dst on a side stream; the default stream reads it, after a
    wait_stream only when `wait`."""
    src = torch.arange(N, dtype=torch.float32, device=ctx.device)
    dst = torch.zeros(N, device=ctx.device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # The default stream is busy before its read, so the write usually lands first: the race
    # shows in the outputs once a replay delays the write.
    torch.cuda._sleep(1 << 20)
    with torch.cuda.stream(side):
        write(src, dst)
    if wait:
        torch.cuda.current_stream().wait_stream(side)
    ctx.output("sum", (dst * 2).sum().reshape(1))


@cprr.case(name="bug/py_triton_side_stream", world_sizes=[1], seeded_bug="stream_race",
           description="a Triton kernel writes dst on a side stream; the default stream reads it "
           "with no wait_stream")
def triton_side_stream(ctx):
    scale = _triton_scale()
    _side_stream_write_then_read(ctx, lambda s, d: scale(s, d, 3.0), wait=False)


@cprr.case(name="fixed/py_triton_side_stream", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the read")
def triton_side_stream_fixed(ctx):
    scale = _triton_scale()
    _side_stream_write_then_read(ctx, lambda s, d: scale(s, d, 3.0), wait=True)


@cprr.case(name="healthy/py_triton_shared_weight", world_sizes=[1],
           description="two Triton kernels on two streams read one weight, each into its own "
           "output: a candidate in the op log that no replay confirms")
def triton_shared_weight(ctx):
    scale = _triton_scale()
    weight = torch.arange(N, dtype=torch.float32, device=ctx.device)
    outs = [torch.empty(N, device=ctx.device) for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    for s, out, f in zip(streams, outs, (2.0, 3.0)):
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            scale(weight, out, f)
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)
    ctx.output("sum", (outs[0] + outs[1]).sum().reshape(1))


_EXTENSION = """
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void scale_kernel(const float* src, float* dst, long n, float factor) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] * factor;
}

void scale(torch::Tensor src, torch::Tensor dst, double factor) {
  long n = src.numel();
  scale_kernel<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<float>(), dst.data_ptr<float>(), n, (float)factor);
}
"""


def _extension():
    """seed 001 as TransformerEngine had it: a fused kernel called through pybind, not a
    dispatcher op. Built once per machine (TORCH_EXTENSIONS_DIR)."""
    from torch.utils.cpp_extension import load_inline

    return load_inline("cprr_scale_ext", cpp_sources="void scale(torch::Tensor src, "
                       "torch::Tensor dst, double factor);", cuda_sources=_EXTENSION,
                       functions=["scale"], verbose=False,
                       build_directory=_build_dir())


def _build_dir():
    d = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp/cprr_torch_extensions"),
                     "cprr_scale_ext")
    os.makedirs(d, exist_ok=True)
    return d


@cprr.case(name="bug/py_extension_side_stream", world_sizes=[1], seeded_bug="stream_race",
           description="an extension's kernel, called through pybind, writes dst on a side "
           "stream; the default stream reads it with no wait_stream")
def extension_side_stream(ctx):
    ext = _extension()
    _side_stream_write_then_read(ctx, lambda s, d: ext.scale(s, d, 3.0), wait=False)


@cprr.case(name="fixed/py_extension_side_stream", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the read")
def extension_side_stream_fixed(ctx):
    ext = _extension()
    _side_stream_write_then_read(ctx, lambda s, d: ext.scale(s, d, 3.0), wait=True)


def _declared(ext):
    def write(src, dst):
        with cprr.accesses("scale_ext", reads=[src], writes=[dst]):
            ext.scale(src, dst, 3.0)

    return write


@cprr.case(name="bug/py_extension_declared", world_sizes=[1], seeded_bug="stream_race",
           description="the extension's race with its accesses declared (cprr.accesses): exact, "
           "without the launch capture")
def extension_declared(ctx):
    _side_stream_write_then_read(ctx, _declared(_extension()), wait=False)


@cprr.case(name="fixed/py_extension_declared", world_sizes=[1],
           description="the twin, declared")
def extension_declared_fixed(ctx):
    _side_stream_write_then_read(ctx, _declared(_extension()), wait=True)
