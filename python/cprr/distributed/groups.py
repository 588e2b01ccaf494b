"""Process groups as cprr's logs name them.

A group's id is its creation order in the process (the world is 0): torch has every rank of the
world call new_group for every group, members or not, so the n-th group is the same group on
every rank that takes part, which is what the checks need to line up its collectives. Groups a
case makes are ended with it (cprr.rank.case_body), and their numbers are given out again from where
the case started, so a pooled rank's case numbers its groups as a fresh rank's does.

Every rank counts every creation: a group made with use_local_synchronization=True, or a
split_group of a parent some ranks are not in, lets the counts of the ranks that skip it fall
behind, and the same group may then have other numbers on them.

A group torch's registry does not know (a ``ProcessGroup`` constructed directly, as RPC's
TensorPipe agent makes its own ``ProcessGroupGloo(store, rank, size)``, or a subclass a library
defines) is numbered as it is constructed, from 1000 up, in the order of construction since the
case began (install_constructions): constructing a group connects its members to each other
through their shared store, so its members construct their groups in one order, and a pooled
case numbers them as a fresh one does. Its members and backend are read from the group itself:
its size, every rank of the world when it is the world's size (else its members are told by the
logs of the ranks that used it), its name. A group made in C++ and handed to Python, whose
construction Python never sees, is numbered at its first use, from the same count.
"""

import functools
import inspect
import threading
import weakref

import torch.distributed as dist

from cprr.api import running as _running

# A group's first use numbers it from here when its creation was not seen.
_UNSEEN_FIRST_ID = 1000
_MAX_MASK_RANK = 64


class _Registry:
    """The groups of this process: id(group) -> (id, group), the group kept alive with it so its
    id(...) is never reused by another object; and the groups constructed outside torch's
    registry: id(group) -> (id, weak reference), dropped when the group dies (it is the
    constructor's to keep, RPC's agent's say, not cprr's)."""

    def __init__(self):
        self.ids = {}
        self.built = {}
        self.ranks = {}  # id(group) -> (group, its ranks of the world)
        self.next_id = 1
        self.next_unseen = _UNSEEN_FIRST_ID
        self.case_unseen = None  # next_unseen when the running case began
        # Per thread: inside torch's own making of a registered group (new_group, split_group,
        # init_process_group), whose constructions are numbered by `made`, not as built.
        self.making = threading.local()


_registry = _Registry()


def made(group):
    """new_group or split_group returned `group` (None or torch's non-member marker on a rank
    outside it): the next id is its, on every rank."""
    number = _registry.next_id
    _registry.next_id += 1
    if group is not None and group is not dist.GroupMember.NON_GROUP_MEMBER:
        _registry.ids[id(group)] = (number, group)
    return number


def made_split(group, subgroups, index):
    """split_group returned `group`: one call makes `subgroups` groups (its split_ranks), each
    rank getting the one at `index` (None: it is in none). Each is numbered in the order the call
    lists them, so the same number is the same group on every rank."""
    first = _registry.next_id
    _registry.next_id += max(subgroups, 1)
    if index is not None and group is not None and \
            group is not dist.GroupMember.NON_GROUP_MEMBER:
        _registry.ids[id(group)] = (first + index, group)
    return first + index if index is not None else None


def case_started():
    """Where the running case's groups start; hand it back to case_ended."""
    _registry.case_unseen = _registry.next_unseen
    return _registry.next_id


def case_ended(first_id):
    """The case's groups are ended: their numbers are free again, as in a fresh rank."""
    unseen = _registry.case_unseen if _registry.case_unseen is not None else \
        _registry.next_unseen
    _registry.ids = {k: v for k, v in _registry.ids.items()
                     if v[0] < first_id or _UNSEEN_FIRST_ID <= v[0] < unseen}
    _registry.built = {k: v for k, v in _registry.built.items() if v[0] < unseen}
    _registry.next_unseen = unseen
    _registry.case_unseen = None
    _registry.ranks = {k: v for k, v in _registry.ranks.items() if k in _registry.ids}
    _registry.next_id = first_id


def is_world(group):
    return group is None or group is dist.group.WORLD or group is dist.GroupMember.WORLD


def global_rank(group, rank):
    """A rank of `group` as a rank of the world (None and negatives as they are; a group torch's
    registry does not know has no map of its ranks: torch's own call fails on it as it would
    without cprr)."""
    if rank is None or rank < 0 or is_world(group) or _registered_ranks(group) is None:
        return rank
    return dist.get_global_rank(group, rank)


def _registered_ranks(group):
    """The world ranks of `group` as torch's registry has them, or None when it has none."""
    known = _registry.ranks.get(id(group))
    if known is not None and known[0] is group:  # asked once per group: calls in loops are many
        return known[1]
    try:
        ranks = [int(r) for r in dist.get_process_group_ranks(group)]
    except (KeyError, RuntimeError, ValueError):
        return None
    _registry.ranks[id(group)] = (group, ranks)
    return ranks


def _members(group):
    """`group`'s ranks of the world: the registry's, else read from the group itself (every rank
    when it is the world's size; [] when it is not: which ranks, its members' logs tell)."""
    ranks = _registered_ranks(group)
    if ranks is not None:
        return ranks
    size = int(group.size())
    return list(range(size)) if size == dist.get_world_size() else []


