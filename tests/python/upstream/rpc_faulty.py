"""PyTorch's faulty-agent RPC suites, as PyTorch's CI runs them (test/distributed/rpc/
test_faulty_agent.py), from the installed torch: nothing of the suites is copied here. The
agent's message drops and delays are the suites' own. Not a pytest file (its name):
tests/python/upstream/compare_harness.py runs it under its own harness and under cprecord."""

from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed.rpc.faulty_rpc_agent_test_fixture import (
    FaultyRpcAgentTestFixture,
)
from torch.testing._internal.distributed.rpc_utils import FAULTY_AGENT_TESTS, generate_tests

globals().update(generate_tests("Faulty", FaultyRpcAgentTestFixture, FAULTY_AGENT_TESTS,
                                __name__))

if __name__ == "__main__":
    run_tests()
