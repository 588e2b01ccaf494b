"""torchrun scripts as cprr cases, the scripts unchanged: ``cprr.script(...)`` in a case file, or
``cprecord --torchrun SCRIPT [-- ARGS]`` / ``--torchrun-module MODULE`` (the worker's
``--script SPEC``).

Each rank runs the script as ``python script.py ARGS`` would under torchrun: with runpy as
``__main__``, ``sys.argv`` the script and its arguments, ``sys.path[0]`` the script's folder (so
its sibling modules import; a module runs from the current folder, as ``python -m``), and
torchrun's environment (RANK, WORLD_SIZE, ... : cprr.distributed.shim, which also lets the script's
own
``init_process_group`` find the case's group). ``SystemExit(0)`` (or None) and a normal return
pass; another exit status fails the case, a TEST_SKIPS status skips it. The modules it imports stay
imported in a pooled rank, as a reused process keeps them: that is where such suites leak.

Imports neither torch nor the compiled module.
"""

import json
import os
import runpy
import shlex
import sys

from cprr.api import case as _case
from cprr.api.skips import skip_reason


class Argv(list):
    """One argument list of a script's grid: its text is the command line's (shlex-quoted), which
    the case's label shows; its value (ctx.param) is the list."""

    def __str__(self):
        return shlex.join(self)


class ScriptExit(RuntimeError):
    """A script that exited with a status other than 0 (its message says where)."""

    reports_failure = True  # the report shows the message, not cprr's frames (cprr.rank.case_body)


def run(target, args, module=False):
    """Runs script `target` (a module name when `module`) as torchrun's child would run it."""
    saved_argv = sys.argv
    folder = os.getcwd() if module else os.path.dirname(os.path.abspath(target))
    sys.path.insert(0, folder)
    sys.argv = [target, *args]
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return
        if skip_reason(e) is not None:
            raise
        raise ScriptExit(f"{shlex.join([target, *args])} exited with status {e.code!r} "
                         f"at {_exit_point(e)}") from None
    finally:
        sys.argv = saved_argv
        if folder in sys.path:  # the script's own additions to sys.path stay, as they would
            sys.path.remove(folder)


def _exit_point(e):
    """file:line (function) of the sys.exit that raised `e`: the last frame of its traceback."""
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{os.path.basename(code.co_filename)}:{tb.tb_lineno} (in {code.co_name})"


def _body(target, module):
    def body(ctx):
        args = ctx.param("argv") if "argv" in ctx.params else []
        run(target, list(args), module)

    return body


def _caller():
    """file:line and absolute path of the case file that called cprr.script."""
    frame = sys._getframe(2)
    file = os.path.abspath(frame.f_code.co_filename)
    return f"{os.path.basename(file)}:{frame.f_lineno}", file


def script(path=None, *, module=None, name=None, world_sizes=(2,), argv=None, expect="pass",
           timeout_s=0.0, description="", seeded_bug=""):
    """Declares a torchrun script (a path, relative to this case file's folder) or a module
    (``module=``, as ``python -m``) as cases: one per argument list in `argv` (a list of lists;
    default: no arguments) and world size, named `name` (default: the script's stem or the
    module's name), ``name{argv=ARGS}@W``. expect, timeout_s, description and seeded_bug are
    ``@cprr.case``'s. Returns the case definition."""
    source, caller = _caller()
    return add(path, module=module, name=name, world_sizes=world_sizes, argv=argv, expect=expect,
               timeout_s=timeout_s, description=description, seeded_bug=seeded_bug,
               source=source, folder=os.path.dirname(caller), declared_in=caller)


def add(path=None, *, module=None, name=None, world_sizes=(2,), argv=None, expect="pass",
        timeout_s=0.0, description="", seeded_bug="", source="", folder="", declared_in=""):
    """script() for a caller that says where it is (`source`, `folder` for a relative path, the
    case file it is `declared_in`)."""
    if (path is None) == (module is None):
        raise ValueError(f"cprr.script on {source}: give a script path or module=, not both")
    if path is not None:
        target = os.path.normpath(os.path.join(folder or os.getcwd(), path))
        if not os.path.isfile(target):
            raise ValueError(f"cprr.script on {source}: no script {target}")
        default_name = os.path.splitext(os.path.basename(target))[0]
    else:
        target, default_name = module, module
    if argv is not None and (isinstance(argv, str) or
                             any(isinstance(a, str) or not hasattr(a, "__iter__") for a in argv)):
        raise ValueError(f"cprr.script on {source}: argv is a list of argument lists, e.g. "
                         "[['--cp', '2'], ['--cp', '4']]")
    defn = _case.CaseDefinition(
        name=name or default_name, body=_body(target, module is not None),
        world_sizes=list(world_sizes),
        grid={"argv": [Argv(map(str, a)) for a in argv]} if argv is not None else {},
        expect=expect, timeout_s=float(timeout_s),
        description=description or f"torchrun {'-m ' if module else ''}{target}",
        seeded_bug=seeded_bug, source=source or target,
        file=target if module is None else "", declared_in=declared_in)
    _case.add(defn)
    return defn


def from_spec(spec):
    """Declares the script of the worker's ``--script SPEC`` (JSON: path or module, argv,
    world_sizes), as cprecord --torchrun passes it."""
    s = json.loads(spec)
    return add(s.get("path"), module=s.get("module"), world_sizes=s["world_sizes"],
               argv=[s["argv"]] if s.get("argv") else None, source="cprecord --torchrun")
