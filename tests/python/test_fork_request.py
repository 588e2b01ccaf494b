"""The template's side of the fork wire (cprr.rank.fork_request, recorder/launch/fork_request.h's
twin): a request framed as the controller frames it is read back whole, descriptors included,
and each way a request can be wrong is refused naming what is wrong. The C++ side's round trip is
tests/recorder/engine/python/template_wire_test.cpp."""

import os
import socket
import struct

import pytest

from cprr.rank import fork_request


def _payload(*fields):
    return b"".join(f + b"\0" for f in fields)


GOOD = [fork_request.WIRE, b"1234", b"0", b"1", b"3", b"2", b"w", b"--rank", b"2",
        b"RANK=0", b"PATH=/usr/bin:/bin"]


def test_a_request_is_read_back_whole_with_its_descriptor():
    ours, theirs = socket.socketpair()
    r, w = os.pipe()
    try:
        payload = _payload(*GOOD)
        socket.send_fds(theirs, [struct.pack("<I", len(payload)) + payload], [r])
        got, fds = fork_request.receive(ours)
        request = fork_request.decode_request(got, fds)
        assert (request.controller, request.process_group) == (1234, 0)
        assert request.argv == ["w", "--rank"] and request.env == {"RANK": "0",
                                                                   "PATH": "/usr/bin:/bin"}
        assert [target for _, target in request.fds] == [3]
        os.write(w, b"x")
        assert os.read(request.fds[0][0], 1) == b"x"  # the descriptor is the pipe's read end
        os.close(request.fds[0][0])
        theirs.close()
        assert fork_request.receive(ours) is None  # the controller closed the socket
    finally:
        ours.close()
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("fields, received, says", [
    ([b"cprr-fork/0"] + GOOD[1:], [7], "does not start with cprr-fork/1"),
    (GOOD[:1] + [b"0"] + GOOD[2:], [7], "the controller's pid is '0'"),
    (GOOD[:3] + [b"17"] + GOOD[4:], [7], "the number of descriptors is '17'"),
    (GOOD[:3] + [b"2", b"3", b"3"] + GOOD[5:], [7, 8], "two descriptors go to one number"),
    (GOOD[:9] + [b"RANK"] + GOOD[10:], [7], "is no NAME=value"),
    (GOOD + [b"extra"], [7], "1 field(s) follow the environment"),
    (GOOD, [], "names 1 descriptor(s) but 0 came with it"),
    (GOOD[:5], [7], "the request ends before the number of arguments"),
    (GOOD[:6], [7], "the number of arguments is '2', not a whole number from 1 to 1"),
])
def test_a_wrong_request_is_refused_naming_what_is_wrong(fields, received, says):
    with pytest.raises(fork_request.Malformed) as refused:
        fork_request.decode_request(_payload(*fields), received)
    assert says in str(refused.value), str(refused.value)


def test_a_payload_without_its_final_nul_is_refused():
    with pytest.raises(fork_request.Malformed, match="do not end with a NUL"):
        fork_request.decode_request(b"cprr-fork/1", [])


def test_replies_are_frames_of_nul_terminated_fields():
    assert fork_request.pid_reply(42) == struct.pack("<I", 7) + b"pid\x0042\x00"
    error = fork_request.error_reply("bad\0thing")
    assert error[4:] == b"error\x00bad?thing\x00"  # a NUL in the text cannot end a field early
