"""cprr.distributed.collectives: torch.distributed calls fingerprinted into the running case's
native context (cprr.distributed.fingerprint), issued on their stream with their Work
(cprr.distributed.work), in the groups cprr.distributed.groups numbers.

A real gloo process group of world size 1; the native context is conftest's FakeNative, whose
enter_collective returns sequence numbers of its own.
"""

import pytest
import torch
import torch.distributed as dist

from conftest import FakeNative
from cprr.api import running as _running
from cprr.capture import op_capture as _op_capture
from cprr.distributed import collectives as _collectives


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    _collectives.install()
    yield dist.group.WORLD
    dist.destroy_process_group()


def record(fn, first_seq=100):
    native = FakeNative(first_collective=first_seq)
    with _running.running(native):
        fn()
    return native


def test_install_wraps_the_package_and_c10d(group):
    from torch.distributed import distributed_c10d as c10d

    for name in ("all_reduce", "broadcast", "all_gather", "barrier", "send", "recv",
                 "batch_isend_irecv"):
        assert hasattr(getattr(dist, name), "__cprr_wrapped__"), name
        assert getattr(c10d, name) is getattr(dist, name), name
    before = dist.all_reduce
    _collectives.install()  # a second install wraps nothing twice
    assert dist.all_reduce is before


def test_all_reduce_sum_f32(group):
    t = torch.ones(10)
    native = record(lambda: dist.all_reduce(t))
    assert native.collectives == [("enter", 100, ("all_reduce", "f32", 40, -1, "sum")),
                             ("complete", 100)]
    assert torch.equal(t, torch.ones(10))  # the call itself still happened (world of one)


def test_all_reduce_max_i64(group):
    t = torch.arange(3, dtype=torch.int64)
    native = record(lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX))
    assert native.fingerprints() == [("all_reduce", "i64", 24, -1, "max")]


def test_all_reduce_min_by_keyword_and_position(group):
    t = torch.ones(2, dtype=torch.float64)
    native = record(lambda: (dist.all_reduce(t, dist.ReduceOp.MIN),
                             dist.all_reduce(tensor=t, op=dist.ReduceOp.MIN)))
    assert native.fingerprints() == [("all_reduce", "f64", 16, -1, "min")] * 2


def test_all_reduce_product_is_told_apart_by_its_kind(group):
    # torch 1.13's str(ReduceOp.PRODUCT) is '<... ReduceOp object at 0x...>': the kind must come
    # from the op's name, never from an address that differs between ranks.
    t = torch.ones(4)
    native = record(lambda: dist.all_reduce(t, op=dist.ReduceOp.PRODUCT))
    assert native.fingerprints() == [("all_reduce(product)", "f32", 16, -1, "sum")]


def test_all_reduce_with_a_red_op_type(group):
    red = getattr(dist.ReduceOp, "RedOpType", None)
    if red is None:
        pytest.skip("this torch has no ReduceOp.RedOpType")
    t = torch.ones(4)
    native = record(lambda: (dist.all_reduce(t, op=red.MAX), dist.all_reduce(t, op=red.PRODUCT)))
    assert native.fingerprints() == [("all_reduce", "f32", 16, -1, "max"),
                                     ("all_reduce(product)", "f32", 16, -1, "sum")]


def test_broadcast_root_is_src(group):
    t = torch.zeros(5, dtype=torch.int32)
    native = record(lambda: dist.broadcast(t, src=0))
    assert native.fingerprints() == [("broadcast", "i32", 20, 0, "sum")]


def test_all_gather_counts_the_input_bytes(group):
    inp = torch.ones(5, dtype=torch.float64)
    out = [torch.empty(5, dtype=torch.float64)]
    native = record(lambda: dist.all_gather(out, inp))
    assert native.fingerprints() == [("all_gather", "f64", 40, -1, "sum")]
    assert torch.equal(out[0], inp)


def test_barrier(group):
    native = record(lambda: dist.barrier())
    assert native.fingerprints() == [("barrier", "u8", 0, -1, "sum")]


def test_each_call_enters_then_completes_with_its_own_seq(group):
    t = torch.ones(2)
    native = record(lambda: (dist.all_reduce(t), dist.barrier(), dist.broadcast(t, 0)), 5)
    assert [e[:2] for e in native.collectives] == [("enter", 5), ("complete", 5), ("enter", 12),
                                              ("complete", 12), ("enter", 19), ("complete", 19)]


