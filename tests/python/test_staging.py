"""Point-to-point messages staged through host memory (cprr.distributed.staging), where the
world's transport says so (cprr.distributed.process_group): the transport sees a host copy of what is sent, and what it receives into a host tensor reaches the case's tensor at
once for recv and only once its Work is done for irecv and batches. CPU tensors stand in for CUDA
ones here (the staging's decision, `wanted`, needs a GPU: it is checked on the GPU machine by
corpus/python's healthy/py_collectives_into_empty on ranks sharing a GPU)."""

import inspect
import types

import torch

from cprr import _cprr
from cprr.distributed import process_group
from cprr.distributed import staging as _staging


def send(tensor, dst=None, group=None, tag=0):
    raise AssertionError("replaced by a fake")


def recv(tensor, src=None, group=None, tag=0):
    raise AssertionError("replaced by a fake")


class FakeWork:
    def __init__(self, on_done=None):
        self.on_done, self.done, self.waits = on_done, False, 0

    def finish(self):
        if not self.done and self.on_done:
            self.on_done()
        self.done = True

    def wait(self, timeout=None):
        self.waits += 1
        self.finish()
        return True

    def is_completed(self):
        return self.done

    def _source_rank(self):
        return 1


def test_a_send_hands_the_transport_a_host_copy_of_its_tensor():
    sent = []
    target = torch.arange(4.0)
    call = _staging.message("send", lambda tensor, dst=None, **_: sent.append(tensor),
                            inspect.signature(send), (target,), {"dst": 1})
    call()
    assert len(sent) == 1 and sent[0] is not target
    assert torch.equal(sent[0], target)
    target.add_(1)  # the copy was taken at the call
    assert torch.equal(sent[0], torch.arange(4.0))


def test_a_recv_copies_what_came_into_its_tensor_and_returns_the_sender():
    target = torch.zeros(3)

    def transport(tensor, src=None, group=None, tag=0):
        assert tensor is not target
        tensor.fill_(5.0)
        return 1

    call = _staging.message("recv", transport, inspect.signature(recv), (target,), {"src": 1})
    assert call() == 1
    assert torch.equal(target, torch.full((3,), 5.0))


def test_an_irecv_fills_its_tensor_only_once_its_work_is_done():
    target = torch.zeros(2)
    works = []

    def irecv(tensor, src=None, group=None, tag=0):
        work = FakeWork(lambda: tensor.fill_(3.0))
        works.append(work)
        return work

    staged = _staging.message("irecv", irecv, inspect.signature(recv), (target,), {"src": 0})()
    assert torch.equal(target, torch.zeros(2))
    assert staged.is_completed() is False and torch.equal(target, torch.zeros(2))
    works[0].finish()
    assert staged.is_completed() is True
    assert torch.equal(target, torch.full((2,), 3.0))
    target.zero_()  # once copied in, a later wait does not copy again over the case's writes
    staged.wait()
    assert torch.equal(target, torch.zeros(2)) and works[0].waits == 1
    assert staged is works[0]  # the case holds the transport's own Work


def _op(name, tensor, peer):
    return types.SimpleNamespace(op=name, tensor=tensor, peer=peer, group=None, tag=0)


def test_a_batch_stages_only_its_staged_ops_and_copies_each_recv_at_its_work():
    out, into, plain = torch.ones(2), torch.zeros(2), torch.zeros(2)
    ops = [_op("isend", out, 1), _op("irecv", into, 1), _op("irecv", plain, 1)]
    seen = []

    def batch_isend_irecv(p2p_op_list):
        seen.extend(p2p_op_list)
        return [FakeWork(lambda p=p: p.tensor.fill_(9.0) if p.op == "irecv" else None)
                for p in p2p_op_list]

    works = _staging.batch(batch_isend_irecv, ops, ["isend", "irecv", None], (), {})()
    assert seen[0].tensor is not out and torch.equal(seen[0].tensor, out)
    assert seen[1].tensor is not into and seen[2] is ops[2]
    assert seen[0].peer == 1 and ops[0].tensor is out  # the case's P2POps are left as they were
    for w in works:
        w.wait()
    assert torch.equal(into, torch.full((2,), 9.0)) and torch.equal(plain, torch.full((2,), 9.0))


def test_the_transport_decides_torchs_backend_and_staging_in_one_place():
    assert process_group.plan(_cprr.Transport.nccl) == ("nccl", False)
    assert process_group.plan(_cprr.Transport.gloo_staged) == ("gloo", True)
    assert process_group.plan(_cprr.Transport.gloo) == ("gloo", False)


def test_only_a_cuda_world_that_cprr_gave_gloo_is_staged():
    cpu = torch.zeros(1)
    shared_gpu = types.SimpleNamespace(backend="cuda", transport=_cprr.Transport.gloo_staged)
    assert not _staging.wanted(None, None, cpu)
    assert not _staging.wanted(shared_gpu, None, cpu)  # a host tensor goes as it is
    for transport in (_cprr.Transport.nccl, _cprr.Transport.gloo):
        assert not _staging.wanted(types.SimpleNamespace(transport=transport), None, cpu)
