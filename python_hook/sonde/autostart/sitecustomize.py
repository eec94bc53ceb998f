# sonde's sitecustomize: every interpreter a `python3 -m sonde` run starts reads this file, a
# Python 2 helper a job runs too, which printed "'import sitecustomize' failed" on a stderr its
# parent may read (a red-team find): so this part is Python 2 as well, and the body,
# _sonde_autostart.py (Python 3 only: what it does is said there), runs in this module's own
# namespace, as if written here, from its cached bytecode.
import sys

if sys.version_info[0] >= 3:
    import os
    from importlib.machinery import SourceFileLoader

    _body = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sonde_autostart.py")
    exec(SourceFileLoader("sitecustomize", _body).get_code("sitecustomize"))
