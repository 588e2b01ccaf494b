"""The CUPTI count of CUDA work a case's thread issued outside every op of its op log
(python/native/unseen_work.h), started once per cuda rank process: where CUPTI may be found, and
why it is not counted where it cannot be.
"""

import glob
import os
import sys

import torch


def _cupti_libraries():
    """Where CUPTI may be: the loader's path, torch's own wheels, the CUDA toolkit."""
    found = ["libcupti.so", "libcupti.so.13", "libcupti.so.12"]
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    for pattern in (f"{site}/nvidia/**/libcupti.so*",
                    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*",
                    "/usr/local/cuda*/lib*/libcupti.so*"):
        found += sorted(glob.glob(pattern, recursive=True))
    return found


def start_counter(rank, native, module):
    """Counting the CUDA work no op of the op log covers (native/unseen_work.h) into
    `rank.counter` (False: it cannot). CPRR_UNSEEN_WORK=off leaves CUPTI to a profiler of the
    user's. `module`: the _cprr module, which counts."""
    if rank.counter is not None or native.backend != "cuda":
        return
    if os.environ.get("CPRR_UNSEEN_WORK") == "off":
        why = "CPRR_UNSEEN_WORK=off"
    else:
        why = module.unseen_start(_cupti_libraries())
    if why:
        print(f"cprr: CUDA work outside the op log is not counted: {why}", file=sys.stderr)
        rank.counter = False
    else:
        rank.counter = module
