"""PyTorch's TensorPipe RPC suites, as PyTorch's CI runs them (test/distributed/rpc/
test_tensorpipe_agent.py), from the installed torch: nothing of the suites is copied here. Not a
pytest file (its name): tests/python/upstream/compare_harness.py runs it under its own harness and
under cprecord."""

from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed.rpc.tensorpipe_rpc_agent_test_fixture import (
    TensorPipeRpcAgentTestFixture,
)
from torch.testing._internal.distributed.rpc_utils import (
    GENERIC_TESTS,
    TENSORPIPE_TESTS,
    generate_tests,
)

globals().update(generate_tests("TensorPipe", TensorPipeRpcAgentTestFixture,
                                GENERIC_TESTS + TENSORPIPE_TESTS, __name__))

if __name__ == "__main__":
    run_tests()
