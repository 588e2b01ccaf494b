"""Where in the case's code a call was made: the names the op log gives its ops and memory."""

import functools
import os
import sys

import torch

# The package's root folder: a frame in any of its rooms is cprr's.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


_INSTALLED = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


@functools.lru_cache(maxsize=4096)
def _inside(filename):
    """Whether a frame of this file is torch's, cprr's or an installed package's (Triton's
    launcher, an extension's wrapper), not the case's code."""
    f = os.path.abspath(filename)
    return (f.startswith((_HERE, _TORCH)) or any(d in f for d in _INSTALLED)
            or "importlib" in f or filename.startswith("<"))


def caller():
    """file:line of the case code that made the call (the first frame outside torch, cprr and
    installed packages)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _inside(frame.f_code.co_filename):
            return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"
