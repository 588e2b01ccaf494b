"""The template process's side of recorder/launch/fork_request.h: a controller's request to fork
one rank, and the reply. Change the two files, and WIRE, together.

Both are frames as cprr's control protocol frames its messages (a little-endian uint32 length,
then that many bytes), here of NUL-terminated fields, numbers in decimal:

- request: ``cprr-fork/1``, the controller's pid, the process group to join (0: lead a new one),
  the number of descriptors and each one's number in the rank (in the order of the SCM_RIGHTS
  array riding on the frame's first byte), argc and each argument (argv[0] first), envc and each
  ``NAME=value`` entry (the rank's complete environment).
- reply: ``pid`` and the rank's pid, or ``error`` and what went wrong.
"""

import os
import socket
import struct

WIRE = b"cprr-fork/1"
MAX_DESCRIPTORS = 16  # kMaxForkDescriptors
MAX_FRAME_BYTES = 16 << 20  # kMaxForkFrameBytes


class Malformed(ValueError):
    """A request the template cannot read; its text says what is wrong with it."""


class Request:
    """One rank to fork: ``fds`` pairs each descriptor received with its number in the rank."""

    def __init__(self, controller, process_group, fds, argv, env):
        self.controller = controller
        self.process_group = process_group
        self.fds = fds
        self.argv = argv
        self.env = env


class _Fields:
    def __init__(self, payload):
        if not payload.endswith(b"\0"):
            raise Malformed(f"the request's {len(payload)} bytes do not end with a NUL")
        self._fields = payload[:-1].split(b"\0")
        self._at = 0

    def text(self, what):
        if self._at >= len(self._fields):
            raise Malformed(f"the request ends before {what}")
        self._at += 1
        return self._fields[self._at - 1]

    def number(self, what, low=0, high=None):
        text = self.text(what)
        if not text.isdigit() or (high is not None and int(text) > high) or int(text) < low:
            bound = f" from {low} to {high}" if high is not None else f" of at least {low}"
            shown = text[:40].decode("utf-8", "replace")
            raise Malformed(f"{what} is '{shown}', not a whole number{bound}")
        return int(text)

    def rest(self):
        return len(self._fields) - self._at


def decode_request(payload, received):
    """The Request in `payload`, pairing the descriptors `received` with their numbers. Raises
    Malformed naming what is wrong (the caller still owns and closes `received`)."""
    f = _Fields(payload)
    if f.text("the wire's name") != WIRE:
        raise Malformed(f"the request does not start with {WIRE.decode()}")
    controller = f.number("the controller's pid", low=1)
    group = f.number("the process group")
    count = f.number("the number of descriptors", high=MAX_DESCRIPTORS)
    targets = [f.number(f"descriptor {k}'s number") for k in range(count)]
    if len(set(targets)) != len(targets):
        raise Malformed(f"two descriptors go to one number in {targets}")
    argc = f.number("the number of arguments", low=1, high=f.rest())
    argv = [os.fsdecode(f.text(f"argument {k}")) for k in range(argc)]
    envc = f.number("the number of environment entries", high=f.rest())
    env = {}
    for k in range(envc):
        entry = os.fsdecode(f.text(f"environment entry {k}"))
        name, eq, value = entry.partition("=")
        if not eq or not name:
            raise Malformed(f"environment entry {entry[:60]!r} is no NAME=value")
        env[name] = value
    if f.rest():
        raise Malformed(f"{f.rest()} field(s) follow the environment")
    if len(received) != count:
        raise Malformed(f"the request names {count} descriptor(s) but {len(received)} came with it")
    return Request(controller, group, list(zip(received, targets)), argv, env)


def receive(sock):
    """The next request's payload and the descriptors that came with it; None when the controller
    closed the socket. Raises Malformed for a frame too long to read (after which the stream
    cannot be trusted) or descriptors cut off."""
    head, fds, flags, _ = socket.recv_fds(sock, 4, MAX_DESCRIPTORS)
    if not head:
        return None
    if flags & socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        raise Malformed(f"more than {MAX_DESCRIPTORS} descriptors came with the request")
    head += _read_exactly(sock, 4 - len(head))
    (length,) = struct.unpack("<I", head)
    if length > MAX_FRAME_BYTES:
        for fd in fds:
            os.close(fd)
        raise Malformed(f"a request of {length} bytes (the limit is {MAX_FRAME_BYTES})")
    return _read_exactly(sock, length), fds


def _read_exactly(sock, n):
    chunks = []
    while n > 0:
        chunk = sock.recv(n)
        if not chunk:
            raise EOFError("the controller closed the socket inside a request")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _frame(fields):
    payload = b"".join(f + b"\0" for f in fields)
    return struct.pack("<I", len(payload)) + payload


def pid_reply(pid):
    return _frame([b"pid", str(pid).encode()])


def error_reply(text):
    return _frame([b"error", text.encode("utf-8", "replace").replace(b"\0", b"?")])
