#!/usr/bin/env python3
"""Checks that every import of the Python package (python/cprr) points down its rooms, as
check_includes.py does for the C++ includes. The rooms, lowest first:

    api          the case API: @cprr.case, ctx, cprr.accesses, the running case, skips
    capture      the op capture (python/native/capture's Python side)
    distributed  torch.distributed inside a case: collectives, groups, staging, the shim
    suites       suites run unchanged: case files, the TestCase family, torchrun scripts, pytest
    rank         the rank process: worker loop, case set-up and body, the template
    (top)        the package's entry points: cprr/__init__.py, cprr.worker, cprr.pytest_plugin

A module may import its own room and any lower one; the compiled modules (cprr._cprr,
cprr._cprr_torch) sit below every room. Every import counts, a lazy one inside a function too.
Within a room the modules' imports form no circle (a module that needs one that needs it takes
it as an argument instead). Prints the rooms with the arrows found; exits 1 naming each import
that points up (or at a module that is in no room) and each circle, module by module.

    tools/layout/check_python_imports.py [SOURCE_ROOT]

Run by ctest (layout_python_imports_point_down).
"""
import ast
import pathlib
import sys

ROOMS = ["api", "capture", "distributed", "suites", "rank", "top"]
COMPILED = {"_cprr", "_cprr_torch"}


def room_of(parts):
    """The room of module cprr.<parts...> ('compiled' for the compiled modules), or None when
    cprr has no such room."""
    if not parts:
        return "top"
    if parts[0] in COMPILED:
        return "compiled"
    if parts[0] in ROOMS[:-1]:
        return parts[0]
    if len(parts) == 1 and not parts[0].startswith("_"):
        return "top"  # cprr.worker, cprr.pytest_plugin
    return None


def imported(tree):
    """(line, dotted module below cprr as a list) for every import of cprr in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "cprr":
            base = node.module.split(".")[1:]
            for alias in node.names:
                # `from cprr.room import module` names a module, `from cprr.room.module import
                # name` something in it: either way the room is the first part.
                yield node.lineno, base + [alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "cprr":
                    yield node.lineno, parts[1:]


def arrows(package: pathlib.Path):
    """(source room, target room, where) for every import of cprr in the package."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        src = room_of(list(rel.parts[:-1]) or [rel.stem]) if len(rel.parts) > 1 else "top"
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, parts in imported(tree):
            out.append((src, room_of(parts), f"{rel}:{line} imports cprr.{'.'.join(parts)}"))
    return out


def module_of(package: pathlib.Path, parts):
    """The dotted module (below cprr) that an import of cprr.<parts...> names: the longest
    prefix that is a module file (`from cprr.suites.case_files import load_cases` names
    suites.case_files); None for a package's __init__ or the compiled modules."""
    for n in range(len(parts), 0, -1):
        if (package.joinpath(*parts[:n]).with_suffix(".py")).is_file():
            return ".".join(parts[:n])
    return None


def circles(package: pathlib.Path):
    """The circles of imports between the package's modules that a depth-first walk meets (at
    least one wherever there is any), each as its modules in order, the first repeated last,
    starting from its least module."""
    graph = {}
    for path in sorted(package.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        name = ".".join(path.relative_to(package).with_suffix("").parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = sorted({m for _, parts in imported(tree)
                              if (m := module_of(package, parts)) not in (None, name)})
    found = set()
    state = {}  # module -> "open" while on the walk's path, "done" after

    def walk(module, path):
        state[module] = "open"
        path.append(module)
        for target in graph.get(module, ()):
            if state.get(target) == "open":
                loop = path[path.index(target):]
                least = loop.index(min(loop))
                found.add(tuple(loop[least:] + loop[:least]))
            elif target not in state:
                walk(target, path)
        path.pop()
        state[module] = "done"

    for module in graph:
        if module not in state:
            walk(module, [])
    return [list(loop) + [loop[0]] for loop in sorted(found)]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    package = root / "python" / "cprr"
    found = arrows(package)
    bad = [why for src, dst, why in found
           if dst is None or (dst != "compiled" and ROOMS.index(dst) > ROOMS.index(src))]
    bad += [f"a circle of imports: {' -> '.join(loop)}" for loop in circles(package)]
    drawn = {}
    for src, dst, _ in found:
        if dst not in (None, src, "compiled"):
            drawn.setdefault(src, set()).add(dst)
    print("python rooms, lowest first (each imports only its own room, lower ones and the "
          "compiled modules):")
    for room in ROOMS:
        print(f"  {room}: imports {' '.join(sorted(drawn.get(room, ()), key=ROOMS.index)) or '-'}")
    for why in bad:
        print(why if why.startswith("a circle") else
              f"an import points up or out of the rooms: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
