"""Framework ranges as sonde regions: torch.autograd.profiler.record_function (which
torch.profiler.record_function is, and which torch's optimizers and DataLoader open around every
step and batch) appears in the tree as a region of its name, with what runs inside beneath it.

Installed by the launcher and in the run's child interpreters. The class is patched when its
module is first imported (a finder on sys.meta_path, removed once it has done so), or at once
when it already is."""
import importlib.machinery
import sys

# module -> the context-manager class in it whose `with` blocks are regions named by `.name`.
RANGES = {"torch.autograd.profiler": "record_function"}


def _patch(module):
    from . import _sonde
    cls = getattr(module, RANGES[module.__name__], None)
    if isinstance(cls, type):
        _sonde.record_ranges(cls)


class _PatchOnImport:
    """Finds nothing itself: it asks the path finder for a module it watches and wraps the
    loader's exec_module, so the module is patched as soon as it has run."""

    def find_spec(self, name, path=None, target=None):
        if name not in RANGES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            try:
                _patch(module)
            except Exception as e:  # never break the program's import
                print(f"sonde: {name}.{RANGES[name]} not recorded as regions: {e}",
                      file=sys.stderr)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    for name in RANGES:
        if name in sys.modules:
            _patch(sys.modules[name])
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
