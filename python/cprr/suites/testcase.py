"""PyTorch's multi-process TestCase family as cprr cases, found in the case files unchanged.

A class of a case file that derives from ``MultiProcessTestCase`` or ``MultiProcContinuousTest``
(torch.testing._internal.common_distributed: ``DistributedTestBase``, ``DTensorTestBase``,
``FSDPTest``, torch's own ``TestDistBackend``, and the classes ``instantiate_device_type_tests``
and ``instantiate_parametrized_tests`` generate) gives one case per test method, named
``Class.test_method`` and run at the world size its harness would use. The class is read as its
harness's parent reads it: the world size, the deadline (``get_timeout``) and unittest's skip
marks in the user's environment (cprr.distributed.shim.USER_ENVIRONMENT), not a rank's.

- ``MultiProcessTestCase`` (a process per rank per test): the harness's own code runs. Its parent
  side (``setUpClass``, ``setUp`` with process creation recorded, ``tearDown``) runs once per
  execution in rank 0's helper (cprr.suites.harness_parent); each rank then runs the child entry the
  set-up started for it (``cls._run(rank, test_name, file_name, pipe, **kwargs)``, a subclass's
  override included) with the parent's environment, and its exit is judged as the parent judges
  it; the test's tearDown runs once every rank is done, and its failure is the test's.
- ``MultiProcContinuousTest`` (a process per rank per class, fed test ids): the class's own
  ``_worker_loop`` (an override included) runs the method, fed its id (cprr.suites.continuous);
  its set-up (``cls.rank``, ``cls.world_size``, ``cls._init_pg``) runs once per rank process, at
  the class's first case there. A pooled rank keeps that set-up for the class's next cases, as
  the harness's worker keeps it; a fresh one makes it again.

``init_process_group`` in those set-ups returns the case's own default group
(cprr.distributed.shim), on the backend it asks for (cprr.distributed.backends): a continuous
class's later cases in a pooled rank get the one its set-up got. A class or method skipped by
``unittest.skip`` gives skipped cases. Imports neither torch nor the compiled module: it looks for
the harness in ``sys.modules`` (a case file that uses it has imported it).
"""
import inspect
import os
import sys
import unittest

from cprr.api import case as _case
from cprr.distributed import shim as _shim
from cprr.suites import continuous as _continuous
from cprr.suites import harness_join as _harness_join
from cprr.suites import harness_parent as _harness_parent

_HARNESS = "torch.testing._internal.common_distributed"
_BASES = ("MultiProcessTestCase", "MultiProcContinuousTest")


def _harness_bases():
    """The harness's base classes that are loaded, or () when no case file imported it."""
    common = sys.modules.get(_HARNESS)
    if common is None:
        return ()
    return tuple(b for b in (getattr(common, n, None) for n in _BASES) if isinstance(b, type))


def _is_continuous(cls):
    continuous = getattr(sys.modules.get(_HARNESS), "MultiProcContinuousTest", None)
    return isinstance(continuous, type) and issubclass(cls, continuous)


def is_test_class(cls, module_name):
    """Whether `cls` is a test class of the harness defined in module `module_name` (a generated
    one carries the module of the class it came from); the harness's own bases are not."""
    bases = _harness_bases()
    return (bool(bases) and isinstance(cls, type) and issubclass(cls, bases)
            and cls not in bases and cls.__module__ == module_name and not inspect.isabstract(cls))


def test_classes(module):
    """The harness's test classes defined in `module`, in definition order."""
    name = getattr(module, "__name__", None)
    return [c for c in vars(module).values() if is_test_class(c, name)]


def _where(cls, method):
    """(file:line, absolute file) of a test method, through its decorators."""
    fn = inspect.unwrap(getattr(cls, method))
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"{cls.__qualname__}.{method}", ""
    file = os.path.abspath(code.co_filename)
    return f"{os.path.basename(file)}:{code.co_firstlineno}", file if os.path.isfile(file) else ""


def _property_value(cls, attribute):
    """A class attribute, or a property's value on a bare instance (as the harness reads it:
    without __init__, whose side effects belong to a test)."""
    static = inspect.getattr_static(cls, attribute, None)
    if isinstance(static, property):
        return static.fget(object.__new__(cls))
    return getattr(cls, attribute)


def _device_type(cls):
    """A continuous class's device type as its harness resolves it (a classmethod, a property,
    or the string instantiate_device_type_tests sets)."""
    attr = cls.__dict__.get("device_type", getattr(cls, "device_type", None))
    if isinstance(attr, classmethod):
        return attr.__func__(cls)
    if isinstance(attr, property):
        return attr.fget(cls)
    return attr() if callable(attr) else attr


