"""A sampling profiler for every Python process of a run, ranks and their helpers included: where a
case's wall time goes when no single process can be profiled from start to end (pooled ranks are
killed, not ended; forked children lose their parent's threads).

Put this folder first on PYTHONPATH and set CPRR_SAMPLE_DIR: each process (and each process
forked from one) samples its main thread's stack every CPRR_SAMPLE_MS (default 2) ms and rewrites
DIR/<pid>.json every second (a process that lives less than that leaves none) with, per frame (file:function), the samples whose stack held it
(inclusive) and those where it was the innermost Python frame (own). tools/device/stack_report.py
adds the files up. Samples of a thread waiting in C (a collective, a sleep) count for the Python
frame that called it.
"""

import json
import os
import sys
import threading
import time

_DIR = os.environ.get("CPRR_SAMPLE_DIR", "")


def _key(frame):
    code = frame.f_code
    return f"{os.path.basename(code.co_filename)}:{code.co_name}"


def _sample(target_ident, period):
    inclusive, own = {}, {}
    path = os.path.join(_DIR, f"{os.getpid()}.json")
    last_write = time.monotonic()
    total = 0
    while True:
        time.sleep(period)
        frame = _ALL_FRAMES().get(target_ident)
        if frame is None:
            return
        total += 1
        own[_key(frame)] = own.get(_key(frame), 0) + 1
        seen = set()
        while frame is not None:
            k = _key(frame)
            if k not in seen:
                seen.add(k)
                inclusive[k] = inclusive.get(k, 0) + 1
            frame = frame.f_back
        if time.monotonic() - last_write > 1.0:
            last_write = time.monotonic()
            doc = {"pid": os.getpid(), "argv": sys.argv[:3], "period_s": period,
                   "samples": total, "inclusive": inclusive, "own": own}
            with open(path + ".tmp", "w") as f:
                json.dump(doc, f)
            os.replace(path + ".tmp", path)


_ALL_FRAMES = sys._current_frames
_SAMPLERS = set()


def _frames_but_samplers():
    """sys._current_frames without the sampler: cprr refuses to fork a template with threads of
    Python code (cprr.rank.import_probe), and the sampler must not change what a run does."""
    return {k: v for k, v in _ALL_FRAMES().items() if k not in _SAMPLERS}


def _start():
    period = float(os.environ.get("CPRR_SAMPLE_MS", "2")) / 1000.0
    t = threading.Thread(target=_sample, args=(threading.get_ident(), period),
                         name="cprr-stack-sampler", daemon=True)
    t.start()
    _SAMPLERS.clear()  # a forked child's: its parent's sampler thread is gone
    _SAMPLERS.add(t.ident)


if _DIR:
    os.makedirs(_DIR, exist_ok=True)
    sys._current_frames = _frames_but_samplers
    _start()
    os.register_at_fork(after_in_child=_start)
