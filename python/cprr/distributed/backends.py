"""A case's default group on the backend its own ``init_process_group`` asks for.

The world's default group is made on cprr's backend (cprr.distributed.process_group.plan). A
suite that asks for another (a CPU test's "gloo" in a world of NCCL, torch 2.x's default
"cpu:gloo,cuda:nccl" where no backend is named) would fail with the world's group where its own
harness, which makes the group it asks for, passes. So when what the case asks for is not what
the world's group gives every device it names, the case gets a group of that backend over the
whole world as its default (torch's ``_update_default_pg``) until it ends; what it asks for
torch cannot make (NCCL in a torch without it) fails as torch fails it.

Such a group is made once per rank process and kept, as the world's is: a pooled case finds it
as a fresh one makes it, and it is made and numbered outside the case's groups
(cprr.distributed.groups), so a case's own groups have the same ids either way.

A case may never call ``init_process_group``: torch's ``DeviceMesh`` makes the default group
itself, by ``init_process_group()`` (torch's default backend for each device), where none is.
Inside a case one always is (the world's), so a mesh made before the case asked for a group
gets what that call would give where the world's group does not run the mesh's device (a CPU
mesh in an NCCL world: cpu's gloo), and the world's group where it does (install_mesh_hook).
"""

import datetime
import functools
import sys

import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from cprr.api import running as _running


class _Defaults:
    """This process's groups of other backends (device map -> group), and the world's own
    default group while a case runs on one of them."""

    def __init__(self):
        self.made = {}
        self.world = None
        self.asked = False  # the running case called init_process_group


_defaults = _Defaults()


def device_map(backend):
    """What `backend` (an init_process_group argument; None: torch's default) gives each device
    type, as sorted (device, backend) pairs. torch 1.x has one backend for every device ("*");
    it takes no None (an error of torch's own, left to the world's group)."""
    config = getattr(_c10d, "BackendConfig", None)
    if config is None:
        return None if backend is None else (("*", str(dist.Backend(backend))),)
    asked = dist.Backend(backend if backend else dist.Backend.UNDEFINED)
    return tuple(sorted((d, str(b)) for d, b in config(asked).get_device_backend_map().items()))


def gives(world, wanted):
    """Whether a group of device map `world` runs every device `wanted` names on its backend."""
    have = dict(world)
    return all(have.get(device) == backend for device, backend in wanted)


def use_for_case(backend, timeout=None, pg_options=None):
    """The running case asked init_process_group for `backend`: its default group is the world's
    when that gives it, else this process's group of that backend (made here the first time, by
    every rank of the world, as the case's call is on each)."""
    wanted = device_map(backend)
    if wanted is None:
        return
    world = _defaults.world or _c10d._get_default_group()
    if gives(device_map(dist.get_backend(world)), wanted):
        restore_world()  # asked again after another backend, in the same case
    else:
        if wanted not in _defaults.made:
            _defaults.made[wanted] = _make(backend, timeout, pg_options)
        use(_defaults.made[wanted])
    _defaults.asked = True


def use_for_mesh(device_type):
    """A DeviceMesh of `device_type` is being made: where the running case has not asked for
    its default group and the world's does not run `device_type` on torch's default backend for
    it, the case gets the group ``init_process_group()`` would give (see the module's doc)."""
    if _defaults.asked or _running.current() is None or not dist.is_initialized():
        return
    wanted = [(d, b) for d, b in (device_map(None) or ()) if d == device_type]
    world = _c10d._get_default_group()
    if wanted and not gives(device_map(dist.get_backend(world)), wanted):
        use_for_case(None)


def install_mesh_hook():
    """DeviceMesh's construction passes its device type to use_for_mesh first; once, where this
    torch has a DeviceMesh (torch.distributed.device_mesh, 2.2 on)."""
    mesh = getattr(sys.modules.get("torch.distributed.device_mesh"), "DeviceMesh", None)
    init = getattr(mesh, "__init__", None)
    if not isinstance(mesh, type) or init is None or hasattr(init, "__cprr_wrapped__"):
        return

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        use_for_mesh(args[0] if args else kwargs.get("device_type"))
        init(self, *args, **kwargs)

    __init__.__cprr_wrapped__ = init
    mesh.__init__ = __init__


def use(group):
    """`group` is the default group until the running case ends (restore_world)."""
    _defaults.asked = True
    if group is dist.group.WORLD:
        return
    if _defaults.world is None:
        _defaults.world = _c10d._get_default_group()
    _c10d._update_default_pg(group)


def restore_world():
    """The world's own group is the default again (and the next case has asked for none)."""
    _defaults.asked = False
    if _defaults.world is not None:
        _c10d._update_default_pg(_defaults.world)
        _defaults.world = None


def _make(backend, timeout, pg_options):
    """A group of `backend` over every rank, made as torch's new_group makes one (the world's
    store), past cprr's numbering of the case's groups (the original new_group)."""
    new_group = getattr(_c10d.new_group, "__cprr_wrapped__", _c10d.new_group)
    options = {"backend": backend if backend else dist.Backend.UNDEFINED}
    if isinstance(timeout, datetime.timedelta):
        options["timeout"] = timeout
    if pg_options is not None:
        options["pg_options"] = pg_options
    return new_group(**options)
