#!/usr/bin/env python3
"""What the Python op capture costs per aten op on CPU tensors, without a GPU or a world.

    tools/bench/op_capture_cost.py [PACKAGE_DIR...]   (default: this checkout's python/)

For each package folder (e.g. this checkout's python/ and an older one, `git archive REV python`
unpacked, to compare two versions side by side in one run) it runs one body of 802 host ops
(torch.add, add_, mul, sum on 256 floats) plain and under cprr.capture.op_capture.OpCapture with a
native side that records nothing (Idle), and, where the folder has the compiled C++ capture (a build
tree's python/, with _cprr_torch), under it with its own side that records nothing: 15 times each
after 3 warm-ups, printing the medians and each capture's cost per op. Each folder runs in a process
of its own (the package is imported once).
"""
import os
import subprocess
import sys

OPS = 2 + 200 * 4

MEASURE = r"""
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from cprr.capture import native_capture as _native_capture
from cprr.capture import op_capture as _op_capture

def body():
    a, b = torch.ones(256), torch.zeros(256)
    for _ in range(200):
        c = a + b
        b.add_(c)
        d = c * 2
        d.sum()

def once(capture):
    t = time.perf_counter()
    if capture is None:
        body()
    else:
        with capture:
            body()
    return time.perf_counter() - t

def idle():
    return _op_capture.OpCapture(_op_capture.Idle())

def native():
    return _native_capture.NativeOpCapture(_op_capture.Idle(), null_sink=True)

for _ in range(3):
    once(None), once(idle())
plain = statistics.median(once(None) for _ in range(15))
captured = statistics.median(once(idle()) for _ in range(15))
out = [plain * 1e3, captured * 1e3, (captured - plain) / int(sys.argv[2]) * 1e6]
if _native_capture.available():
    once(native())
    c = statistics.median(once(native()) for _ in range(15))
    out += [c * 1e3, (c - plain) / int(sys.argv[2]) * 1e6]
print(" ".join(f"{x:.2f}" for x in out) + (" - -" if len(out) == 3 else ""))
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    folders = sys.argv[1:] or [os.path.join(here, "..", "..", "python")]
    print(f"{'package':<40} {'plain ms':>9} {'Python mode ms':>15} {'us per op':>10} "
          f"{'C++ ms':>8} {'us per op':>10}  ({OPS} ops)")
    for folder in folders:
        out = subprocess.run([sys.executable, "-c", MEASURE, os.path.abspath(folder), str(OPS)],
                             check=True, stdout=subprocess.PIPE, text=True).stdout.split()
        print(f"{folder:<40} {out[0]:>9} {out[1]:>15} {out[2]:>10} {out[3]:>8} {out[4]:>10}")


if __name__ == "__main__":
    main()
