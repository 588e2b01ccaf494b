# The compiled rank runtime (python/native/bindings.cpp over rank_runtime.h, torch_allocator.h and
# unseen_work.h), as type checkers and readers see it. Keep it in step with bindings.cpp:
# tests/python/test_native.py compares both with the built module. Arguments bindings.cpp does
# not name are positional-only here (pybind11 calls them arg0, arg1...).

from typing import Callable, Dict, List, Optional, Sequence, Tuple

# A native_stream value that is no cudaStream_t (0 is the legacy stream): a stream the caller
# models, with none behind it.
NO_NATIVE_STREAM: int
# The control protocol's version (kProtocolVersion), for a message when versions disagree.
PROTOCOL_VERSION: int
# torchrun's MASTER_PORT where cprecord claimed none (kDefaultMasterPort, port_claim.h).
DEFAULT_MASTER_PORT: int

# Bytes an op touches: (buffer id from track, offset in it, length).
Touch = Tuple[int, int, int]

class Allocation:
    """An allocation from one of the rank's arenas (CaseContext.alloc)."""

    @property
    def id(self) -> int: ...
    @property
    def address(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def device(self) -> bool:
        """Device memory (cuda backend, not the host pool)."""

class Transport:
    """How a world's collectives travel: the controller's choice (runtime/transport.h)."""
    nccl: "Transport"  # a GPU per rank
    gloo_staged: "Transport"  # cuda, ranks sharing a GPU: device buffers staged through the host
    gloo: "Transport"  # the cpu backend
    name: str
    value: int

class CaseContext:
    """The running case's Context, for the Python Context. Valid only during the body's call."""

    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def execution(self) -> int:
        """The controller's id for this execution: the same on every rank, increasing."""
    @property
    def case_name(self) -> str: ...
    @property
    def params(self) -> Dict[str, str]: ...
    @property
    def device_index(self) -> int:
        """The GPU this rank runs on (its index among the visible ones); -1 on the cpu backend."""
    @property
    def backend(self) -> str:
        """'cpu' | 'cuda'."""
    @property
    def transport(self) -> Transport:
        """How the world's collectives travel."""
    @property
    def address(self) -> int:
        """The object's address, for the C++ op capture (_cprr_torch) to log into it directly."""
    def capture(self, is_output: bool, name: str, address: int, bytes: int, dtype: str,
                shape: Sequence[int], native_stream: int, host: bool = False) -> None:
        """Hashes `bytes` at `address` as an output or probe; `dtype` a cprr dtype name; `host`:
        host memory, hashed on the host before this returns whatever the backend."""
    def enter_collective(self, kind: str, dtype: str, bytes: int, root: int, op: str,
                         stream: int, group: int = 0, members: int = 0, where: str = "",
                         send_bytes: Sequence[int] = (), recv_bytes: Sequence[int] = (),
                         row_bytes: int = 0) -> int:
        """A collective entered (flight record, collective log); `op`: sum | max | min;
        `stream`: an op-log stream; `group`: 0 the world, else a note_group id; `members`: its
        ranks, bit r for rank r (0: all); `where`: the caller's file:line; an uneven
        all-to-all's bytes to and from each group rank and its row size. Returns a handle for
        complete_collective."""
    def complete_collective(self, handle: int, /) -> None: ...
    def collective_raised(self, handle: int, /) -> None:
        """The call enter_collective returned `handle` for raised: no collective of the log if
        the case then ends clean on this rank."""
    def enter_p2p(self, kind: str, peer: int, dtype: str, bytes: int, group: int = 0,
                  members: int = 0, where: str = "") -> int:
        """A send to / recv from `peer` (a rank of the world), numbered on its channel.
        Returns a handle for complete_collective."""
    def note_group(self, id: int, ranks: Sequence[int], backend: str, name: str, /) -> None:
        """A group other than the world, as the case's collectives use it."""
    def track(self, name: str, address: int, bytes: int, device: bool, native_stream: int,
              written_by: int, symmetric_offset: int = -1) -> int:
        """A tensor's memory in the allocation log; `written_by`: the op (seq) that made and
        wrote it, -1 for unwritten memory; `symmetric_offset` >= 0: its place in torch's
        symmetric windows. Returns its buffer id."""
    def untrack(self, buffer: int, stream: int, /) -> None:
        """The memory went back to its allocator."""
    def library_op(self, kind: str, name: str, stream: int, native_stream: int,
                   reads: Sequence[Touch], writes: Sequence[Touch],
                   moves: bool = False, touches: Sequence[Touch] = ()) -> Tuple[int, bool]:
        """A torch op about to be issued on op-log stream `stream` (-1: the host); `moves`: it
        only moves its reads' bytes to its writes, laid end to end (a copy); `touches`: bytes it
        is handed without knowing how it uses them (cprr.accesses' uses). Returns (its seq,
        whether to synchronize_library() after it)."""
    def library_order(self, kind: str, name: str, stream: int, event: int, /) -> None:
        """An ordering op: record | wait | sync."""
    def graph_begin(self, stream: int, /) -> None:
        """A CUDA graph capture begins on op-log stream `stream`: its ops are the graph's."""
    def graph_end(self, stream: int, /) -> int:
        """The capture on `stream` ends; returns the graph's number in the case."""
    def graph_launch(self, graph: int, stream: int, native_stream: int,
                     /) -> Optional[Tuple[int, bool]]:
        """Graph `graph` is about to be launched on `stream`: its ops logged there. Returns (the
        last one's seq, whether to synchronize_library() once launched), None for no op."""
    def synchronize_library(self) -> None: ...
    def hold_probe(self) -> None:
        """A probe replay's probe of the op just logged lasts until release_probe (a declared
        block's end); a no-op outside a probe replay."""
    def release_probe(self) -> None:
        """Ends a held probe: what the op was handed is compared now."""
    def distrust_transport(self, why: str, /) -> None:
        """The rank is unfit for a next case (a torch.distributed call raised, a library's state
        left behind: `why` says which): the world is replaced after this case."""
    def note_unseen(self, what: str, /) -> None:
        """What the case did outside the op log, as one op the report names."""
    def torch_released(self) -> List[int]:
        """Addresses cprr's arena took back from torch since the last call."""
    def torch_record_stream(self, address: int, native_stream: int, /) -> None: ...
    def alloc(self, name: str, bytes: int, pool: str, /) -> Allocation:
        """`pool`: device | symmetric | host."""
    def free(self, id: int, /) -> None: ...

class CaseOptions:
    """A case's options (data/case_info.h's CaseOptions, whose fields() list makes this class):
    CaseOptions(**fields), each keyword a field; the rest keep their C++ defaults."""

    # The fields' names, in the catalog's order.
    fields: Tuple[str, ...]
    world_sizes: List[int]
    grid: List[Tuple[str, List[str]]]  # (axis, its values' texts)
    expect: str  # pass | fail | crash | hang
    timeout_s: float  # 0: cprecord's --timeout
    description: str
    seeded_bug: str  # the verdict a planted bug must get
    def __init__(self, **fields: object) -> None: ...

def add_case(name: str, options: CaseOptions,
             body: Callable[[CaseContext], Optional[str]]) -> None:
    """Registers a case; `body` returns None when it passed, else what failed."""

def add_error(message: str, /) -> None:
    """A problem found while loading cases: the worker reports it and exits before serving."""

def on_connected(hook: Callable[[Transport, int], str], /) -> None:
    """Runs hook(transport, device_index) once the rank's world joined its communicator, before
    its first case; it returns the start-up phase it names ('' for none), and what it raises
    fails the world's start."""

def add_source_file(path: str, /) -> None:
    """A file the cases were loaded from: the catalog names it, and cprecord records its hash."""

def case_names() -> List[str]: ...
def serve(argv: Sequence[str], /) -> int:
    """Runs the rank process's worker loop with these arguments (argv[0] first); returns its
    exit status."""

def unseen_start(libraries: Sequence[str], /) -> str:
    """Starts counting CUDA work outside the op log (CUPTI from the first of these libraries
    that opens); returns '' when counting, else why not."""

def unseen_watch(on: bool, /) -> None:
    """The calling thread runs a case body (on) or stopped (off): only such threads count."""

def seen_enter() -> None:
    """The calling thread enters work the op log covers (scopes nest)."""

def seen_leave() -> None: ...
def unseen_forgive() -> None:
    """What the calling thread did outside since it last entered seen work was an op's own."""

def unseen_take() -> Dict[str, int]:
    """The counts since the last call, by what was counted; empty when nothing was."""

def use_torch_allocator() -> None:
    """torch's CUDA allocator is now cprr_torch_alloc/cprr_torch_free (libcprr_pyrank.so)."""

def torch_allocator_used() -> bool: ...
def torch_memory() -> Tuple[int, int]:
    """(bytes torch holds through cprr's allocator now, the most since the last reset)."""

def reset_torch_peak() -> None: ...
def capture_calls() -> int:
    """The address of CaseContext's calls for the C++ op capture (rank_runtime.h's
    CaptureCalls): _cprr_torch reaches the case's context through them, not by linking."""
