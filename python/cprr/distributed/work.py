"""How a logged torch.distributed call runs: on the stream it runs on (the tensors' current
stream, the host for CPU tensors, or a stream of its own when async), its Work's wait() as the
ordering after it, and a call that raises distrusting the world's transport.
"""

import contextlib

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
        native.distrust_transport(f"dist.{name} raised {type(e).__name__}: {first}"[:300])
        raise


class Work:
    """The Work of an async call: its wait() is where the case's stream (the host, for CPU
    tensors) is ordered after the call, so that is logged; everything else is the Work's."""

    def __init__(self, work, capture, name, event, device, waited=False):
        self._work = work
        self._capture = capture
        self._name = name
        self._event = event
        self._device = device
        # A replay's sync after the call waited for it already (_complete_now). Not again: a Gloo
        # send's Work waits for one more send at each wait(), which never comes.
        self._waited = waited
        self.when_done = None  # called once with the torch Work when it is known done

    def _wait_once(self, *args, **kwargs):
        if self._waited:
            return True  # what torch's wait() returns
        return self._work.wait(*args, **kwargs)

    def _done(self):
        if self.when_done is not None:
            when_done, self.when_done = self.when_done, None
            when_done(self._work)

    def wait(self, *args, **kwargs):
        c = _running.capture()
        if c is not self._capture:  # waited for after its case ended: nothing to order
            return self._wait_once(*args, **kwargs)
        with c.in_op(), distrusted_on_raise(_running.current(), f"{self._name} Work.wait()"):
            result = self._wait_once(*args, **kwargs)
        c.order("wait", f"dist.{self._name} Work.wait()", c.stream_of(self._device)[0],
                self._event)
        self._done()
        return result

    def is_completed(self):
        """Polling instead of waiting: once it says True, what the case does next is ordered
        after the call, as after wait()."""
        done = self._work.is_completed()
        c = _running.capture()
        if done and c is self._capture:
            c.order("wait", f"dist.{self._name} Work.is_completed()",
                    c.stream_of(self._device)[0], self._event)
            self._done()
        return done

    def __getattr__(self, attr):
        return getattr(self._work, attr)


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
        return [Work(w, c, name, done, device, waited) for w in work]
    return Work(work, c, name, done, device, waited)


def _complete_now(work):
    """A replay syncs after this call (serialized, a sync bisection's prefix, the fix applied):
    the host waits for the call itself, whose work a device sync does not cover (gloo's thread,
    NCCL's stream), so what the case issues next runs after it. Its Work stays the case's to wait
    for (Work, told so, does not wait again: a Gloo send's would wait for one more send); nothing
    is logged, so the op log stays the record's."""
    for w in work if isinstance(work, list) else [work]:
        if w is not None and hasattr(w, "wait"):
            w.wait()
