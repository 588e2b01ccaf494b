"""The compiled module's API as the package and its tests see it: the type stub (_cprr.pyi) and
conftest's FakeNative and FakeCprr agree with the built module (pybind11's signatures, bindings.cpp)."""

import ast
import inspect
import os
import re

from conftest import FakeCprr, FakeNative
from cprr import _cprr

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
    """name -> ast node of the stub's module-level and CaseContext / Allocation definitions."""
    tree = ast.parse(open(_STUB).read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    found[f"{node.name}.{member.name}"] = member
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
    for cls in ("CaseContext", "Allocation"):
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

