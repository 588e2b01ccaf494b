"""@cprr.case (cprr.api.case): validation, default names, ctx.param's typed values and a CPU
tensor's capture (cprr.api.context, cprr.api.tensors), and the plugin's labels."""

import pytest

import cprr
from conftest import FakeNative
from cprr import pytest_plugin
from cprr.api.context import Context


def _define(**options):
    def body(ctx):
        pass

    return cprr.case(**options)(body)


# ---- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["has space", "tab\there", "brace{n=1}", "open{", "line\nbreak"])
def test_a_name_with_whitespace_or_brace_is_refused(name):
    before = len(cprr.registered_cases())
    with pytest.raises(ValueError, match=r"name .* is empty or has whitespace or '\{'"):
        _define(name=name)
    assert len(cprr.registered_cases()) == before  # nothing registered


def test_the_error_names_where_the_case_is_defined():
    with pytest.raises(ValueError, match=r"@cprr.case on test_case\.py:\d+"):
        _define(name="bad name")


@pytest.mark.parametrize("world_sizes", [[], [0], [2, 0], [-1], [2.0]])
def test_world_sizes_must_be_integers_of_at_least_one(world_sizes):
    with pytest.raises(ValueError, match="world_sizes must be integers >= 1"):
        _define(name="test_case/ws", world_sizes=world_sizes)


def test_an_unknown_expect_is_refused():
    with pytest.raises(ValueError, match=r"expect='flaky': use one of pass, fail, crash, hang"):
        _define(name="test_case/expect", expect="flaky")


@pytest.mark.parametrize("expect", ["pass", "fail", "crash", "hang"])
def test_known_expects_are_accepted(expect):
    fn = _define(name=f"test_case/expect_{expect}", expect=expect, world_sizes=[1])
    assert fn.__cprr_case__.expect == expect


@pytest.mark.parametrize("values", [[1, "1"], [1.5, "1.5"], ["a", "b", "a"], [True, "True"]])
def test_grid_values_with_the_same_text_are_refused(values):
    with pytest.raises(ValueError, match="grid axis 'n' has values with the same text"):
        _define(name="test_case/grid", grid={"n": values})


def test_an_empty_grid_axis_is_refused():
    with pytest.raises(ValueError, match="grid axis 'n' needs a name and at least one value"):
        _define(name="test_case/grid_empty", grid={"n": []})


def test_a_negative_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout_s must be >= 0"):
        _define(name="test_case/timeout", timeout_s=-1)


# ---- registration and defaults ----------------------------------------------------------------


def test_default_name_is_module_stem_slash_function():
    def my_case(ctx):
        """First line of the doc.

        More text."""

    my_case.__module__ = "some.package.test_things"
    returned = cprr.case(world_sizes=[1])(my_case)
    assert returned is my_case  # the function itself, unchanged
    defn = my_case.__cprr_case__
    assert defn.name == "test_things/my_case"
    assert defn.description == "First line of the doc."
    assert defn in cprr.registered_cases()


def test_default_name_in_this_module():
    @cprr.case
    def bare(ctx):
        pass

    stem = __name__.rsplit(".", 1)[-1]
    assert bare.__cprr_case__.name == f"{stem}/bare"
    assert bare.__cprr_case__.world_sizes == [2, 4]  # the default
    assert bare.__cprr_case__.expect == "pass"


def test_options_are_kept():
    fn = _define(name="test_case/options", world_sizes=(1, 3), grid={"n": (1, 2)},
                 expect="fail", timeout_s=7, description="d", seeded_bug="state_leak")
    d = fn.__cprr_case__
    assert (d.name, d.world_sizes, d.grid, d.expect, d.timeout_s, d.description, d.seeded_bug) == (
        "test_case/options", [1, 3], {"n": [1, 2]}, "fail", 7.0, "d", "state_leak")
    assert d.grid_text() == [("n", ["1", "2"])]
    assert d.source.startswith("test_case.py:")


# ---- ctx.param --------------------------------------------------------------------------------


GRID = {"n": [1, 1000], "scale": [0.5, 2.0], "flag": [True, False], "kind": ["a", "b"]}


def _context(params):
    defn = _define(name="test_case/params", world_sizes=[4], grid=GRID).__cprr_case__
    native = FakeNative(rank=1, world_size=4, seed=1234, case_name="test_case/params",
                        params=params)
    return Context(native, defn, "cpu")


def test_param_returns_the_grid_value_with_its_python_type():
    ctx = _context({"n": "1000", "scale": "0.5", "flag": "False", "kind": "b"})
    assert ctx.param("n") == 1000 and type(ctx.param("n")) is int
    assert ctx.param("scale") == 0.5 and type(ctx.param("scale")) is float
    assert ctx.param("flag") is False
    assert ctx.param("kind") == "b"


def test_context_carries_who_it_is():
    ctx = _context({"n": "1"})
    assert (ctx.rank, ctx.world_size, ctx.seed, ctx.name) == (1, 4, 1234, "test_case/params")
    assert ctx.params == {"n": "1"}
    assert ctx.device == "cpu"


def test_a_cpu_tensors_capture_is_hashed_on_the_host_whatever_the_backend():
    # A cuda case's CPU tensor (gloo's point-to-point takes only those): the device must not
    # read its pageable memory, so the native side hashes it on the host.
    import torch

    ctx = _context({"n": "1"})
    ctx.output("recv", torch.arange(4, dtype=torch.float32))
    (is_output, name, _, nbytes, dtype, shape, stream, host), = ctx._native.captures
    assert (is_output, name, nbytes, dtype, shape, stream, host) == (
        True, "recv", 16, "f32", [4], 0, True)


def test_param_of_an_unknown_axis_names_the_axes():
    ctx = _context({"n": "1", "kind": "a"})
    with pytest.raises(KeyError, match=r"has no parameter 'm' \(its grid has: kind, n\)"):
        ctx.param("m")


# ---- pytest_plugin.labels_of --------------------------------------------------------------------


def test_labels_sort_params_by_name():
    fn = _define(name="test_case/labels", world_sizes=[2, 4], grid={"z": [1, 2], "a": ["x"]})
    assert pytest_plugin.labels_of(fn.__cprr_case__) == [
        "test_case/labels{a=x,z=1}@2",
        "test_case/labels{a=x,z=1}@4",
        "test_case/labels{a=x,z=2}@2",
        "test_case/labels{a=x,z=2}@4",
    ]


def test_labels_without_a_grid():
    fn = _define(name="test_case/nogrid", world_sizes=[1, 2])
    assert pytest_plugin.labels_of(fn.__cprr_case__) == ["test_case/nogrid@1", "test_case/nogrid@2"]
