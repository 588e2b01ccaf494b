"""What the worker loop calls for each case: the ``@cprr.case`` function run after the rank's
set-up for it (cprr.rank.case_setup.Rank.prepare), under an op capture, with the case set as
running on its thread (cprr.api.running), its failure turned into the report's traceback.

Imports neither torch nor the compiled module: the rank (cprr.rank.worker_loop) has them.
"""

import os
import sys
import traceback

from cprr.api import running as _running
from cprr.api.context import Context
from cprr.api.skips import skip_reason


def flush():
    """The rank's stdout and stderr: after each case (its output before its report) and before
    the rank leaves."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a case that closed its stdout
            pass


def _report_outside(native, capture, counter):
    """What the case did that the op log cannot see, as one op the report names."""
    capture.finish()
    if counter:
        for what, n in counter.unseen_take().items():
            capture.outside[f"{what} outside any op the dispatcher saw"] = n
    if capture.outside:
        what = ", ".join(f"{n} {w}" for w, n in sorted(capture.outside.items()))
        native.note_unseen(f"{sum(capture.outside.values())} outside the op log: {what}")


# The package's root folder: every room of it is cprr's code.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _users_frames(e):
    """`e`'s traceback from the first frame outside cprr's package on: this function's frame and
    the suite's runners (cprr.suites.testcase, cprr.suites.scripts) are cprr's, not the user's. An
    exception that is cprr's report of the user's failure (`reports_failure`: a script's exit
    status, a pytest item's report) has no frame of its own to show; any other one raised inside
    cprr keeps cprr's frames, after this function's."""
    tb = e.__traceback__
    while tb is not None and \
            os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        tb = tb.tb_next
    if tb is None and not getattr(e, "reports_failure", False):
        return e.__traceback__.tb_next or e.__traceback__
    return tb


def body(definition, rank):
    """The body the worker loop calls with the case's native context (the _cprr module's
    CaseContext): returns None when the case passed, ("skip", reason) when it skipped itself,
    else its traceback. `rank`: the cprr.rank.case_setup.Rank it runs in."""

    def run(native):
        active = None  # the running block: the process groups the case made, to end
        try:
            ctx = Context(native, definition, rank.prepare(native), rank.rendezvous)
            if os.environ.get("CPRR_OP_CAPTURE") == "off":  # only to measure what capture costs
                active = _running.running(native)
                with active:
                    definition.body(ctx)
                return None
            # The body's own frame comes next in a failure's traceback: no helper between.
            counter = rank.counter or None
            if counter:
                counter.unseen_take()  # what the world did before this case is not the case's
                counter.unseen_watch(True)
            capture = rank.op_capture(native, counter)
            active = _running.running(native, capture)
            try:
                with active, capture:
                    definition.body(ctx)
            finally:
                if counter:
                    counter.unseen_watch(False)
                _report_outside(native, capture, counter)
            return None
        except BaseException as e:  # a failure of the case: its traceback is the report
            reason = skip_reason(e)
            if reason is not None:
                return ("skip", reason)
            return "".join(traceback.format_exception(type(e), e, _users_frames(e)))
        finally:
            if active is not None:
                rank.end_case(native, active.groups)
            flush()

    return run


def register(definitions, native_module, rank):
    """Registers each case with `native_module` (the _cprr module); a name registered twice is
    an error the worker reports, naming both definitions."""
    first = {}
    for d in definitions:
        if d.name in first:
            native_module.add_error(
                f"case '{d.name}' is defined twice: at {first[d.name].source} and at {d.source}; "
                "give one of them another name (@cprr.case(name=...))")
            continue
        first[d.name] = d
        native_module.add_case(d.name, d.native_options(native_module), body(d, rank))
