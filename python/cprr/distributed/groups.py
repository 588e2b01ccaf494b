"""Process groups as cprr's logs name them.

A group's id is its creation order in the process (the world is 0): torch has every rank of the
world call new_group for every group, members or not, so the n-th group is the same group on
every rank that takes part, which is what the checks need to line up its collectives. Groups a
case makes are ended with it (cprr.rank.case_body), and their numbers are given out again from where
the case started, so a pooled rank's case numbers its groups as a fresh rank's does.

Every rank counts every creation: a group made with use_local_synchronization=True, or a
split_group of a parent some ranks are not in, lets the counts of the ranks that skip it fall
behind, and the same group may then have other numbers on them.

A group made some other way than through new_group or split_group (wrapped here:
wrap_new_group) is numbered at its first use, from 1000 up: such ids are equal across ranks
only when the ranks first use their groups in the same order.
"""

import functools
import inspect

import torch.distributed as dist

from cprr.api import running as _running

# A group's first use numbers it from here when its creation was not seen.
_UNSEEN_FIRST_ID = 1000
_MAX_MASK_RANK = 64


class _Registry:
    """The groups of this process: id(group) -> (id, group), the group kept alive with it so its
    id(...) is never reused by another object."""

    def __init__(self):
        self.ids = {}
        self.ranks = {}  # id(group) -> (group, its ranks of the world)
        self.next_id = 1
        self.next_unseen = _UNSEEN_FIRST_ID
        self.case_unseen = None  # next_unseen when the running case began


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
    _registry.next_unseen = unseen
    _registry.case_unseen = None
    _registry.ranks = {k: v for k, v in _registry.ranks.items() if k in _registry.ids}
    _registry.next_id = first_id


def is_world(group):
    return group is None or group is dist.group.WORLD or group is dist.GroupMember.WORLD


def global_rank(group, rank):
    """A rank of `group` as a rank of the world (None and negatives as they are)."""
    if rank is None or rank < 0 or is_world(group):
        return rank
    return dist.get_global_rank(group, rank)


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
    entry = _registry.ids.get(id(group))
    if entry is None:
        entry = (_registry.next_unseen, group)
        _registry.next_unseen += 1
        _registry.ids[id(group)] = entry
    number = entry[0]
    known = _registry.ranks.get(id(group))
    if known is None or known[0] is not group:  # asked once per group: calls in loops are many
        known = (group, [int(r) for r in dist.get_process_group_ranks(group)])
        _registry.ranks[id(group)] = known
    ranks = known[1]
    noted = _running.noted_groups()
    if noted is not None and number not in noted:
        noted.add(number)
        backend = str(dist.get_backend(group))
        native.note_group(number, ranks, backend, _name(group))
    return number, _mask(ranks)


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