def backend_of(group):
    """The backend of `group` as torch names it: the registry's, else the group's own name()."""
    if is_world(group) or _registered_ranks(group) is not None:
        return str(dist.get_backend(None if is_world(group) else group))
    name = getattr(group, "name", None)
    try:
        return str(name()).lower() if callable(name) else "unknown"
    except RuntimeError:
        return "unknown"


def _name(group):
    """torch's description of the group (DeviceMesh names its dimensions' groups), or ''."""
    desc = getattr(group, "group_desc", None)
    if isinstance(desc, str) and desc and desc != "undefined":
        return desc
    return ""


def _mask(ranks):
    if not ranks or max(ranks) >= _MAX_MASK_RANK:
        return 0  # told by the logs alone
    mask = 0
    for r in ranks:
        mask |= 1 << r
    return mask


def describe(group, native):
    """(id, members bitmask) of `group` as the logs name it, noting it for the running case
    (native.note_group) the first time the case uses it. The world is (0, 0); None for torch's
    marker of a group this rank is not in (torch ignores such a call)."""
    if is_world(group):
        return 0, 0
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        return None
    number = _number(group)
    ranks = _members(group)
    noted = _running.noted_groups()
    if noted is not None and number not in noted:
        noted.add(number)
        native.note_group(number, ranks, backend_of(group), _name(group))
    return number, _mask(ranks)


def _number(group):
    """`group`'s number: as made (new_group, split_group), as constructed outside torch's
    registry, else from its first use, from the same count."""
    entry = _registry.ids.get(id(group))
    if entry is not None:
        return entry[0]
    built = _registry.built.get(id(group))
    if built is not None and built[1]() is group:
        return built[0]
    number = _registry.next_unseen
    _registry.next_unseen += 1
    _registry.ids[id(group)] = (number, group)
    return number


def _built(group):
    """A group was constructed outside torch's group making: the next number is its."""
    if getattr(_registry.making, "depth", 0) > 0:
        return
    key = id(group)
    number = _registry.next_unseen
    _registry.next_unseen += 1
    _registry.built[key] = (number, weakref.ref(group, lambda _: _registry.built.pop(key, None)))


class _making:
    """The block of torch's own making of a registered group: its constructions are not `_built`."""

    def __enter__(self):
        _registry.making.depth = getattr(_registry.making, "depth", 0) + 1

    def __exit__(self, *exc):
        _registry.making.depth -= 1
        return False


def wrap_group_making(original):
    """torch's helper that makes every registered group (``_new_process_group_helper``): the
    groups it constructs are numbered as made, by the caller, not as built."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        with _making():
            return original(*args, **kwargs)

    wrapper.__cprr_wrapped__ = original
    return wrapper


def _wrap_init(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _built(self)

    __init__.__cprr_wrapped__ = original
    return __init__


def install_constructions(c10d_classes):
    """Numbers each process group constructed directly (see the module's doc): the constructor
    of every class of torch's `c10d_classes` (torch._C._distributed_c10d) that is a
    ProcessGroup, or on torch 2.x a Backend, is wrapped, once. A Python subclass's constructor
    calls its base's, so its groups are numbered too."""
    bases = tuple(b for b in (getattr(c10d_classes, n, None) for n in ("ProcessGroup", "Backend"))
                  if isinstance(b, type))
    for name in dir(c10d_classes):
        cls = getattr(c10d_classes, name)
        if not (isinstance(cls, type) and issubclass(cls, bases)):
            continue
        init = cls.__dict__.get("__init__")
        if init is None or hasattr(init, "__cprr_wrapped__"):
            continue
        cls.__init__ = _wrap_init(init)


def wrap_new_group(original):
    """new_group and split_group (and what calls them: new_subgroups, DeviceMesh): every group
    is numbered as made (cprr.distributed.groups); one made while a case runs is the case's, in its
    log and ended with it (cprr.api.running.made_group)."""
    signature = inspect.signature(original)
    splits = original.__name__ == "split_group"

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        group = original(*args, **kwargs)
        if splits:  # one call, a group per list of split_ranks: this rank's is its own
            arguments = signature.bind(*args, **kwargs).arguments
            split_ranks = arguments.get("split_ranks") or []
            parent = arguments.get("parent_pg")
            me = dist.get_rank()
            if not is_world(parent):  # split_ranks are ranks of the parent group
                me = dist.get_group_rank(parent, me)
            index = next((i for i, ranks in enumerate(split_ranks) if me in ranks), None)
            made_split(group, len(split_ranks), index)
        else:
            made(group)
        native = _running.current()
        if native is not None and group is not None and \
                group is not dist.GroupMember.NON_GROUP_MEMBER:
            _running.made_group(group)
            describe(group, native)
        return group

    wrapper.__cprr_wrapped__ = original
    return wrapper


def end_groups(groups):
    """Destroys `groups` (those a case made), newest first; one the case destroyed itself is
    skipped. Returns how many were destroyed."""
    ended = 0
    for group in reversed(groups):
        try:
            dist.destroy_process_group(group)
            ended += 1
        except (ValueError, RuntimeError):  # destroyed by the case already
            pass
    return ended