def test_an_async_call_is_recorded_when_issued(group):
    t = torch.ones(2)
    native = FakeNative()
    with _running.running(native):
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert [e[0] for e in native.collectives] == ["enter", "complete"]


def test_calls_outside_running_are_not_recorded(group):
    native = FakeNative()
    with _running.running(native):
        pass
    dist.all_reduce(torch.ones(2))
    dist.barrier()
    assert native.collectives == []
    assert _running.current() is None


def test_a_subgroup_call_is_recorded_in_its_group_which_is_noted_once(group):
    sub = dist.new_group([0])
    assert sub is not dist.group.WORLD
    t = torch.ones(3)
    native = record(lambda: (dist.all_reduce(t, group=sub), dist.barrier(group=sub),
                             dist.all_reduce(t, group=group)))
    assert native.fingerprints() == [("all_reduce", "f32", 12, -1, "sum"),
                                     ("barrier", "u8", 0, -1, "sum"),
                                     ("all_reduce", "f32", 12, -1, "sum")]
    (first, members, where), second, world = native.entered_in
    assert first >= 1 and members == 0b1, native.entered_in  # made before the case: its number
    assert second[:2] == (first, members)
    assert world[:2] == (0, 0), "the world explicitly given is the world"
    assert where.startswith("test_collectives.py:"), where
    assert native.groups == [(first, [0], "gloo", "")], "noted once, at its first use"


def test_the_groups_of_one_split_are_numbered_in_the_order_the_call_lists_them(group):
    from cprr.distributed import groups as _groups

    first = _groups.case_started()
    marker = object()
    # A split into 3 groups whose second is this rank's, then one this rank is in none of.
    assert _groups.made_split(marker, 3, 1) == first + 1
    assert _groups.made_split(None, 2, None) is None
    assert _groups.case_started() == first + 5, "every group of both calls has its number"
    assert _groups._registry.ids[id(marker)][0] == first + 1
    _groups.case_ended(first)
    assert id(marker) not in _groups._registry.ids


def test_a_group_made_in_a_case_is_numbered_from_where_the_case_began(group):
    from cprr.distributed import groups as _groups

    first = _groups.case_started()
    native = FakeNative()
    with _running.running(native):
        made = [dist.new_group([0]), dist.new_group([0])]
        dist.all_reduce(torch.ones(1), group=made[1])
    _groups.case_ended(first)
    assert [g[0] for g in native.groups] == [first, first + 1], "noted as made"
    assert native.entered_in[0][0] == first + 1
    for g in made:
        dist.destroy_process_group(g)
    # The next case's first group gets the same number, as a fresh rank's would.
    assert _groups.case_started() == first


def steps(native):
    """The log in short: [op, stream, reads, writes], [ordering, stream, event] and
    ["collective <kind>", stream]."""
    out = []
    for o in native.log:
        if o["kind"] in ("record", "wait", "sync"):
            out.append([o["kind"], o["stream"], o["event"]])
        elif o["kind"] == "collective":
            out.append(["collective " + o["name"], o["stream"]])
        else:
            out.append([o["name"].split(" at ")[0], o["stream"], o["reads"], o["writes"]])
    return out


def test_a_collective_is_logged_with_its_tensors_on_their_stream(group):
    native = FakeNative()
    capture = _op_capture.OpCapture(native)
    with _running.running(native, capture), capture:
        assert _running.capture() is capture
        acc = torch.empty(8)
        dist.all_reduce(acc)
    assert steps(native)[1:] == [
        ["dist.all_reduce", 0, [(1, 0, 32)], [(1, 0, 32)]],
        ["collective all_reduce", 0],
    ]
    assert native.fingerprints() == [("all_reduce", "f32", 32, -1, "sum")]


