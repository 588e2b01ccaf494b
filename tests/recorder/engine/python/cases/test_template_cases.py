"""Cases of the template tests (tests/recorder/engine/python/template_test.cpp): a rank's outputs, what it
was started with (which must not depend on how it was started), a crash by a signal, a hang, and
a child process that outlives its rank."""

import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import cprr


@cprr.case(name="tmpl/all_reduce", world_sizes=[2])
def all_reduce(ctx):
    x = torch.arange(4096, dtype=torch.float32) * (ctx.rank + 1)
    dist.all_reduce(x)
    ctx.output("sum", x)


def _descriptors():
    """The harness's descriptors (stdio, the reserved fd 3, the control channel at its slot) by
    number and what they are; the backend's (Gloo's sockets and epoll, numbered in the order its
    connections happen to complete) by what they are only. Inode numbers differ per world."""
    named, backend = [], []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            kind = os.readlink(f"/proc/self/fd/{name}").split(":[")[0]
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if int(name) <= 3 or int(name) >= 1000:
            named.append(f"{name}:{kind}")
        else:
            backend.append(kind)
    return named + sorted(backend)


def _argv():
    """sys.argv, the world's own rendezvous directory left out."""
    argv = list(sys.argv)
    if "--rendezvous" in argv:
        argv[argv.index("--rendezvous") + 1] = "<the world's directory>"
    return argv


def _signals():
    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGCHLD", "SIGPIPE", "SIGXFSZ", "SIGUSR1")
    out = [f"{n}={signal.getsignal(getattr(signal, n))}" for n in names]
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return out + [f"blocked={sorted(int(s) for s in blocked)}"]


def _start_state(ctx):
    controller = int(os.environ.get("CPRR_TEST_CONTROLLER", "0"))
    return {
        "environment": [f"{k}={v}" for k, v in sorted(os.environ.items())],
        "descriptors": _descriptors(),
        "signals": _signals(),
        "argv": _argv(),
        "cwd": [os.getcwd()],
        "process group": [f"leads={os.getpgid(0) == os.getpid()}",
                          f"in rank 0's={ctx.rank == 0 or os.getpgid(0) != os.getpid()}"],
        "parent": [f"the controller={os.getppid() == controller}"],
    }


@cprr.case(name="tmpl/start_state", world_sizes=[2])
def start_state(ctx):
    """What the rank was started with, one output each: equal bytes however it was started. Each
    is printed too, so a test that sees them differ can show how."""
    for what, lines in _start_state(ctx).items():
        print(f"== {what}", *lines, sep="\n")
        digest = hashlib.sha256("\n".join(lines).encode()).digest()
        ctx.output(what, torch.frombuffer(bytearray(digest), dtype=torch.uint8))


@cprr.case(name="tmpl/killed", world_sizes=[2], expect="crash")
def killed(ctx):
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)


@cprr.case(name="tmpl/hang", world_sizes=[2], expect="hang", timeout_s=2)
def hang(ctx):
    if ctx.rank == 1:
        time.sleep(3600)  # why: the hang the case's deadline must end


@cprr.case(name="tmpl/orphan", world_sizes=[1])
def orphan(ctx):
    """Leaves a child behind that ends after its rank: the controller inherits it (it is a child
    subreaper) and must reap it. Its pid goes to the file CPRR_TEST_ORPHANS names; it ends once
    that file's name with ".release" exists (the test says when), or after a minute."""
    pid = os.fork()
    if pid == 0:
        release = os.environ.get("CPRR_TEST_ORPHANS", "") + ".release"
        deadline = time.monotonic() + 60
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)  # why: the poll interval of a wait, a minute at most, for the file
        os._exit(0)
    if "CPRR_TEST_ORPHANS" in os.environ:
        with open(os.environ["CPRR_TEST_ORPHANS"], "a") as f:
            f.write(f"{pid}\n")
