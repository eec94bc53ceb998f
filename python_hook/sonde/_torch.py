"""PyTorch through libsonde's operator observer (wrappers/torch/, docs/torch.md).

- After `import torch`: libsonde registers with RecordFunction, so ATen operators, autograd nodes
  and torch.distributed's process-group calls are recorded; removed at exit. SONDE_TORCH_SHAPES=1
  (`--record-shapes`) adds operators' input shapes and dtypes.
- torch.distributed's init_process_group and new_group become set-up calls (as MPI_Init is), and
  the default group's size is told to libsonde for comm_ops; the program's own Work.wait() a
  wait (as MPI_Wait is).

Apart from _frameworks.py, whose frames the Python hook folds into `<import>` (it is the import
finder): the set-up wrapper here is a frame of its own, above the set-up call it opens.
"""
from . import _env
from ._say import say

# torch versions whose RecordFunction layout wrappers/torch/torch_abi.hpp declares: 1.13 checked
# here, 2.x per its header (checked on the GPU machine's 2.11).
_TORCH_TESTED = ((1, 13),)
_TORCH_SAME_LAYOUT = 2


def _libsonde():
    import ctypes
    lib = ctypes.CDLL(None)  # libsonde is preloaded: its C entries are in the global scope
    if not hasattr(lib, "sonde_torch_observe"):
        raise RuntimeError("libsonde's torch observer is not in this process")
    return lib


def torch_ops_from_env(environ=None):
    """SONDE_TORCH_OPS as a bool (default on); ValueError for a value that is no bool."""
    try:
        return _env.read("SONDE_TORCH_OPS", environ)
    except ValueError as e:
        raise ValueError(f"{e}; torch operators are recorded") from None


def torch_shapes_from_env(environ=None):
    """SONDE_TORCH_SHAPES as a bool (default off); ValueError for a value that is no bool."""
    try:
        return _env.read("SONDE_TORCH_SHAPES", environ)
    except ValueError as e:
        raise ValueError(f"{e}; operators' input shapes are not recorded") from None


def _torch_version(module):
    try:
        major, minor = str(module.__version__).split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
    except (AttributeError, ValueError):
        return None


_bad_value_said = False


def _wanted():
    """SONDE_TORCH_OPS for both patches, a bad value said once (and read as the default)."""
    global _bad_value_said
    try:
        return torch_ops_from_env()
    except ValueError as e:
        if not _bad_value_said:
            _bad_value_said = True
            say(f"sonde: {e}")
        return True


def observe(module):
    if not _wanted():
        return
    lib = _libsonde()
    version = _torch_version(module)
    if version not in _TORCH_TESTED and (version is None or version[0] != _TORCH_SAME_LAYOUT):
        lib.sonde_torch_note(f"torch operators not recorded: torch {module.__version__} is not "
                             "one whose RecordFunction layout sonde knows (1.13, 2.x)".encode())
        return
    try:
        shapes = torch_shapes_from_env()
    except ValueError as e:
        say(f"sonde: {e}")
        shapes = False
    if lib.sonde_torch_observe(3 if shapes else 1) == 0:
        import atexit
        atexit.register(lib.sonde_torch_unobserve)  # before libsonde's own exit flush


def _setup_call(name, function, tells_group, wait=False):
    """`function` (init_process_group, new_group) as one set-up call named `name`: a C callable
    (the extension's), so that no frame of sonde's own stands above the set-up in a profile;
    init_process_group's tells the group's size and this process's rank before it closes.
    wait: a wait frame instead (Work.wait)."""
    import functools
    from . import _sonde
    call = _sonde.setup_call(name, function, _tell_group if tells_group else None, wait)
    functools.update_wrapper(call, function)
    call._sonde_setup = True
    return call


def _tell_group():
    """The default group's size and this process's rank in it, once init_process_group has
    returned (a rank torch.multiprocessing.spawn started has no RANK in its environment)."""
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            lib = _libsonde()
            lib.sonde_torch_group_size(dist.get_world_size())
            lib.sonde_torch_rank(dist.get_rank(), dist.get_world_size())
    except Exception:  # sizes are a figure of the profile, never the program's error
        pass


def patch_distributed(module):
    if not _wanted():
        return
    _libsonde()  # raises (the module is left as it is) where libsonde's torch side is absent
    c10d = getattr(module, "distributed_c10d", None)
    for name in ("init_process_group", "new_group"):
        for owner in (module, c10d):
            function = getattr(owner, name, None)
            if callable(function) and not getattr(function, "_sonde_setup", False):
                setattr(owner, name, _setup_call(f"c10d::{name}".encode(), function,
                                                 name == "init_process_group"))
    _wrap_work_wait(getattr(c10d, "Work", None))
    _tell_group()


def _wrap_work_wait(work):
    """Work.wait() as a `wait` frame of its own, as MPI_Wait is: a rank that waits there for a
    slower one waits in communication, not in the frame that called it (a red-team program's
    sync() holding async all-reduces' waits was blamed for the imbalance its peer's compute
    made). torch.distributed's own calls that wait inside their frames are left to them."""
    wait = getattr(work, "wait", None)
    if isinstance(work, type) and callable(wait) and not getattr(wait, "_sonde_setup", False):
        work.wait = _setup_call(b"c10d::Work::wait", wait, False, wait=True)
