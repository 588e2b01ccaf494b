"""How a logged torch.distributed call runs: on the stream it runs on (the tensors' current
stream, the host for CPU tensors, or a stream of its own when async), its Work's wait() as the
ordering after it, and a call that raises distrusting the world's transport.
"""

import contextlib
import weakref

from cprr.api import running as _running
from cprr.capture.op_schema import device_of
from cprr.distributed import fingerprint as _fingerprint


@contextlib.contextmanager
def distrusted_on_raise(native, name):
    """A torch.distributed call `name` that raises may leave the world's transport broken (a
    Gloo pair closed mid-message, a peer still waiting): the world is replaced after the case
    rather than handed the next one, which would fail for it."""
    try:
        yield
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        native.distrust_transport(f"dist.{name} raised {type(e).__name__}: {first}"[:300] +
                                  " (its transport may be broken)")
        raise


# torch's Work of each async call of a case (and of each staged message) -> what cprr does once
# the case knows it done (_Entry). The case is handed torch's own Work, not a wrapper: torch's C++
# takes it back (DDP's join hands Join's all_reduce Work to its reducer), and isinstance(w,
# dist.Work) holds. What cprr does is hooked into the Work's class (its wait and is_completed,
# _patch), for the Works in this table alone.
_TRACKED = weakref.WeakKeyDictionary()


class _Entry:
    """What waiting for one Work means to cprr: the ordering it logs (`capture`, `name`, `event`:
    the call's done event, `device`), whether a replay's sync already waited for it (`waited`),
    and what runs once it is known done (`callbacks`: a staged message's copy-in, a recv from
    any source's numbering)."""

    def __init__(self):
        self.capture = None
        self.name = self.event = self.device = None
        # A replay's sync after the call waited for it already (_complete_now). Not again: a Gloo
        # send's Work waits for one more send at each wait(), which never comes.
        self.waited = False
        self.callbacks = []

    def done(self, work):
        """The Work is known done: its callbacks run, once."""
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback(work)

    def _case_capture(self):
        """The running case's capture when the call is that case's; else None (a Work waited
        for after its case ended, or one no case issued: nothing to order)."""
        c = _running.capture()
        return c if self.capture is not None and c is self.capture else None

    def wait(self, work, original, args, kwargs):
        c = self._case_capture()
        with contextlib.ExitStack() as block:
            if c is not None:
                block.enter_context(c.in_op())
                block.enter_context(distrusted_on_raise(_running.current(),
                                                        f"{self.name} Work.wait()"))
            result = True if self.waited else original(work, *args, **kwargs)
        self.ordered("Work.wait()")
        self.done(work)
        return result

    def ordered(self, how):
        """What the case does next is ordered after the call (`how`: what said so)."""
        c = self._case_capture()
        if c is not None:
            c.order("wait", f"dist.{self.name} {how}", c.stream_of(self.device)[0], self.event)

    def polled(self, work):
        """is_completed() said True: what the case does next is ordered after the call, as
        after wait()."""
        self.ordered("Work.is_completed()")
        self.done(work)


def _patched_wait(original):
    def wait(self, *args, **kwargs):
        entry = _TRACKED.get(self)
        if entry is None:
            return original(self, *args, **kwargs)
        return entry.wait(self, original, args, kwargs)

    wait.__cprr_wrapped__ = original
    return wait


def _patched_is_completed(original):
    def is_completed(self, *args, **kwargs):
        done = original(self, *args, **kwargs)
        entry = _TRACKED.get(self)
        if done and entry is not None:
            entry.polled(self)
        return done

    is_completed.__cprr_wrapped__ = original
    return is_completed


_PATCHES = {"wait": _patched_wait, "is_completed": _patched_is_completed}


def _patch(cls):
    """cls's wait and is_completed look the Work up in _TRACKED (once per class: a subclass that
    inherits them patched is left as it is). False where the class takes no attribute."""
    for name, patched in _PATCHES.items():
        current = getattr(cls, name, None)
        if current is None or hasattr(current, "__cprr_wrapped__"):
            continue
        try:
            setattr(cls, name, patched(current))
        except (TypeError, AttributeError):
            return False
    return True


