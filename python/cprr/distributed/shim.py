"""What lets a suite's own process-group set-up run inside a case unchanged.

Real suites call ``init_process_group`` themselves (env://, a FileStore of theirs, a TCPStore on
MASTER_PORT) and ``destroy_process_group()`` in their tear-down. Inside a case the rank already
has its default group (cprr.rank.worker_loop made it, and pooled cases keep it), so:

- ``init_process_group`` returns at once when its rank and world size agree with the case's (an
  explicit argument, else RANK / WORLD_SIZE as env:// reads them), and fails the case naming both
  when they do not; a backend the world's group does not give makes the case's default group one
  of that backend (cprr.distributed.backends);
- ``destroy_process_group()`` of the default group does nothing: the next case, fresh or pooled,
  finds it as this one did (the groups a case makes are still ended with it,
  cprr.distributed.collectives);
- RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set as torchrun
  sets them, before each case.

Outside a case (cprr's own set-up, a template) both calls are torch's own.
"""

import functools
import inspect
import os

from cprr.api import running as _running

# MASTER_PORT: the port cprecord claimed on this host for the job (each job, and cpreplay's
# replays, claim one: CPRR_MASTER_PORT, recorder/launch/port_claim.h), so worlds running side by
# side, in one run or in two, never meet on one. The same in every world of a job: a case's
# environment must not differ between its fresh and its pooled world (a case that hashes it would
# differ for nothing). Only a suite that opens a TCPStore there itself uses it; one left open by a
# case is that case's leak. torchrun's default, the C++ side's one number (port_claim.h), is for
# ranks started without one (cprr's tests); only then is the compiled module imported.
_CLAIMED_PORT = os.environ.get("CPRR_MASTER_PORT")


def master_port():
    """The job's MASTER_PORT: the port cprecord claimed, else torchrun's default."""
    if _CLAIMED_PORT:
        return int(_CLAIMED_PORT)
    from cprr import _cprr

    return _cprr.DEFAULT_MASTER_PORT

# The environment this process started with: the user's (cprecord's, which every rank and template
# inherits), before any case's torchrun variables were set. A forked rank keeps its template's.
# What a suite's harness reads in its parent (a world size, a timeout) is read in this one.
USER_ENVIRONMENT = dict(os.environ)


def environment(rank, world_size):
    """torchrun's variables for rank `rank` of `world_size` (a launcher's CPRR_LOCAL_RANK and
    CPRR_LOCAL_SIZE where it set them; else every rank is local)."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": os.environ.get("CPRR_LOCAL_RANK", str(rank)),
        "LOCAL_WORLD_SIZE": os.environ.get("CPRR_LOCAL_SIZE", str(world_size)),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port()),
    }


def set_environment(rank, world_size):
    """Sets torchrun's variables (environment) for the next case."""
    os.environ.update(environment(rank, world_size))


def set_catalog_environment():
    """torchrun's variables for the catalog run, which reads the cases as the user's shell would:
    each one the user set keeps its value, the others are rank 0's of a world of 1."""
    os.environ.update({k: v for k, v in environment(0, 1).items() if k not in USER_ENVIRONMENT})


class user_environment:
    """Within the block, torchrun's variables are the user's (absent where the user has none):
    a suite's harness reads its world size in its parent, whose environment is the user's."""

    def __enter__(self):
        self._saved = {k: os.environ.get(k) for k in environment(0, 1)}
        _replace(self._saved, USER_ENVIRONMENT)

    def __exit__(self, *exc):
        _replace(self._saved, self._saved)


def _replace(keys, values):
    for k in keys:
        if values.get(k) is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = values[k]


def _requested(bound, name, variable):
    """The rank or world size an init_process_group call asks for: its argument when given (not
    -1), else what env:// would read, else None."""
    value = bound.arguments.get(name, -1)
    if value is not None and value != -1:
        return int(value)
    text = os.environ.get(variable)
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def wrap_init(original):
    """init_process_group as a case sees it (see the module's doc)."""
    import torch.distributed as dist

    signature = inspect.signature(original)

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if _running.current() is None or not dist.is_initialized():
            return original(*args, **kwargs)
        bound = signature.bind_partial(*args, **kwargs)
        have = (dist.get_rank(), dist.get_world_size())
        want = (_requested(bound, "rank", "RANK"), _requested(bound, "world_size", "WORLD_SIZE"))
        if want[0] not in (None, have[0]) or want[1] not in (None, have[1]):
            raise RuntimeError(
                f"init_process_group(rank={want[0]}, world_size={want[1]}) in a cprr case that "
                f"runs as rank {have[0]} of {have[1]}: run the case at world size {want[1]} "
                "(its world_sizes), or let the suite read its rank from RANK / WORLD_SIZE")
        from cprr.distributed import backends as _backends

        arguments = bound.arguments
        _backends.use_for_case(arguments.get("backend"), arguments.get("timeout"),
                               arguments.get("pg_options"))
        return None

    init_process_group.__cprr_wrapped__ = original
    return init_process_group


def wrap_destroy(original):
    """destroy_process_group as a case sees it (see the module's doc)."""
    import torch.distributed as dist

    @functools.wraps(original)
    def destroy_process_group(group=None):
        if _running.current() is not None and (group is None or group is dist.GroupMember.WORLD):
            return None
        return original(group)

    destroy_process_group.__cprr_wrapped__ = original
    return destroy_process_group
