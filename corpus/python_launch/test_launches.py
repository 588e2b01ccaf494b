"""Kernels the dispatcher does not see, on the GPU: a Triton kernel, a CUDA
extension's kernel called through pybind and a raw cuLaunchKernel through ctypes (NVRTC-compiled),
each racing with the default stream beside its fixed twin, a raw cuMemcpyDtoDAsync through
ctypes racing the same way (a copy: exact bytes, not a candidate), two Triton kernels that
only read one weight (a candidate until cpreplay's probe replay sees neither change it), and a
Triton kernel whose output the default stream reads right after the launch: with no sleep (on an
H200 the kernel's write lands first every run), and with the side stream busy first (the read
wins every run, which only the fix applied shows).

Run on cuda: ``cprecord --python corpus/python_launch --backend cuda``
(tools/device/run_gpu_checks.sh launches). With the launch capture off (CPRR_LAUNCH_CAPTURE=0)
the undeclared kernels are only counted as work outside the op log. The extension case also runs
declared (``cprr.accesses``), which needs no launch capture. The extension is built before
the cases run (``run_gpu_checks.sh launches`` does): a build inside a case outlasts its hang
limit. Triton and the extension are imported or built inside the bodies: listing these cases
needs neither.
"""

import ctypes
import glob
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


def _read_at_once(ctx, wait, side_busy):
    """A Triton kernel fills dst on a side stream; the default stream sums dst right after the
    launch, after a wait_stream only when `wait`. `side_busy`: the side stream sleeps before the
    kernel, so the sum wins every run. The kernel and the sum run once first, as in a training
    step after warm-up: in a fresh process the first sum after the side stream's work waits for
    it (docs/PERFORMANCE.md), which would order the sum after the write."""
    scale = _triton_scale()
    src = torch.arange(N, dtype=torch.float32, device=ctx.device)
    dst = torch.zeros(N, device=ctx.device)
    if side_busy:
        warm = torch.empty_like(src)
        scale(src, warm, 1.0)
        warm.sum()
        torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        if side_busy:
            torch.cuda._sleep(1 << 22)
        scale(src, dst, 3.0)
    if wait:
        torch.cuda.current_stream().wait_stream(side)
    ctx.output("sum", dst.sum().reshape(1))


@cprr.case(name="bug/py_triton_read_at_once", world_sizes=[1], seeded_bug="stream_race",
           description="a Triton kernel writes dst on a side stream; the default stream sums it "
           "right after the launch with no wait_stream and no sleep on either side")
def triton_read_at_once(ctx):
    _read_at_once(ctx, wait=False, side_busy=False)


@cprr.case(name="fixed/py_triton_read_at_once", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the sum")
def triton_read_at_once_fixed(ctx):
    _read_at_once(ctx, wait=True, side_busy=False)


@cprr.case(name="bug/py_triton_read_wins", world_sizes=[1], seeded_bug="stream_race",
           description="a Triton kernel writes dst on a busy side stream; the default stream "
           "sums it with no wait_stream and wins every run: the fix applied shows it")
def triton_read_wins(ctx):
    _read_at_once(ctx, wait=False, side_busy=True)


@cprr.case(name="fixed/py_triton_read_wins", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the sum")
def triton_read_wins_fixed(ctx):
    _read_at_once(ctx, wait=True, side_busy=True)


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


# ---- a raw launch: cuLaunchKernel through ctypes, the kernel compiled by NVRTC ---------------

_RAW_SOURCE = b"""
extern "C" __global__ void fill(float* dst, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}
"""


def _library(names):
    for pattern in names:
        for path in sorted(glob.glob(pattern)):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    raise RuntimeError(f"none of {names} could be loaded")


def _check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} failed with {rc}")


def _raw_fill():
    """fill(dst, value, n) launched with cuLaunchKernel on the current stream: what mscclpp's
    kernels are to cprr (seed 003), a launch and nothing else."""
    import torch.utils.cpp_extension as ext

    here = os.path.dirname(torch.__file__)
    nvrtc = _library([os.path.join(here, "..", "nvidia", "*", "lib", "libnvrtc.so*"),
                      os.path.join(ext.CUDA_HOME or "/usr/local/cuda", "lib64", "libnvrtc.so*")])
    cuda = ctypes.CDLL("libcuda.so.1")
    prog = ctypes.c_void_p()
    _check("nvrtcCreateProgram", nvrtc.nvrtcCreateProgram(ctypes.byref(prog), _RAW_SOURCE,
                                                          b"fill.cu", 0, None, None))
    major, minor = torch.cuda.get_device_capability()
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture=compute_{major}{minor}".encode())
    _check("nvrtcCompileProgram", nvrtc.nvrtcCompileProgram(prog, 1, opts))
    size = ctypes.c_size_t()
    _check("nvrtcGetPTXSize", nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)))
    ptx = ctypes.create_string_buffer(size.value)
    _check("nvrtcGetPTX", nvrtc.nvrtcGetPTX(prog, ptx))
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _check("cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), ptx))
    _check("cuModuleGetFunction",
           cuda.cuModuleGetFunction(ctypes.byref(function), module, b"fill"))

    def launch(dst, value):
        ptr, v, n = ctypes.c_void_p(dst.data_ptr()), ctypes.c_float(value), ctypes.c_int(dst.numel())
        args = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p)
                                       for x in (ptr, v, n)])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        _check("cuLaunchKernel", cuda.cuLaunchKernel(function, (dst.numel() + 255) // 256, 1, 1,
                                                     256, 1, 1, 0, stream, args, None))

    return launch


@cprr.case(name="bug/py_raw_launch_side_stream", world_sizes=[1], seeded_bug="stream_race",
           description="a raw cuLaunchKernel (ctypes) fills dst on a side stream; the default "
           "stream reads it with no wait_stream")
def raw_launch_side_stream(ctx):
    fill = _raw_fill()
    _side_stream_write_then_read(ctx, lambda s, d: fill(d, 3.0), wait=False)


@cprr.case(name="fixed/py_raw_launch_side_stream", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the read")
def raw_launch_side_stream_fixed(ctx):
    fill = _raw_fill()
    _side_stream_write_then_read(ctx, lambda s, d: fill(d, 3.0), wait=True)



# ---- a raw copy: cuMemcpyDtoDAsync through ctypes --------------------------------------------


def _raw_copy(dst, src):
    """dst <- src with the driver's cuMemcpyDtoDAsync on the current stream: a copy no aten op
    makes (a communication library's staging copy), whose exact bytes the op log takes."""
    cuda = ctypes.CDLL("libcuda.so.1")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _check("cuMemcpyDtoDAsync_v2",
           cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst.data_ptr()),
                                     ctypes.c_uint64(src.data_ptr()),
                                     ctypes.c_size_t(src.numel() * src.element_size()), stream))


@cprr.case(name="bug/py_raw_copy_side_stream", world_sizes=[1], seeded_bug="stream_race",
           description="a raw cuMemcpyDtoDAsync (ctypes) copies into dst on a side stream; the "
           "default stream reads it with no wait_stream")
def raw_copy_side_stream(ctx):
    _side_stream_write_then_read(ctx, lambda s, d: _raw_copy(d, s), wait=False)


@cprr.case(name="fixed/py_raw_copy_side_stream", world_sizes=[1],
           description="the twin: current_stream().wait_stream(side) before the read")
def raw_copy_side_stream_fixed(ctx):
    _side_stream_write_then_read(ctx, lambda s, d: _raw_copy(d, s), wait=True)
