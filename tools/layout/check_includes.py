#!/usr/bin/env python3
"""Checks that every arrow of cprr's include graph points down: the graph of rooms (a folder
library: recorder/engine, cli, data, ...) and the graph of top-level folders (recorder/ as one)
drawn from the sources' #include "room/file.h" lines are both acyclic, so each can be drawn in
layers with every include going to a lower layer. Prints the layers; exits 1 naming the cycle.

    tools/layout/check_includes.py [SOURCE_ROOT]

Tests are left out: a test may include whatever it tests. Run by ctest (layout_includes_point_down).
"""
import pathlib
import re
import sys

# The folders whose sources make up the product, and the folders holding several rooms.
PRODUCT = ["runtime", "kernels", "data", "analysis", "schema", "recorder", "cli", "replayer", "commands",
           "corpus", "tools", "python/native", "package/include"]
MULTI_ROOM = {"recorder", "python", "package"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".in"}


def room_of(rel: pathlib.PurePosixPath) -> str:
    parts = rel.parts
    if parts[0] in MULTI_ROOM and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def folder_of(room: str) -> str:
    return room.split("/")[0]


def edges(root: pathlib.Path):
    out = {}
    for top in PRODUCT:
        for path in (root / top).rglob("*"):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            src = room_of(rel)
            for inc in INCLUDE.findall(path.read_text(errors="replace")):
                target = pathlib.PurePosixPath(inc)
                if len(target.parts) < 2 or not (root / inc).exists():
                    continue  # a header beside the file, or a system one
                dst = room_of(target)
                if dst != src:
                    out.setdefault((src, dst), f"{rel} includes {inc}")
    return out


def layers(nodes, arrows):
    """Layer 0 holds what includes nothing; a node sits above everything it includes. Returns
    (layers, cycle) where cycle is a list of nodes when the graph has one."""
    level, state = {}, {}

    def visit(n, path):
        if state.get(n) == "done":
            return None
        if state.get(n) == "open":
            return path[path.index(n):] + [n]
        state[n] = "open"
        below = [d for (s, d) in arrows if s == n]
        for d in below:
            cycle = visit(d, path + [n])
            if cycle:
                return cycle
        level[n] = 1 + max((level[d] for d in below), default=-1)
        state[n] = "done"
        return None

    for n in sorted(nodes):
        cycle = visit(n, [])
        if cycle:
            return None, cycle
    out = {}
    for n, k in level.items():
        out.setdefault(k, []).append(n)
    return [sorted(out[k]) for k in sorted(out)], None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    room_edges = edges(root)
    folder_edges = {}
    for (s, d), why in room_edges.items():
        if folder_of(s) != folder_of(d):
            folder_edges.setdefault((folder_of(s), folder_of(d)), why)
    bad = 0
    for what, arrows in (("rooms", room_edges), ("top-level folders", folder_edges)):
        nodes = {n for e in arrows for n in e}
        drawn, cycle = layers(nodes, arrows)
        if cycle:
            bad = 1
            print(f"{what}: an arrow points up, the cycle " + " -> ".join(cycle))
            for s, d in zip(cycle, cycle[1:]):
                print(f"  {s} -> {d}: {arrows[(s, d)]}")
            continue
        print(f"{what}, lowest layer first (every include goes to a lower layer):")
        for k, layer in enumerate(drawn):
            print(f"  {k}: {' '.join(layer)}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
