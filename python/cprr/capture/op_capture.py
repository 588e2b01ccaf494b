"""A case's torch ops in cprr's op log, each on the stream it runs on (torch 1.13 and 2.x).

A TorchDispatchMode (what PyTorch's CUDA sanitizer uses) sees every aten op the case body runs.
Each op that touches a tensor of the case, or makes one, becomes one op of the op log:

- on its stream: the current CUDA stream of its device, or the host (cprr.capture.stream_order);
- with the bytes it reads and writes of each tensor's memory (which arguments, from the op's
  schema: cprr.capture.op_schema; which memory: cprr.capture.tensor_table); a tensor the op makes is
  written whole by it, except one from ``torch.empty`` and its family, which nothing wrote;
- a copy between host and device that is not ``non_blocking`` (and ``.item()``) is followed by the
  host waiting for the stream, as torch does.

The capture only delegates to those roles, and to cprr.capture.symmetric for memory in torch's
symmetric windows. Events, stream waits and synchronizations come from torch's CUDA trace hooks
(cprr.capture.gpu_hooks), collectives from cprr.distributed.collectives. What the dispatcher does
not see is counted, never ignored: see `outside` (cprr.capture.outside).
"""

import contextlib

import torch
from torch.utils._mode_utils import no_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from cprr.capture import graphs as _graphs
from cprr.capture import op_schema as _op_schema
from cprr.capture import outside as _outside
from cprr.capture import stream_order as _streams
from cprr.capture import symmetric as _symmetric
from cprr.capture import tensor_table as _tensor_table
from cprr.capture.tensor_table import key_of, storage_bytes
from cprr.capture.where import caller


