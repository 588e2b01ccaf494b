"""The compiled module's API as the package and its tests see it: the type stub (_cprr.pyi) and
conftest's FakeNative and FakeCprr agree with the built module (pybind11's signatures, bindings.cpp)."""

import ast
import dataclasses
import inspect
import os
import re

import cprr
import pytest
from conftest import FakeCprr, FakeNative
from cprr import _cprr
from cprr.api.case import CaseDefinition

_STUB = os.path.join(os.path.dirname(_cprr.__file__), "_cprr.pyi")


def _binding_parameters(fn):
    """(name, has a default) of each parameter of a pybind11 function, `self` left out; names
    bindings.cpp does not give are pybind11's arg0, arg1..."""
    first = fn.__doc__.strip().splitlines()[0]
    params, depth, current = [], 0, ""
    for c in first[first.index("(") + 1:first.rindex(") ->")] + ",":
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            params.append(current.strip())
            current = ""
        else:
            current += c
    return [(p.split(":")[0], "=" in p) for p in params if p and not p.startswith("self")]


def _stub():
    """name -> ast node of the stub's module-level definitions and of its classes' members."""
    tree = ast.parse(open(_STUB).read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("__"):
                    found[f"{node.name}.{member.name}"] = member
                elif isinstance(member, ast.AnnAssign):
                    found[f"{node.name}.{member.target.id}"] = member
            found[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            found[node.target.id] = node
    return found


def _public(cls_or_module):
    return {n for n in dir(cls_or_module) if not n.startswith("_")}


def test_the_stub_names_everything_the_module_has_and_nothing_else():
    stub = _stub()
    assert {n for n in stub if "." not in n and n != "Touch"} == _public(_cprr)
    for cls in ("CaseContext", "Allocation", "CaseOptions"):
        assert {n.split(".")[1] for n in stub if n.startswith(cls + ".")} == _public(
            getattr(_cprr, cls)), cls


def test_the_stubs_parameters_are_the_bindings():
    stub = _stub()
    for name, node in stub.items():
        owner, _, attr = name.rpartition(".")
        fn = getattr(getattr(_cprr, owner) if owner else _cprr, attr)
        if not isinstance(node, ast.FunctionDef) or isinstance(fn, property):
            continue
        args = node.args
        positional_only = [a.arg for a in args.posonlyargs if a.arg != "self"]
        named = [a.arg for a in args.args if a.arg != "self"]
        binding = _binding_parameters(fn)
        assert len(positional_only) + len(named) == len(binding), name
        if positional_only:  # bindings.cpp names none of them
            assert all(re.fullmatch(r"arg\d+", n) for n, _ in binding), name
        else:
            assert named == [n for n, _ in binding], name
            assert len(args.defaults) == sum(d for _, d in binding), name


def test_a_cases_options_cross_the_seam_by_name_every_field_kept():
    """data/case_info.h's CaseOptions is the one list of a case's options: every field it has is
    a CaseDefinition field, and each crosses with its value (none left at its C++ default)."""
    fields = _cprr.CaseOptions.fields
    assert set(fields) <= {f.name for f in dataclasses.fields(CaseDefinition)}
    d = CaseDefinition(name="seam/every_field", body=None, world_sizes=[3, 5],
                       grid={"n": [1, 2]}, expect="hang", timeout_s=7.5,
                       description="crosses", seeded_bug="state_leak")
    given = d.native_options(_cprr)
    defaults = _cprr.CaseOptions()
    wanted = {f: getattr(d, f) for f in fields}
    wanted["grid"] = [("n", ["1", "2"])]
    for f in fields:
        assert getattr(given, f) == wanted[f], f
        assert getattr(defaults, f) != wanted[f], f"{f}: the test must set it off its default"


def test_a_python_case_runs_at_a_cpp_cases_default_world_sizes():
    """The decorator's default is written in Python (the parent side imports no _cprr): it is
    CaseOptions' own."""
    default = inspect.signature(cprr.case).parameters["world_sizes"].default
    assert list(default) == _cprr.CaseOptions().world_sizes


def test_case_options_refuse_an_unknown_field_and_an_unknown_expect():
    with pytest.raises(TypeError, match="CaseOptions has no field 'timeout'"):
        _cprr.CaseOptions(timeout=3)
    with pytest.raises(ValueError, match="expect='maybe': use 'pass'"):
        _cprr.CaseOptions(expect="maybe")


def test_the_fake_native_has_the_case_contexts_calls_with_its_parameters():
    fake = FakeNative()
    assert _public(_cprr.CaseContext) <= _public(fake)
    for name in _public(_cprr.CaseContext):
        member = getattr(_cprr.CaseContext, name)
        if isinstance(member, property):
            continue
        binding = _binding_parameters(member)
        params = list(inspect.signature(getattr(fake, name)).parameters.values())
        assert len(params) == len(binding), name
        if not all(re.fullmatch(r"arg\d+", n) for n, _ in binding):
            assert [p.name for p in params] == [n for n, _ in binding], name
        assert [p.default is not p.empty for p in params] == [d for _, d in binding], name


def test_the_module_fake_takes_what_the_module_takes():
    """FakeCprr stands in for the module's own calls: each is one of the module's, with as many
    parameters."""
    for name in _public(FakeCprr()) - {"calls", "why", "unseen", "allocated", "peak"}:
        binding = getattr(_cprr, name, None)
        assert callable(binding), f"_cprr has no {name}"
        params = inspect.signature(getattr(FakeCprr(), name)).parameters
        assert len(params) == len(_binding_parameters(binding)), name

