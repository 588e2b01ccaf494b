"""The ``@cprr.case`` decorator and the cases it registered in this process."""

import dataclasses
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence

_EXPECTS = ("pass", "fail", "crash", "hang")
_BAD_NAME = re.compile(r"[\s{]")


@dataclasses.dataclass
class CaseDefinition:
    """One ``@cprr.case`` function and its options (what the worker's catalog lists)."""

    name: str
    body: Callable[..., Any]
    world_sizes: List[int]
    grid: Dict[str, List[Any]]
    expect: str = "pass"
    timeout_s: float = 0.0
    description: str = ""
    seeded_bug: str = ""
    source: str = ""  # file:line of the definition, for messages
    file: str = ""  # the defining file, absolute: the catalog's case files (their hashes)
    declared_in: str = ""  # the case file that declared it, absolute (cprr.script's caller)

    def grid_text(self) -> List[tuple]:
        """The grid as the catalog carries it: every value as its text."""
        return [(axis, [str(v) for v in values]) for axis, values in self.grid.items()]

    def native_options(self, native_module) -> Any:
        """This case's options as the rank runtime takes them (``_cprr.CaseOptions``), every
        field by its name: data/case_info.h's CaseOptions is their one list, so a field it has
        and this class lacks fails here, loudly."""
        values = {f: getattr(self, f) for f in native_module.CaseOptions.fields}
        values["grid"] = self.grid_text()
        return native_module.CaseOptions(**values)

    def value_of(self, axis: str, text: str) -> Any:
        """The grid value of `axis` whose text is `text` (the Python object, not its text)."""
        for v in self.grid.get(axis, []):
            if str(v) == text:
                return v
        return text


_REGISTERED: List[CaseDefinition] = []


def registered_cases() -> List[CaseDefinition]:
    """The cases registered so far in this process, in definition order."""
    return list(_REGISTERED)


def declared_in(path: str) -> List[CaseDefinition]:
    """The cases the case file at `path` declared by a call (cprr.script), in order."""
    path = os.path.abspath(path)
    return [d for d in _REGISTERED if d.declared_in == path]


def _default_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "") or ""
    stem = module.rsplit(".", 1)[-1] or "case"
    return f"{stem}/{fn.__name__}"


def _check(defn: CaseDefinition) -> None:
    where = f"@cprr.case on {defn.source}"
    if not defn.name or _BAD_NAME.search(defn.name):
        raise ValueError(f"{where}: name {defn.name!r} is empty or has whitespace or '{{'")
    if not defn.world_sizes or any(
        isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in defn.world_sizes
    ):
        raise ValueError(f"{where}: world_sizes must be integers >= 1, got {defn.world_sizes!r}")
    if defn.expect not in _EXPECTS:
        raise ValueError(f"{where}: expect={defn.expect!r}: use one of {', '.join(_EXPECTS)}")
    for axis, values in defn.grid.items():
        if not isinstance(axis, str) or not values:
            raise ValueError(f"{where}: grid axis {axis!r} needs a name and at least one value")
        texts = [str(v) for v in values]
        if len(set(texts)) != len(texts):
            raise ValueError(f"{where}: grid axis {axis!r} has values with the same text")
    if defn.timeout_s < 0:
        raise ValueError(f"{where}: timeout_s must be >= 0")


def add(defn: CaseDefinition) -> None:
    """Registers a case definition after checking it (ValueError naming its source)."""
    _check(defn)
    _REGISTERED.append(defn)


def case(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    world_sizes: Sequence[int] = (2, 4),  # CaseOptions' own (test_native.py holds them equal)
    grid: Optional[Dict[str, Sequence[Any]]] = None,
    expect: str = "pass",
    timeout_s: float = 0.0,
    description: str = "",
    seeded_bug: str = "",
):
    """Registers ``fn(ctx)`` as a cprr case and returns it unchanged.

    name: the case's name (default ``<module>/<function>``); world_sizes: the world sizes it runs
    at (default: a C++ case's, 2 and 4); grid: parameter axes (``ctx.param(axis)`` returns the
    value, with its Python type);
    expect: pass | fail | crash | hang; timeout_s: its deadline (0: cprecord's --timeout);
    seeded_bug: the verdict a planted bug must get (state_leak, allocator_order, ...).
    """

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        code = getattr(f, "__code__", None)
        source = (
            f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else repr(f)
        )
        file = os.path.abspath(code.co_filename) if code and os.path.isfile(code.co_filename) \
            else ""
        defn = CaseDefinition(
            name=name or _default_name(f),
            body=f,
            world_sizes=list(world_sizes),
            grid={k: list(v) for k, v in (grid or {}).items()},
            expect=expect,
            timeout_s=float(timeout_s),
            description=description or (f.__doc__ or "").strip().split("\n")[0],
            seeded_bug=seeded_bug,
            source=source,
            file=file,
        )
        add(defn)
        f.__cprr_case__ = defn
        return f

    return register(fn) if fn is not None else register