class OpCapture(_graphs.GraphCalls, TorchDispatchMode):
    """Active while a case body runs (cprr.rank.case_body); one per case execution. `native`: the
    case's native context (the _cprr module's CaseContext). `device_backend`: the world runs on a
    device backend (cuda), so CPU tensors are the host's. `counter`: what counts CUDA work
    outside the op log (cprr.capture.outside), or None. `allocator`: cprr's arena is torch's CUDA
    allocator (cprr.rank.torch_allocator): it reports frees (torch's trace hooks do
    not) and is told of record_stream. `symmetric`: torch's symmetric windows
    (cprr.capture.symmetric.SymmetricSpace; None: torch has none)."""

    def __init__(self, native, device_backend=False, counter=None, allocator=False,
                 symmetric=None):
        super().__init__()
        self._native = native
        self._allocator = allocator
        self._device_index = getattr(native, "device_index", -1)
        self._order = _streams.StreamOrder(native, -1 if device_backend else 0)
        self.host = self._order.host
        self.streams = self._order.numbers
        self._marks = _symmetric.CaseMarks(native, symmetric)
        self.tensors = _tensor_table.TensorTable(native, self._order, self._marks)
        self._outside = _outside.Outside(counter)
        self.outside = self._outside.counts

    # ---- the case's other calls (captures, collectives, symmetric memory) --------------------

    def touches(self, tensors):
        """(buffer, byte offset, bytes) of each tensor, a tensor never seen before included."""
        return self.tensors.touches(tensors)

    def made_symmetric(self, t):
        """torch's symm_mem.empty made `t` past the dispatcher: unwritten memory of the case (its
        window comes with its rendezvous, became_symmetric). A tensor tracked at its address
        before is gone: logged as freed."""
        self.tensors.track_unwritten(t, f"symm_mem.empty{tuple(t.shape)} at {caller()}")

    def became_symmetric(self, t, place):
        """symm_mem.rendezvous registered the window `t`'s memory is in, at `place` in the
        rank's windows (cprr.capture.symmetric.CaseMarks.registered)."""
        self._marks.registered(t, key_of(t), place, self.host)

    def adopt(self, tensor, buffer):
        """`tensor` is over cprr's allocation `buffer` (ctx.symmetric_empty): its ops are logged
        against that allocation."""
        self.tensors.adopt(tensor, buffer)

    def stream_of(self, device):
        """(op-log stream, cudaStream_t) where an op on `device` runs
        (cprr.capture.stream_order)."""
        return self._order.stream_of(device)

    def note(self, what, reads=(), writes=(), stream=None, uses=()):
        """Logs a call outside aten (a capture, a collective, a declared call: cprr.accesses)
        that reads/writes these tensors, or is handed `uses` without knowing how it uses them, on
        `stream` (default: where the tensors are, the current stream for CUDA ones). Returns
        whether a replay asks for synchronize() once the call is issued."""
        return note(self, self._native, what, reads, writes, stream, uses)

    def synchronize(self):
        """A replay's host sync after a noted call (the sync bisection)."""
        self._native.synchronize_library()

    def hold_probe(self, held):
        """A probe replay's probe of the call just noted lasts until held is False (the end of
        a declared block, whose dispatcher ops log before its work is done)."""
        (self._native.hold_probe if held else self._native.release_probe)()

    def used_by(self, tensors, stream):
        """`stream` uses these tensors as record_stream would say (an async collective's)."""
        self.tensors.used_by(tensors, stream)

    def order(self, kind, what, stream, event=-1):
        """An ordering op (record, wait, sync) in the op log."""
        self._order.order(kind, what, stream, event)

    # ---- work outside the op log -------------------------------------------------------------

    def count_outside(self, what):
        """Work the op log cannot see, pending until the next op tells whether it was that op's
        own (cprr.capture.outside.Outside.settle)."""
        self._outside.count(what)

    def _op_begins(self, plan):
        """Before each op: the frees cprr's arena saw since the last one, and what was pending
        settled."""
        if self._allocator:
            self._released()
        self._outside.settle(plan is not None and plan.name in _op_schema.LIFTS)

    def finish(self):
        """At the case's end: what is still pending was outside the op log."""
        self._op_begins(None)

    def in_op(self):
        """Within the block torch runs work this capture logged itself (a collective): what the
        trace hooks report meanwhile is part of it."""
        return self._outside

    @contextlib.contextmanager
    def own_work(self):
        """Within the block the aten ops run are cprr's own (cprr.distributed.staging's host
        copies): no op of the case, and their CUDA work is not outside the op log."""
        with self._outside, no_dispatch():
            yield

    @property
    def inside_op(self):
        return self._outside.inside

    # ---- frees: torch's CUDA trace hooks (cprr.capture.gpu_hooks), or cprr's arena
    # ------------------

    def freed(self, device_index, address):
        """The caching allocator took back the memory at `address` of CUDA device
        `device_index`; its reuse waits for its record_stream uses."""
        self.tensors.forget(("cuda", device_index, address), reused=True)

    def _released(self):
        """What cprr's arena took back since the last op (any thread's frees), in order."""
        for address in self._native.torch_released():
            self.freed(self._device_index, address)

    # ---- aten ops ----------------------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        plan = _op_schema.plan(func)
        self._op_begins(plan)
        if plan is None:
            return self._run(func, args, kwargs)  # not aten (c10d's: cprr.distributed.collectives)
        if plan.name == "record_stream":
            self._record_stream(args[0], args[1])
            return self._run(func, args, kwargs)
        if plan.name in _op_schema.LIFTS and args and isinstance(args[0], torch.Tensor):
            self._lifted(args[0])
        access = _op_schema.Accesses(plan, args, kwargs)
        touches = self.tensors.touches  # the per-op path calls the roles directly
        reads, writes = touches(access.reads), touches(access.writes)
        if not (reads or writes or plan.makes):
            return self._run(func, args, kwargs)
        return self._logged(func, plan, access, (reads, writes), args, kwargs)

    def _run(self, func, args, kwargs):
        """An op the dispatcher saw that the log needs no entry for: its CUDA work and memory
        are not work outside the op log."""
        with self._outside:
            return func(*args, **kwargs)

    def _logged(self, func, plan, access, touched, args, kwargs):
        """Runs an op as one op of the log (`touched`: the bytes it reads, those it writes)."""
        device = _op_schema.device_of(access.every, kwargs)
        stream, handle = self._order.stream_of(device)
        copy = stream >= 0 and plan.copy and _op_schema.crosses(access.every, kwargs)
        kind = "copy" if copy else ("host" if stream < 0 else "kernel")
        where = caller()
        seq, sync_after = self._native.library_op(
            kind, f"aten.{plan.name} at {where}", stream, handle, *touched,
            moves=_op_schema.moves_bytes(plan, access, args, kwargs))
        with self._outside:
            result = func(*args, **kwargs)
        if plan.makes:
            self._made(plan, result, seq, where, (stream, handle), access.every)
        if copy and plan.non_blocking(args, kwargs):
            self._order.pinned_in_use(access.every, stream)
        elif copy or (device is not None and plan.name == "_local_scalar_dense"):
            # A blocking copy between host and device, and .item(), return once it is done.
            self.order("sync", f"aten.{plan.name} waits for its stream", stream)
        if sync_after:
            self._native.synchronize_library()
        return result

    def _record_stream(self, tensor, stream):
        """tensor.record_stream(stream): the memory's reuse waits for `stream` (and cprr's arena,
        when it is torch's allocator, is told so)."""
        if not tensor.is_cuda:
            return
        handle = _streams.native_stream(stream)
        key = key_of(tensor)
        if self._allocator:
            self._native.torch_record_stream(key[2], handle)
        entry = self.tensors.get(key)
        if entry is not None:
            entry.used_on(self.streams.stream(handle))

    def _lifted(self, t):
        """torch.tensor(data) made `t` past the dispatcher, at an address an earlier tensor may
        have had: a new tensor, written by the host (its data) before this op."""
        if t.numel() == 0 or t.device.type not in ("cpu", "cuda"):
            return
        key = key_of(t)
        if not t.is_cuda:
            self.tensors.host_reused(key)
        self.tensors.forget(key)
        what, size = f"torch.tensor{tuple(t.shape)} at {caller()}", storage_bytes(t)
        if t.is_cuda:
            # Its data was copied on the current stream, and the host waited for the copy.
            stream, handle = self.stream_of(t.device)
            seq = self._native.library_op("copy", what, stream, handle, [], [])[0]
            self.order("sync", "torch.tensor waits for its copy", stream)
        else:
            seq = self._native.library_op("host", what, self.host, 0, [], [])[0]
        self.tensors.track_found(t, key, what, size, seq)

    def _made(self, plan, result, seq, where, runs_on, inputs):
        """Tracks the tensors an op made on `runs_on` (op-log stream, cudaStream_t): written by
        op `seq`, or by nobody for the empty family. An address tracked before was freed and
        reused: it names another tensor now."""
        stream, handle = runs_on
        for t, key in _op_schema.made(plan, result, inputs):
            written_by = -1 if plan.name in _op_schema.EMPTY else seq
            # Host memory handed out again only after the async calls that held it (the op
            # was logged before its result's address was known), or pinned memory only after
            # the copies that used it: written after those waits, not by the op logged before.
            held = not t.is_cuda and self.tensors.host_reused(key) and stream == self.host
            pinned = stream < 0 and self._order.pinned_reused(key)
            if (held or pinned) and written_by >= 0:
                written_by = self._native.library_op(
                    "host", f"aten.{plan.name} at {where} (writes the memory reused)", self.host,
                    0, [], [])[0]
            self.tensors.track_made(t, key, f"torch.{plan.name}{tuple(t.shape)} at {where}",
                                    handle, written_by, stream)


