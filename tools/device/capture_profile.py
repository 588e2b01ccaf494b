#!/usr/bin/env python3
"""What the op capture costs per aten op, side by side in one process: a case's body and a loop of
small ops, plain, under the Python dispatch mode (cprr.capture.op_capture), under the C++ capture
(cprr.capture.native_capture) and under PyTorch's CUDA sanitizer (CSAN, last: it cannot be turned
off).

    capture_profile.py CASES CASE [--repeat N] [--device cuda|cpu] [--profile]

The captures log into a native side that records nothing (Idle; the C++ capture's, in C++), with
torch's CUDA trace hooks on as in a rank. Prints one row per body: aten ops, plain ms, and per
capture its ms and its cost per op in us ((captured - plain) / ops). --profile adds the Python
mode's top functions by own time.
"""

import argparse
import cProfile
import functools
import os
import pstats
import statistics
import sys
import tempfile
import time

try:  # the built package (PYTHONPATH), with its compiled modules; else the sources
    import cprr  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))


def _count_ops(torch, body):
    """The aten ops the Python dispatch mode sees in one run of `body`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        body()
    return Count.n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("case")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    from cprr.api import case as _case
    from cprr.api import running as _running
    from cprr.capture import gpu_hooks as _gpu_hooks
    from cprr.capture import native_capture as _native_capture
    from cprr.capture import op_capture as _op_capture
    from cprr.distributed import collectives as _collectives
    from cprr.suites import case_files as _case_files

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from csan_compare import StandIn

    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/s", rank=0, world_size=1)
        _case_files.load_cases([args.cases])
        _collectives.install()
        definition = next(d for d in _case.registered_cases() if d.name == args.case)
        if device.type == "cuda":
            _gpu_hooks.install(_running.capture)

        def case_body():
            definition.body(StandIn(0, 1, 1, device, definition))

        def small_ops():
            a = torch.ones(16, device=device)
            for _ in range(1000):
                a.add_(1.0)

        captures = {"python": _op_capture.OpCapture}
        if _native_capture.available():
            captures["C++"] = functools.partial(_native_capture.NativeOpCapture, null_sink=True)

        def once(body, kind):
            sync()
            start = time.perf_counter()
            if kind is None:
                body()
            else:
                capture = kind(_op_capture.Idle(), device_backend=device.type == "cuda")
                with _running.running(capture._native, capture), capture:
                    body()
            sync()
            return (time.perf_counter() - start) * 1000

        def median(body, kind):
            once(body, kind)
            return statistics.median(once(body, kind) for _ in range(args.repeat))

        bodies = {args.case: case_body, "1000 x add_": small_ops}
        rows = {}
        for name, body in bodies.items():
            ops = _count_ops(torch, body)
            plain = median(body, None)
            rows[name] = (ops, plain, {k: median(body, kind) for k, kind in captures.items()})
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.repeat):
                once(case_body, _op_capture.OpCapture)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        if device.type == "cuda":  # last: CSAN's dispatch mode stays on once enabled
            from torch.cuda import _sanitizer

            _sanitizer.enable_cuda_sanitizer()
            for name, body in bodies.items():
                rows[name][2]["CSAN"] = median(body, None)
        print(f"device {device}, torch {torch.__version__}, median of {args.repeat}")
        print("| body | aten ops | plain ms | " + " | ".join(
            f"{k} ms (us/op)" for k in rows[args.case][2]) + " |")
        for name, (ops, plain, by) in rows.items():
            cells = " | ".join(f"{ms:.2f} ({(ms - plain) * 1000 / max(ops, 1):.1f})"
                               for ms in by.values())
            print(f"| {name} | {ops} | {plain:.2f} | {cells} |")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
