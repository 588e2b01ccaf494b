#!/usr/bin/env python3
"""What cprr's capture costs per launch past the dispatcher, beside CSAN's and
compute-sanitizer's, side by side in one run on the GPU machine: loops of raw
cuLaunchKernel launches (ctypes, NVRTC), Triton launches and raw cuMemcpyDtoDAsync copies, each
timed per call, under

- nothing (plain Python), PyTorch's CUDA sanitizer (CSAN: it sees aten ops only, so it pays
  nothing here and finds nothing), compute-sanitizer's memcheck and racecheck (every launch,
  instrumented);
- cprecord with the C++ capture and the launch capture off (each launch counted outside the op
  log through CUPTI), with it on (`CPRR_LAUNCH_CAPTURE=1`: each an op with inferred accesses),
  and with the Python dispatch mode.

    launch_cost.py CPRECORD [--n N] [--no-sanitizer]     # the table (run from the repo root)
    launch_cost.py --loop [--n N] [--csan]               # one plain loop, JSON on stdout

As a case file (cprecord --python launch_cost.py) it holds `bench/launch_loop`, which writes the
same JSON to $CPRR_LAUNCH_COST_OUT. The kernels are corpus/python_launch's.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_KERNELS = os.path.join(_HERE, "..", "..", "corpus", "python_launch", "test_launches.py")


def _kernels():
    """corpus/python_launch's module (its raw fill, raw copy and Triton scale)."""
    spec = importlib.util.spec_from_file_location("cprr_launch_kernels", _KERNELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loops(n):
    """us per call of each kind of launch, n calls each after a warm-up, synchronized at the end."""
    import torch

    k = _kernels()
    # The tensors first: they make torch's CUDA context current, which the raw module load needs.
    src = torch.arange(1 << 12, dtype=torch.float32, device="cuda")
    dst = torch.zeros_like(src)
    fill, scale = k._raw_fill(), k._triton_scale()
    kinds = {"raw cuLaunchKernel": lambda: fill(dst, 3.0),
             "Triton": lambda: scale(src, dst, 2.0),
             "raw cuMemcpyDtoDAsync": lambda: k._raw_copy(dst, src)}
    out = {}
    for name, call in kinds.items():
        for _ in range(10):
            call()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            call()
        torch.cuda.synchronize()
        out[name] = (time.perf_counter() - start) * 1e6 / n
    return out


try:
    import cprr

    @cprr.case(name="bench/launch_loop", world_sizes=[1], timeout_s=600,
               description="loops of raw launches, Triton launches and raw copies, timed per call")
    def launch_loop(ctx):
        if ctx.device.type != "cuda":
            raise RuntimeError("bench/launch_loop times CUDA launches: run it with --backend cuda")
        n = int(os.environ.get("CPRR_LAUNCH_COST_N", "1000"))
        with open(os.environ["CPRR_LAUNCH_COST_OUT"], "w") as f:
            json.dump(loops(n), f)
except ImportError:  # a plain loop without cprr on the path
    pass


def _plain(n, *, csan=False, wrap=()):
    cmd = [*wrap, sys.executable, os.path.abspath(__file__), "--loop", "--n", str(n)]
    if csan:
        cmd.append("--csan")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return f"failed ({done.returncode}): {done.stderr.strip()[-200:]}"
    # compute-sanitizer writes its own lines around the loop's (its error summary last).
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return f"no figures: {done.stdout.strip()[-200:]}"
    return json.loads(lines[-1])


def _recorded(cprecord, n, env_extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cost.json")
        env = dict(os.environ, CPRR_LAUNCH_COST_OUT=out, CPRR_LAUNCH_COST_N=str(n), **env_extra)
        for key in ("CPRR_LAUNCH_CAPTURE", "CPRR_OP_CAPTURE"):
            if key not in env_extra:
                env.pop(key, None)
        done = subprocess.run([cprecord, "--python", os.path.abspath(__file__), "--backend",
                               "cuda", "--mode", "fresh", "--filter", "^bench/launch_loop",
                               "--db", os.path.join(tmp, "cost.db")],
                              env=env, capture_output=True, text=True)
        if not os.path.exists(out):
            return f"failed ({done.returncode}): {done.stderr.strip()[-200:]}"
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cprecord", nargs="?")
    ap.add_argument("--loop", action="store_true", help="run one plain loop, print JSON")
    ap.add_argument("--csan", action="store_true", help="with --loop: under CSAN")
    ap.add_argument("--n", type=int, default=1000, help="calls of each kind (default 1000)")
    ap.add_argument("--no-sanitizer", action="store_true", help="skip compute-sanitizer")
    args = ap.parse_args()
    if args.loop:
        if args.csan:
            from torch.cuda import _sanitizer

            _sanitizer.enable_cuda_sanitizer()
        print(json.dumps(loops(args.n)))
        return 0
    if not args.cprecord:
        ap.error("CPRECORD is needed for the table")
    rows = {"plain": _plain(args.n), "CSAN": _plain(args.n, csan=True)}
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not args.no_sanitizer and os.path.exists(sanitizer):
        for tool in ("memcheck", "racecheck"):
            rows[f"compute-sanitizer {tool}"] = _plain(
                max(args.n // 10, 10), wrap=(sanitizer, "--tool", tool, "--print-limit", "1"))
    rows["cprr, launches counted (CPRR_LAUNCH_CAPTURE=0)"] = _recorded(
        args.cprecord, args.n, {"CPRR_LAUNCH_CAPTURE": "0"})
    rows["cprr, launches as ops (the default)"] = _recorded(args.cprecord, args.n, {})
    rows["cprr, dispatch mode (CPRR_OP_CAPTURE=python)"] = _recorded(
        args.cprecord, args.n, {"CPRR_OP_CAPTURE": "python"})
    plain = rows["plain"]
    kinds = list(plain) if isinstance(plain, dict) else []
    print(f"us per call (extra over plain), {args.n} calls of each kind "
          f"(compute-sanitizer: {max(args.n // 10, 10)})")
    print("| configuration | " + " | ".join(kinds) + " |")
    print("| --- |" + " ---: |" * len(kinds))
    for name, row in rows.items():
        if not isinstance(row, dict):
            print(f"| {name} | {row} |")
            continue
        cells = [f"{row[k]:.1f} ({row[k] - plain[k]:+.1f})" for k in kinds]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
