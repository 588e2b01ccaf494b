"""The Python rank process: ``cprr-pyworker [--cases PATH]... [--script SPEC]... [--pytest SPEC]
<the rank's arguments>``.

cprecord and cpreplay start it as they start cpworker (``cprecord --python PATH...``). It imports
torch, wraps torch.distributed's collectives, imports the case files (cprr.suites.case_files),
registers their ``@cprr.case`` functions (cprr.rank.case_body) with the compiled rank runtime
(``cprr._cprr``) and hands over to the same worker loop as cpworker (cprr.rank.worker_loop): the
control protocol, the watchdog, the flight record, the arenas and the capture hashing are
cpworker's. What is Python's is each case's set-up: seeding, the default process group, and the
traceback of a failure.

With ``--template FD`` it does the same imports and registrations, then forks ranks on request
instead of being one (cprr.rank.template): the controller starts one such process per run, and a
fresh world's ranks skip the seconds of imports.
"""

import argparse
import os
import sys

from cprr.rank import case_body as _case_body
from cprr.rank import template as _template


def _split(argv):
    """The worker's own arguments (--cases, --script, --pytest, --template) and the rank's (the
    rest)."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--cases", action="append", default=[])
    ap.add_argument("--script", action="append", default=[])  # cprecord --torchrun's (JSON)
    ap.add_argument("--pytest", default=None)  # cprecord --pytest's (JSON)
    ap.add_argument("--template", type=int, default=None)
    return ap.parse_known_args(argv)


def _rank_argv(argv):
    """The rank's command line from a whole one: the worker, then the rank's own arguments."""
    _, rest = _split(argv[1:])
    return [argv[0]] + rest


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    known, rank_args = _split(argv)
    if known.template is not None:
        _template.die_with_parent()
        # torch >= 2.0 then answers a case file's import-time torch.cuda.is_available() from
        # NVML instead of initializing the CUDA driver, which no forked rank could use. The
        # ranks get their own environment, without it.
        os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # Only now: the rank's set-up imports torch (seconds, during which a template must already
    # die with its controller) and then the compiled module (cprr.rank.worker_loop says why).
    from cprr.rank import worker_loop as _worker_loop

    rank = _worker_loop.load(known.cases, known.script, pytest=known.pytest is not None,
                            template=known.template is not None, rank_argv=rank_args)
    if known.pytest is None:
        return _serve(known, argv, rank)
    from cprr.rank import import_probe as _import_probe
    from cprr.suites import pytest_items as _pytest_items

    if known.template is not None:
        why = _import_probe.why_in_rank(_pytest_items.collect, known.pytest)
        if why:  # pytest collects in each rank, after the fork; torch stays the template's
            print(f"cprr: pytest collects in each rank, not once per run: its collection {why}",
                  file=sys.stderr)
            return _serve(known, argv, rank, lambda rank_argv: _worker_loop.collect_and_serve(
                rank, known.pytest, _rank_argv(rank_argv)))

    return _worker_loop.pytest_session(rank, known.pytest, lambda: _serve(known, argv, rank))


def _serve(known, argv, rank, run_rank=None):
    """The template's fork loop (its ranks run `run_rank(argv)`, by default the worker loop), or
    the rank's worker loop: its exit status."""
    from cprr.rank import worker_loop as _worker_loop

    if known.template is not None:
        status = _template.serve(known.template, run_rank or (
            lambda rank_argv: _worker_loop.serve(rank, _rank_argv(rank_argv))))
        # As a rank leaves (worker.cpp's _Exit): static destructors would release the case
        # bodies, which takes the GIL of an interpreter already finalized, and hangs.
        _case_body.flush()
        os._exit(status)
    return _worker_loop.serve(rank, _rank_argv([sys.argv[0] if sys.argv else "cprr-pyworker"]
                                              + argv))

if __name__ == "__main__":
    sys.exit(main())
