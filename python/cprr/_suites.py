"""PyTorch's multi-process TestCase family as cprr cases, found in the case files unchanged.

A class of a case file that derives from ``MultiProcessTestCase`` or ``MultiProcContinuousTest``
(torch.testing._internal.common_distributed: ``DistributedTestBase``, ``DTensorTestBase``,
``FSDPTest``, and the classes ``instantiate_device_type_tests`` and
``instantiate_parametrized_tests`` generate) gives one case per test method, named
``Class.test_method`` and run at the class's ``world_size``. Each rank does what the harness's
child process does, no more:

- ``MultiProcessTestCase`` (a process per rank per test): an instance for the method, its
  ``rank`` and ``file_name`` (a path shared by the ranks of this execution, for a FileStore),
  then the method. Its ``setUp`` / ``tearDown`` run in the harness's parent only, so not here.
- ``MultiProcContinuousTest`` (a process per rank per class, fed test ids): the class's set-up
  (``cls.rank``, ``cls.world_size``, ``cls._init_pg``) once per rank process, at the class's
  first case there; then the class's ``_run_test_given_id`` for the method. A pooled rank keeps
  that set-up for the class's next cases, as the harness's worker keeps it; a fresh one makes it
  again.

``init_process_group`` in those set-ups returns the case's own default group (cprr._shim). A class
skipped by ``unittest.skip`` gives skipped cases. Imports neither torch nor the compiled module:
it looks for the harness in ``sys.modules`` (a case file that uses it has imported it).
"""

import inspect
import os
import sys
import unittest

from cprr import _case

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
    """The world size the harness would run `method` of `cls` at."""
    if _is_continuous(cls):
        if hasattr(cls, "_get_world_size"):
            return int(cls._get_world_size(_device_type(cls)))
        return int(_property_value(cls, "world_size"))
    return int(cls(method).world_size)  # MultiProcessTestCase: an instance's property


def _skip_marked(cls):
    """A class skipped by unittest.skip / skipIf: the method would still run if called, so the
    case raises what unittest would have reported."""
    if getattr(cls, "__unittest_skip__", False):
        raise unittest.SkipTest(getattr(cls, "__unittest_skip_why__", "") or "skipped class")


def _process_test(cls, method):
    """A MultiProcessTestCase method as its harness's child runs it (MultiProcessTestCase._run)."""

    def body(ctx):
        _skip_marked(cls)
        test = cls(method)
        test.rank = ctx.rank
        test.file_name = ctx.shared_path("file_store")
        getattr(test, method)()

    return body


def _continuous_set_up(cls, ctx):
    """The continuous harness's worker set-up, once per rank process per class (the world size
    too: a pooled rank serves one). A set-up that exits with a TEST_SKIPS code skips every test
    of the class, as the harness's worker answers each with a SkipTest."""
    from cprr import _case_body

    done = cls.__dict__.get("_cprr_set_up")
    if done is not None and done[0] == (ctx.rank, ctx.world_size):
        return done[1]
    cls.rank = ctx.rank
    cls.world_size = ctx.world_size
    skipped = None
    try:
        cls._init_pg(ctx.rank, ctx.world_size, ctx.shared_path("rendezvous_file"))
    except SystemExit as e:
        skipped = _case_body.skip_reason(e)
        if skipped is None:
            raise
    cls._cprr_set_up = ((ctx.rank, ctx.world_size), skipped)
    return skipped


def _continuous_test(cls, method):
    """A MultiProcContinuousTest method as its harness's worker runs it (_worker_loop)."""

    def body(ctx):
        _skip_marked(cls)
        skipped = _continuous_set_up(cls, ctx)
        if skipped is not None:
            raise unittest.SkipTest(skipped)
        cls._run_test_given_id(f"{cls.__module__}.{cls.__qualname__}.{method}")

    return body


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
        except unittest.SkipTest as e:  # no devices of its type here: the harness skips it
            world_size, make = 1, _skipping(str(e))
        except Exception as e:
            problems.append(f"{source}: {cls.__qualname__}.{method}: cannot read its "
                            f"world_size: {type(e).__name__}: {e}")
            continue
        doc = (getattr(cls, method).__doc__ or "").strip().split("\n")[0]
        found.append(_case.CaseDefinition(
            name=f"{cls.__qualname__}.{method}", body=make(cls, method),
            world_sizes=[world_size], grid={}, description=doc, source=source, file=file))
    return found, problems


def _skipping(reason):
    def make(cls, method):
        def body(ctx):
            raise unittest.SkipTest(reason)

        return body

    return make
