#!/usr/bin/env python3
"""Where the op capture's time goes on one case body (issue 27's cost figure, explained).

    capture_profile.py CASES CASE [--repeat N]

Runs the case's body in this process (world size 1, no cprr world) without a dispatch mode and
under cprr._op_capture.OpCapture with a native side that records nothing (Idle), the CUDA trace
hooks on as in a rank; prints both medians per body and the capture's top functions by own time.
"""

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("case")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    from cprr import _case, _case_files, _collectives, _gpu_hooks, _op_capture, _running

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from csan_compare import StandIn

    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/s", rank=0, world_size=1)
        _case_files.load_cases([args.cases])
        _collectives.install()
        definition = next(d for d in _case.registered_cases() if d.name == args.case)
        device = torch.device("cuda", 0)
        _gpu_hooks.install(_running.capture)

        def once(capture):
            ctx = StandIn(0, 1, 1, device, definition)
            torch.cuda.synchronize()
            start = time.perf_counter()
            if capture is None:
                definition.body(ctx)
            else:
                native = capture._native
                with _running.running(native, capture), capture:
                    definition.body(ctx)
            torch.cuda.synchronize()
            return (time.perf_counter() - start) * 1000

        def capture():
            return _op_capture.OpCapture(_op_capture.Idle(), device_backend=True)

        once(None), once(capture())
        plain = statistics.median(once(None) for _ in range(args.repeat))
        captured = statistics.median(once(capture()) for _ in range(args.repeat))
        print(f"{args.case}: plain {plain:.2f} ms, under the capture {captured:.2f} ms")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.repeat):
            once(capture())
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
