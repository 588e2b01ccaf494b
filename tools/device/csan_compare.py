#!/usr/bin/env python3
"""PyTorch's CUDA sanitizer (CSAN) on cprr's Python cases, beside cprr's verdicts.

    csan_compare.py CASES --cprr RECORD.json [--cprr-off RECORD_OFF.json] [--world-size 2]

Each case of CASES (a file or directory of @cprr.case files) runs in plain torch, one process per
rank (gloo over a file store, ranks sharing the GPU as cprr's do), twice: under
TORCH_CUDA_SANITIZER=1 and without it, each --repeat times after one warm-up. CSAN names a race
by raising from the op that completes it; the body's time per run is taken with the device
synchronized. RECORD.json is ``cprecord --python CASES --backend cuda --json --repeat N``'s
report; RECORD_OFF.json the same with CPRR_OP_CAPTURE=off. Prints one row per case: the seeded
bug, cprr's verdict, whether CSAN named a race, and the time per case: plain, CSAN, cprr pooled
with its op capture and without (the capture's cost is their difference, measured side by side).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


class StandIn:
    """What a case body uses of cprr's ctx, without cprr: outputs are kept, not hashed."""

    def __init__(self, rank, world_size, seed, device, definition):
        self.rank, self.world_size, self.seed, self.device = rank, world_size, seed, device
        self.name = definition.name
        self.params = {}
        self.outputs = {}
        self._definition = definition

    def param(self, axis):
        return self._definition.grid[axis][0]

    def output(self, name, tensor):
        self.outputs[name] = tensor

    probe = output


def child(args):
    if args.mode == "csan":
        os.environ["TORCH_CUDA_SANITIZER"] = "1"  # read when torch is imported
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from cprr.api import case as _case
    from cprr.suites import case_files as _case_files

    torch.cuda.set_device(args.rank % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank,
                            world_size=args.world_size)
    problems = _case_files.load_cases([args.cases])
    if problems:
        sys.exit("\n".join(problems))
    definition = next(d for d in _case.registered_cases() if d.name == args.case)
    device = torch.device("cuda", torch.cuda.current_device())
    found, times = "", []
    for i in range(args.repeat + 1):
        torch.manual_seed(1)
        ctx = StandIn(args.rank, args.world_size, 1, device, definition)
        torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            definition.body(ctx)
        except Exception as e:  # CSAN's CUDASanitizerErrors, or the case's own failure
            found = found or f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120]}"
        torch.cuda.synchronize()
        if i > 0:
            times.append((time.perf_counter() - start) * 1000)
        dist.barrier()
    print(json.dumps({"rank": args.rank, "found": found, "ms": statistics.median(times)}))
    dist.destroy_process_group()


def run_world(cases, case, mode, world_size, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen(
            [sys.executable, __file__, "--child", "--cases", cases, "--case", case, "--mode", mode,
             "--rank", str(r), "--world-size", str(world_size), "--store", f"{tmp}/store",
             "--repeat", str(repeat)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(world_size)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            line = out.strip().splitlines()[-1] if out.strip() else ""
            try:
                results.append(json.loads(line))
            except json.JSONDecodeError:
                results.append({"found": f"rank exited {p.returncode}: {err.strip()[-200:]}",
                                "ms": float("nan")})
    found = "; ".join(sorted({r["found"] for r in results if r["found"]}))
    return found, max(r["ms"] for r in results)


def cprr_cases(path, world_size):
    """label -> (verdict, seeded_bug, median pooled wall ms) from a cprecord --json report."""
    if not path:
        return {}
    with open(path) as f:
        report = json.load(f)
    out = {}
    for c in report["cases"]:
        if c["world_size"] != world_size:
            continue
        pooled = [e["wall_ms"] for e in c.get("executions", []) if e["mode"] == "pool"]
        out[c["name"]] = (c.get("verdict"), c.get("seeded_bug") or "-",
                          statistics.median(pooled) if pooled else float("nan"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="?")
    ap.add_argument("--cprr", help="cprecord --json report of the same cases (capture on)")
    ap.add_argument("--cprr-off", help="the same with CPRR_OP_CAPTURE=off")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cprr-only", action="store_true",
                    help="print cprr's columns only (no plain or CSAN runs)")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--cases", dest="cases_opt")
    ap.add_argument("--case")
    ap.add_argument("--mode", choices=("plain", "csan"))
    ap.add_argument("--rank", type=int)
    ap.add_argument("--store")
    args = ap.parse_args()
    if args.child:
        args.cases = args.cases_opt
        child(args)
        return 0
    on = cprr_cases(args.cprr, args.world_size)
    off = cprr_cases(args.cprr_off, args.world_size)
    print(f"{'case':<34} {'seeded':<13} {'cprr verdict':<14} {'CSAN':<6} {'plain ms':>9} "
          f"{'CSAN ms':>9} {'cprr ms':>9} {'no-cap ms':>9}")
    rows = []
    for name in sorted(on):
        if args.cprr_only:
            plain_found, plain_ms, csan_found, csan_ms = "", float("nan"), "", float("nan")
        else:
            plain_found, plain_ms = run_world(args.cases, name, "plain", args.world_size,
                                              args.repeat)
            csan_found, csan_ms = run_world(args.cases, name, "csan", args.world_size,
                                            args.repeat)
        verdict, seeded, cprr_ms = on[name]
        off_ms = off.get(name, (None, None, float("nan")))[2]
        csan_named = "race" if "Sanitizer" in csan_found else ("-" if not csan_found else "fail")
        print(f"{name:<34} {seeded:<13} {str(verdict):<14} {csan_named:<6} {plain_ms:9.2f} "
              f"{csan_ms:9.2f} {cprr_ms:9.2f} {off_ms:9.2f}")
        rows.append((name, plain_found, csan_found))
    for name, plain_found, csan_found in rows:
        if plain_found:
            print(f"  {name}: plain run failed: {plain_found}")
        if csan_found:
            print(f"  {name}: CSAN: {csan_found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
