"""What a case left of torch's RPC in its rank process.

Under its own harness a test's process ends with the test, and its RPC state with it. A pooled
rank runs the next case in the same process, where that state would meet it:
- torch's RPC is one per process: ``init_rpc`` again raises "RPC is already initialized" while a
  case's agent still runs (it failed, hung, or never called ``rpc.shutdown``);
- the RRef context is made at the first ``init_rpc`` of a process, keeps that agent for the
  process's life and outlives ``rpc.shutdown``: after a later ``init_rpc`` in the same process
  an RRef's messages go through the first, shut-down agent ("RPC is no longer running on this
  node"), and a leak one ``shutdown`` reported is reported again by every later one.
So a case that initialized torch's RPC gets its world replaced (cprr.rank.case_setup.Rank.end_case),
however it ended: the note names what it left, on the case that left it, and the next case
starts in processes where RPC never ran, as under its own harness.

The checks are torch's own debug calls, cheap, and made only where the case's process imported
``torch.distributed.rpc``.
"""

import sys


def _counts(read):
    """The non-zero counts of a torch debug-info call (it raises RuntimeError where what it
    describes was never initialized in this process)."""
    return {k: int(v) for k, v in read().items() if str(v).isdigit() and int(v) > 0}


def left_over():
    """What of torch's RPC this process holds now, as one text ('' when RPC never ran here)."""
    rpc = sys.modules.get("torch.distributed.rpc")
    if rpc is None or not rpc.is_available():
        return ""
    running = rpc._is_current_rpc_agent_set()
    try:
        rrefs = _counts(rpc._rref_context_get_debug_info)
    except RuntimeError:  # no RRef context: no init_rpc got that far in this process
        if not running:
            return ""
        rrefs = {}
    left = ["torch's RPC still initialized (init_rpc without rpc.shutdown)" if running else
            "torch's RPC initialized in this process (its RRef context keeps that agent for the "
            "process's life: a later init_rpc here would send RRef messages through it)"]
    if rrefs:
        left.append("RRefs in its RRef context (" +
                    ", ".join(f"{k} {v}" for k, v in sorted(rrefs.items())) + ")")
    autograd = sys.modules.get("torch.distributed.autograd")
    try:
        contexts = _counts(autograd._get_debug_info) if autograd is not None else {}
    except RuntimeError:  # distributed autograd never initialized
        contexts = {}
    if contexts.get("num_autograd_contexts"):
        left.append(f"{contexts['num_autograd_contexts']} distributed autograd context(s)")
    return "; ".join(left)
