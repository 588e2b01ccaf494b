"""The template process: ``cprr-pyworker --cases PATH... --template FD``.

A Python rank spends seconds importing torch and the case files before it can say hello, and a
fresh world used to pay that in every rank. The controller instead starts this process once
(recorder/launch/rank_spawner.h): it imports and registers everything as a rank does, then runs
no case, touches no GPU, joins no process group and starts no thread, and serves requests on FD
(the wire is fork_request.py's). For each one it forks, and the child becomes the rank: its
descriptors, process group, environment and arguments are the ones the controller's posix_spawn
would have given it, and it runs the same worker loop (``_cprr.serve``), which starts CUDA and the
communicator in the child.

The fork is double: the template's child forks the rank and exits at once, so the rank is
reparented to the controller (a child subreaper) and the controller waits for it and signals its
process group as it does a spawned rank's. The template reaps its own child, and replies with the
rank's pid once the rank has its process group and descriptors.
"""

import ctypes
import os
import resource
import signal
import socket
import sys
import time
import traceback

from cprr.rank import fork_request as _fork_request
from cprr.rank import import_probe as _import_probe

_PR_SET_PDEATHSIG = 1
# How long a rank waits to be reparented to its controller (its parent exits right after the
# fork: this is never the wait, only the bound on a broken set-up).
_ADOPTION_TIMEOUT_S = 10.0


class TemplateError(RuntimeError):
    """Why the template cannot fork a rank; the reply's text."""


def die_with_parent():
    """The template never outlives its controller (nor does a rank: worker.cpp's own)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() == 1:
        os._exit(3)


def release_nvml():
    """Shuts NVML down in the template if a case file's import started it (torch's NVML-based
    device count: common_utils' TEST_MULTIGPU, a world size read from device_count()). A rank
    forked with NVML started cannot start it again ("GPU access blocked by the operating
    system"), and NCCL's communicator needs it. NVML counts its inits: shut down until it says
    it is not started."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1", mode=os.RTLD_NOLOAD)
    except OSError:
        return  # never loaded
    for _ in range(1000):
        if nvml.nvmlShutdown() != 0:  # NVML_ERROR_UNINITIALIZED: the last init is undone
            return


def serve(fd, run_rank):
    """Serves fork requests on descriptor `fd` until the controller closes it; each child calls
    ``run_rank(argv)`` (the rank's whole argv) and exits with its status. Returns 0."""
    release_nvml()
    sock = socket.socket(fileno=fd)
    while True:
        try:
            received = _fork_request.receive(sock)
        except _fork_request.Malformed as e:  # the stream cannot be trusted past it
            sock.sendall(_fork_request.error_reply(f"malformed fork request: {e}"))
            return 2
        except EOFError:
            return 0
        if received is None:
            return 0  # the controller is gone, or done with us
        payload, fds = received
        try:
            request = _fork_request.decode_request(payload, fds)
            reply = _fork_request.pid_reply(_fork(request, run_rank))
        except _fork_request.Malformed as e:
            reply = _fork_request.error_reply(f"malformed fork request: {e}")
        except Exception as e:  # the fork itself failed: say why, and serve the next request
            reply = _fork_request.error_reply(f"{type(e).__name__}: {e}")
        finally:
            for received_fd in fds:
                os.close(received_fd)
        sock.sendall(reply)


def _fork(request, run_rank):
    _check_forkable()
    _flush()  # the children start with empty stdio buffers: nothing of ours is printed twice
    status_r, status_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            _middle(request, run_rank, status_r, status_w)
        finally:
            os._exit(70)  # whatever went wrong, a child never returns into the template's loop
    os.close(status_w)
    try:
        os.waitpid(middle, 0)  # once reaped, the rank has been reparented to the controller
        said = _read_all(status_r)
    finally:
        os.close(status_r)
    kind, _, text = said.decode("utf-8", "replace").partition(" ")
    if kind == "pid" and text.isdigit():
        return int(text)
    if kind == "error":
        raise TemplateError(text)
    raise TemplateError("the forked rank ended before it said it was set up")


def _middle(request, run_rank, status_r, status_w):
    """The template's child: forks the rank and exits, which hands the rank to the controller."""
    try:
        os.close(status_r)
        me = os.getpid()
        if os.fork() == 0:
            try:
                _become_rank(request, run_rank, status_w, me)
            finally:
                os._exit(71)
    except BaseException as e:
        _say(status_w, f"error cannot fork: {e}")
    os._exit(0)