def note(capture, native, what, reads, writes, stream, uses=()):
    """OpCapture.note for either capture (this one, cprr.capture.native_capture's): `capture`'s
    touches and streams, logged into `native`. Returns whether to sync after the call."""
    r, w, u = capture.touches(reads), capture.touches(writes), capture.touches(uses)
    if not (r or w or u):
        return False
    if stream is None:
        tensors = list(reads) + list(writes) + list(uses)
        stream, handle = capture.stream_of(_op_schema.device_of(tensors, {}))
    else:
        handle = _streams.NO_NATIVE_STREAM  # a stream cprr models (an async collective's)
    return native.library_op("kernel" if stream >= 0 else "host", f"{what} at {caller()}",
                             stream, handle, r, w, touches=u)[1]


class Idle:
    """A native side that records nothing (what warm_up's capture reports to, and a profile's):
    every call the capture and the collectives make, answered with increasing numbers."""

    def __init__(self):
        self._next = 0

    def _number(self):
        self._next += 1
        return self._next - 1

    def track(self, *args, **kwargs):
        return self._number()

    def library_op(self, *args, **kwargs):
        return self._number(), False

    def enter_collective(self, *args, **kwargs):
        return self._number()

    enter_p2p = enter_collective

    def library_order(self, *args):
        pass

    def torch_released(self):
        return []

    def hold_probe(self):
        pass

    untrack = complete_collective = collective_raised = note_group = note_unseen = \
        torch_record_stream = release_probe = library_order


def warm_up(capture=OpCapture):
    """Runs a few CPU ops under a `capture` (OpCapture, or cprr.capture.native_capture's) once,
    before any case: the first use of a dispatch mode makes torch 2.x import torch._dynamo, sympy
    and more (measured 5-6 s on the GPU machine, where they have no bytecode cache), which would
    otherwise land in the first case of every rank; the C++ capture works out its first ops'
    plans. The template process pays it once for every rank it forks; a spawned rank before its
    hello, where standby hides it. Touches no GPU."""
    with capture(Idle()):
        a = torch.empty(4)
        a.fill_(1.0)
        a += torch.ones(4)
        a.sum()
