"""Framework hooks that sonde installs in the launcher and in the run's child interpreters.

- Framework ranges as sonde regions: torch.autograd.profiler.record_function (which
  torch.profiler.record_function is, and which torch's optimizers and DataLoader open around
  every step and batch) appears in the tree as a region of its name, with what runs inside
  beneath it (patched once `import torch` has run).
- Operators and collectives: after `import torch`, libsonde registers with PyTorch's operator
  observer (RecordFunction; wrappers/torch/), so ATen operators, autograd nodes and
  torch.distributed's process-group calls appear in the tree (docs/torch.md). `SONDE_TORCH_OPS=0`
  turns it off. init_process_group and new_group become set-up calls, as MPI_Init is.
- `SONDE_TORCH_THREADS=N` (sonde tune's framework-threads stage): torch's intra-op pool is held
  at N threads, including against the program's own torch.set_num_threads, which would
  otherwise win over OMP_NUM_THREADS. An experiment's knob, off unless set.

A module is patched when it is first imported (a finder on sys.meta_path that finds nothing
itself), or at once when it already is."""
import importlib.machinery
import sys

from ._say import say


def _record_ranges(module):
    """record_function's `with` blocks as regions: its __enter__ and __exit__ become sonde's C
    hooks. TorchScript compiles the class from its methods' source the first time a scripted
    function opens one, and C hooks have none: torch.jit.script of any code with a
    record_function failed ("Cannot instantiate class 'record_function'", a red-team find). So
    the class is compiled for TorchScript first, from its own methods (once, about 9 ms; what
    the program's first script would have done), and TorchScript keeps that."""
    from . import _sonde
    cls = getattr(module, "record_function", None)
    if not isinstance(cls, type):
        return
    try:
        import torch._jit_internal
        import torch.jit._script
        torch.jit._script._recursive_compile_class(cls, torch._jit_internal.fake_range())
    except Exception:  # a torch without TorchScript, or another layout: ranges all the same
        pass
    _sonde.record_ranges(cls)


def torch_threads_from_env(environ=None):
    """The thread count SONDE_TORCH_THREADS asks for: None when unset or 0; ValueError for a
    value that is no count from 1 to 65535 (as libprof/include/sonde/options.hpp declares)."""
    from . import _env
    try:
        return _env.read("SONDE_TORCH_THREADS", environ) or None
    except ValueError as e:
        raise ValueError(f"{e}; torch's threads are left as the program sets them") from None


def _hold_torch_threads(module):
    held = torch_threads_from_env()
    original = getattr(module, "set_num_threads", None)
    if held is None or not callable(original) or getattr(original, "_sonde_held", False):
        return

    def set_num_threads(requested):
        """torch.set_num_threads, held by sonde at SONDE_TORCH_THREADS."""
        int(requested)  # the program's own errors for a bad argument stay its own
        original(held)

    set_num_threads._sonde_held = True
    module.set_num_threads = set_num_threads
    original(held)


def _patch_torch(module):
    try:
        _hold_torch_threads(module)
    finally:  # a bad SONDE_TORCH_THREADS is said by _patch; the operators are still recorded
        from . import _torch
        _torch.observe(module)
        # Once torch has run (TorchScript is importable then, not while torch imports its
        # autograd.profiler).
        profiler = sys.modules.get("torch.autograd.profiler")
        if profiler is not None:
            _record_ranges(profiler)


def _patch_distributed(module):
    from . import _torch
    _torch.patch_distributed(module)


# module -> what is done to it once it has run (or at once, when already imported).
PATCHES = {"torch": _patch_torch, "torch.distributed": _patch_distributed}


def _patch(module):
    try:
        PATCHES[module.__name__](module)
    except Exception as e:  # never break the program's import
        say(f"sonde: {module.__name__} not patched: {e}")


class _PatchOnImport:
    """Finds nothing itself: it asks the path finder for a module it watches and wraps the
    loader's exec_module, so the module is patched as soon as it has run."""

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    for name in PATCHES:
        if name in sys.modules:
            _patch(sys.modules[name])
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