def _become_rank(request, run_rank, status_w, middle):
    try:
        status_w = _off_targets(status_w, {target for _, target in request.fds})
        os.setpgid(0, request.process_group)
        _install_descriptors(request.fds, keep=status_w)
    except BaseException as e:
        _say(status_w, f"error cannot set the rank up (process group {request.process_group}): {e}")
        os._exit(2)
    _say(status_w, f"pid {os.getpid()}")
    status = 2
    try:
        _await_adoption(middle, request.controller)
        die_with_parent()  # now, not only in the worker loop: nothing before it may outlive us
        _restore_signals()
        os.environ.clear()
        os.environ.update(request.env)
        sys.argv = list(request.argv)
        status = int(run_rank(list(request.argv)) or 0)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 2
    except BaseException:
        traceback.print_exc()  # on the rank's own stderr now: its world's start quotes it
    finally:
        _flush()
        os._exit(status)


def _check_forkable():
    """Refuses to fork what the child could not use: a template running Python threads (a lock
    one of them holds stays held in the child forever) or with CUDA initialized (the child cannot
    use it). Both come from a case file's import, never from cprr.

    Threads a native library starts when it is loaded are its own to make fork-safe, and the
    common ones do: numpy's OpenBLAS starts a pool of one thread per core at import and shuts it
    down in a pthread_atfork handler; PyTorch's pools do the same. Refusing them would refuse
    every template that imports numpy on a many-core machine."""
    # A thread with a Python frame, however it was started (threading or _thread).
    started = _import_probe.python_threads()
    if started:
        raise TemplateError(
            f"the template runs {len(started)} Python thread(s) ({', '.join(started)}), started "
            "while importing the case files: a rank forked from it could deadlock. Start the "
            "thread in the case instead, or set CPRR_PYTHON_TEMPLATE=off")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise TemplateError(
            "CUDA was initialized while importing the case files: a forked rank could not use "
            "it. Move the CUDA call into the case, or set CPRR_PYTHON_TEMPLATE=off")


def _off_targets(fd, targets):
    """`fd`, or a duplicate of it on no number in `targets` (which the rank's descriptors take)."""
    moved = []
    while fd in targets:
        fd = os.dup(fd)
        moved.append(fd)
    for extra in moved[:-1]:
        os.close(extra)
    return fd


def _install_descriptors(pairs, keep):
    """Puts each received descriptor at its number in the rank and closes every other one the
    template held (`keep` aside: the pipe the rank reports through, on no target), as
    posix_spawn's file actions do for a spawned rank."""
    pending = list(pairs)
    for k, (source, target) in enumerate(pending):
        # A later source sitting on this target moves away first, so no dup2 overwrites it.
        for j in range(k + 1, len(pending)):
            if pending[j][0] == target:
                pending[j] = (os.dup(pending[j][0]), pending[j][1])
        if source == target:
            os.set_inheritable(target, True)
        else:
            os.dup2(source, target)  # inheritable, as posix_spawn's dup2 leaves it
    low = 0
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for fd in sorted({target for _, target in pending} | {keep}) + [limit]:
        # Never an empty range: CPython 3.11's closerange(n, n) closes everything from n up.
        if low < fd:
            os.closerange(low, fd)
        low = max(low, fd + 1)


def _await_adoption(middle, controller):
    """Waits until the rank's parent is its controller: only then may worker.cpp's
    die_with_parent set PR_SET_PDEATHSIG (set while the parent is `middle`, it would fire as
    `middle` exits)."""
    deadline = time.monotonic() + _ADOPTION_TIMEOUT_S
    while os.getppid() == middle:
        if time.monotonic() > deadline:
            raise RuntimeError(f"its parent (pid {middle}) did not exit")
        time.sleep(0.0002)
    if os.getppid() != controller:
        raise RuntimeError(
            f"it was reparented to pid {os.getppid()}, not to its controller (pid {controller}), "
            "which must be a child subreaper (PR_SET_CHILD_SUBREAPER)")


def _restore_signals():
    """What a Python process started by the controller has: an empty mask, default dispositions
    for what posix_spawn resets, Python's own SIGINT handler (the template changed none of them:
    this keeps the rank's the same if a case file did)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _say(fd, text):
    """Writes `text` on the status pipe and closes it; a pipe already gone is not an error (the
    template then says that the rank ended before it said anything)."""
    try:
        os.write(fd, text.encode("utf-8", "replace"))
        os.close(fd)
    except OSError:
        pass


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed stream
            pass