def _entry(work):
    """work's entry in _TRACKED, made (and its class patched) the first time; None for an object
    cprr cannot follow (its class takes no attribute, or it no weak reference)."""
    try:
        entry = _TRACKED.get(work)
        if entry is None and _patch(type(work)):
            entry = _TRACKED[work] = _Entry()
        return entry
    except TypeError:
        return None


def on_done(work, callback):
    """callback(work) runs once `work` is known done: when the case's wait() returns, when its
    is_completed() first says True, or at a replay's sync (_complete_now). A Work cprr cannot
    follow is waited for at once."""
    entry = _entry(work)
    if entry is None:
        work.wait()
        callback(work)
    else:
        entry.callbacks.append(callback)


def handed_over(work, to):
    """The case handed `work` to torch's C++ (`to`), which waits for it there, unseen, before it
    uses what the call wrote (DDP's reducer and Join's all_reduce): logged as the case's wait at
    the hand-over, the last place cprr sees. The call's tensor is torch's own from then on."""
    entry = _TRACKED.get(work) if work is not None else None
    if entry is not None:
        entry.ordered(f"Work handed to {to}")


def _track(work, capture, name, event, device, waited):
    entry = _entry(work)
    if entry is not None:
        entry.capture, entry.name, entry.event, entry.device = capture, name, event, device
        entry.waited = entry.waited or waited
    return work


def issue(name, bound, call, native, what):
    """Runs `call` (the torch call) logged on the stream it runs on: the tensors' current stream
    (the host for CPU tensors) when it returns done, or a stream of its own when async_op=True,
    ordered after what the caller's stream issued before and before the Work's wait()."""
    c = _running.capture()
    if c is None:
        what(0)
        return call()
    reads, writes = _fingerprint.access(name, bound)
    reads, writes = _fingerprint.tensors_of(bound, reads), _fingerprint.tensors_of(bound, writes)
    device = device_of(reads + writes, {})
    stream = c.stream_of(device)[0]
    is_async = (bool(bound.get("async_op", False))
                or name in ("isend", "irecv", "batch_isend_irecv"))
    if is_async:
        stream_of_call = c.streams.new_stream()
        if stream >= 0:
            event = c.streams.new_event()
            c.order("record", f"dist.{name} issued", stream, event)
            c.order("wait", f"dist.{name} starts after what was issued before it",
                    stream_of_call, event)
        # (Called from the host, for CPU tensors on cuda: a stream op follows everything the host
        # issued before it, so there is nothing to record.)
        stream = stream_of_call
    # An async collective says so in its name: a race with it is fixed by waiting on its Work.
    label = f"dist.{name}(async_op=True)" if bound.get("async_op") else f"dist.{name}"
    sync_after = c.note(label, reads, writes, stream=stream)
    what(stream)
    with c.in_op():
        work = call()
        if sync_after:
            _complete_now(work)
            c.synchronize()
    if not is_async or work is None:
        return work
    done = c.streams.new_event()
    c.order("record", f"dist.{name} done", stream, done)
    c.used_by(reads + writes, stream)
    waited = bool(sync_after)
    if isinstance(work, list):  # batch_isend_irecv: a Work per op (or one for the batch)
        return [_track(w, c, name, done, device, waited) for w in work]
    return _track(work, c, name, done, device, waited)


def _complete_now(work):
    """A replay syncs after this call (serialized, a sync bisection's prefix, the fix applied):
    the host waits for the call itself, whose work a device sync does not cover (gloo's thread,
    NCCL's stream), so what the case issues next runs after it. Its Work stays the case's to wait
    for (Work, told so, does not wait again: a Gloo send's would wait for one more send); nothing
    is logged, so the op log stays the record's."""
    for w in work if isinstance(work, list) else [work]:
        if w is not None and hasattr(w, "wait"):
            # Not yet tracked for its case (issue marks it waited): torch's own wait, and what
            # was to run once it is done (a staged message's copy-in).
            w.wait()