def world_size_of(cls, method):
    """The world size the harness would run `method` of `cls` at, read in the user's
    environment (a property that reads WORLD_SIZE reads the user's)."""
    with _shim.user_environment():
        if _is_continuous(cls):
            if hasattr(cls, "_get_world_size"):
                return int(cls._get_world_size(_device_type(cls)))
            return int(_property_value(cls, "world_size"))
        return int(cls(method).world_size)  # MultiProcessTestCase: an instance's property


def timeout_of(cls, method):
    """The deadline the harness's parent gives `method` of `cls` (common_distributed's
    ``get_timeout`` of the test's id: DISTRIBUTED_TESTS_DEFAULT_TIMEOUT, TIMEOUT_OVERRIDE), or
    0.0 (cprr's default) for a class whose harness has none. A continuous class's ``timeout`` is
    its process group's, not the test's."""
    get_timeout = getattr(sys.modules.get(_HARNESS), "get_timeout", None)
    if _is_continuous(cls) or get_timeout is None:
        return 0.0
    with _shim.user_environment():
        return float(get_timeout(cls(method).id()))


def _skip_marked(cls, method):
    """A class or method skipped by unittest.skip / skipIf: unittest skips it before any set-up,
    so the case skips with unittest's reason and no rank runs the harness."""
    for marked in (cls, getattr(cls, method)):
        if getattr(marked, "__unittest_skip__", False):
            raise unittest.SkipTest(getattr(marked, "__unittest_skip_why__", "") or "skipped")


def from_suite(definition):
    """Whether a case is a test of this family (its body knows its class: ``suite_class``). Its
    harness imports the test's file in a parent and in children that inherit the parent's
    environment, the user's: never with a rank's torchrun variables."""
    return getattr(definition.body, "suite_class", None) is not None


def _process_test(cls, method):
    """A MultiProcessTestCase method as its harness runs it: the parent side's set-up (rank 0's
    helper), then in each rank the child entry it started (cprr.suites.harness_parent)."""

    def body(ctx):
        _skip_marked(cls, method)
        spawn = _harness_parent.spawned(ctx, cls, method)
        exited = None
        try:
            exited = _harness_parent.run_child(spawn, cls, ctx.rank, ctx.world_size)
        finally:
            _harness_join.leave_mark(ctx, spawn, exited)
        _harness_join.judge(ctx, cls, method, spawn, exited)
        _harness_join.tear_down_outcome(ctx, spawn)

    body.needs_harness_parent = True
    body.suite_class = cls
    return body


def _continuous_test(cls, method):
    """A MultiProcContinuousTest method as its harness's worker runs it (cprr.suites.continuous:
    the class's own _worker_loop)."""
    return _continuous.body_of(cls, method, _skip_marked)


def definitions(module):
    """The cases of `module`'s harness classes, and the problems (as texts)."""
    found, problems = [], []
    for cls in test_classes(module):
        cases, wrong = class_definitions(cls)
        found += cases
        problems += wrong
    return found, problems


def class_definitions(cls):
    """A harness class's cases, one per test method in unittest's order, and the problems (a
    method whose world size cannot be read, as one text each)."""
    found, problems = [], []
    runner = _continuous_test if _is_continuous(cls) else _process_test
    for method in unittest.TestLoader().getTestCaseNames(cls):
        make = runner
        source, file = _where(cls, method)
        try:
            world_size = world_size_of(cls, method)
            timeout_s = timeout_of(cls, method)
        except unittest.SkipTest as e:  # no devices of its type here: the harness skips it
            world_size, timeout_s, make = 1, 0.0, _skipping(str(e))
        except Exception as e:
            problems.append(f"{source}: {cls.__qualname__}.{method}: cannot read its "
                            f"world_size: {type(e).__name__}: {e}")
            continue
        doc = (getattr(cls, method).__doc__ or "").strip().split("\n")[0]
        found.append(_case.CaseDefinition(
            name=f"{cls.__qualname__}.{method}", body=make(cls, method),
            world_sizes=[world_size], grid={}, timeout_s=timeout_s, description=doc,
            source=source, file=file))
    return found, problems


def _skipping(reason):
    def make(cls, method):
        def body(ctx):
            raise unittest.SkipTest(reason)

        body.suite_class = cls
        return body

    return make