def test_an_async_collective_runs_on_its_own_stream_until_its_work_is_waited_for(group):
    native = FakeNative()
    capture = _op_capture.OpCapture(native)
    with _running.running(native, capture), capture:
        t = torch.ones(4)
        work = dist.all_reduce(t, async_op=True)
        t.sum()  # before wait(): unordered with the collective's write
        work.wait()
        t.sum()  # after: ordered
    stream = steps(native)[2][1]
    assert stream > 0
    assert steps(native)[1:] == [
        ["record", 0, 0],  # what the case issued before the call...
        ["wait", stream, 0],  # ...comes before it on its stream
        ["dist.all_reduce(async_op=True)", stream, [(1, 0, 16)], [(1, 0, 16)]],
        ["collective all_reduce", stream],
        ["record", stream, 1],  # done
        ["aten.sum", 0, [(1, 0, 16)], [(2, 0, 4)]],
        ["wait", 0, 1],  # Work.wait(): the case's stream waits for the call
        ["aten.sum", 0, [(1, 0, 16)], [(3, 0, 4)]],
    ]
    assert native.collectives[-1][0] == "complete"


def test_an_async_call_from_the_host_on_a_device_backend_records_nothing_on_the_host(group):
    # CPU tensors on cuda: the caller is the host (-1), which records no event; the call's own
    # stream follows what the host issued before it by issue order, and Work.wait() is the host
    # waiting for the call's done event.
    native = FakeNative(backend="cuda")
    capture = _op_capture.OpCapture(native, device_backend=True)
    with _running.running(native, capture), capture:
        t = torch.ones(4)
        dist.all_reduce(t, async_op=True).wait()
    log = steps(native)
    assert all(not (s[0] == "record" and s[1] < 0) for s in log), log
    call = next(s for s in log if s[0] == "dist.all_reduce(async_op=True)")
    assert call[1] > 0, log  # a stream of its own
    assert ["record", call[1], 0] in log, log  # done, on that stream
    assert log[-1] == ["wait", -1, 0], log  # Work.wait(): the host waits for it


def test_a_work_polled_until_completed_orders_what_follows_as_a_wait_does(group):
    native = FakeNative()
    capture = _op_capture.OpCapture(native)
    with _running.running(native, capture), capture:
        t = torch.ones(4)
        work = dist.all_reduce(t, async_op=True)
        while not work.is_completed():
            pass
        t.sum()
    log = steps(native)
    done = next(s for s in log if s[0] == "record" and s[1] > 0)
    assert log[-2] == ["wait", 0, done[2]], log  # is_completed() said True: ordered
    assert log[-1][0] == "aten.sum", log


def test_an_uneven_all_to_all_records_its_bytes_per_peer_in_rows(group):
    # World of one: this rank's split to itself, 3 rows of 4 f32 (16 bytes each) each way.
    out, inp = torch.empty(3, 4), torch.ones(3, 4)
    native = record(lambda: dist.all_to_all_single(out, inp, output_split_sizes=[3],
                                                   input_split_sizes=[3]))
    assert native.fingerprints() == [("all_to_all_v", "f32", 48, -1, "sum")]
    assert native.splits == [([48], [48], 16)]
    # Even splits are an all_to_all whose bytes are compared whole: no per-peer record.
    native = record(lambda: dist.all_to_all_single(out, inp))
    assert native.fingerprints() == [("all_to_all", "f32", 48, -1, "sum")]
    assert native.splits == [([], [], 0)]


def test_a_call_that_raises_tells_the_native_context_its_transport_is_distrusted(group):
    """A torch.distributed call that raises may leave the transport broken (a Gloo pair closed
    mid-message): the case's world is replaced after it, so the next case does not fail for it."""
    t = torch.ones(4)
    native = FakeNative()
    with _running.running(native):
        with pytest.raises(Exception):
            dist.broadcast(t, src=3)  # no rank 3 in a world of one
        dist.all_reduce(t)  # a call that returns distrusts nothing
    assert len(native.distrusted) == 1
    assert native.distrusted[0].startswith("dist.broadcast raised ")
    assert record(lambda: dist.all_reduce(t)).distrusted == []


def test_a_monitored_barrier_that_raises_distrusts_the_transport_and_logs_nothing(group):
    """monitored_barrier is in no op log, but one that timed out leaves its peers' pairs closed
    (torch's DistributedTest: a pooled world's next all_reduce failed with 'Application timeout
    caused pair closure')."""
    assert hasattr(dist.monitored_barrier, "__cprr_wrapped__")
    native = record(lambda: dist.monitored_barrier())
    assert native.distrusted == [] and native.fingerprints() == []
    native = FakeNative()
    with _running.running(native):
        with pytest.raises(Exception):
            dist.monitored_barrier(timeout="not a timedelta")
    assert len(native.distrusted) == 1
    assert native.distrusted[0].startswith("dist.monitored_barrier raised ")
