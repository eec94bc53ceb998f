"""Imported by torch_spawn_import.py's ranks: the second process to import it spends 0.4 s of CPU
here (the first leaves a marker in SLOW_IMPORT_MARKER's folder), as a rank importing torch on a
loaded machine does."""
import os
import time

_marker = os.environ["SLOW_IMPORT_MARKER"]
try:
    os.close(os.open(_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
except FileExistsError:
    _end = time.thread_time() + 0.4
    while time.thread_time() < _end:
        sum(range(1000))
