"""sonde's environment variables as the Python side reads them: by their declarations
(_options.py, generated from libprof/include/sonde/options.hpp) and by the library's rules
(libprof/src/runtime/config.cpp): empty is unset, booleans are 1/yes/true/on and 0/no/false/off,
numbers are held to their declared range. One reader, so that `SONDE_PYTHON=off` means what
`SONDE_FTZ=off` means."""
import os

from ._options import SPECS

_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off")


def is_set(name, environ=None):
    """Whether NAME has a value (empty is unset, as `NAME= prog` means in a shell)."""
    return bool((os.environ if environ is None else environ).get(name, ""))


def _range(kind, low, high, zero_ok):
    unit = " seconds" if kind == "seconds" else ""
    return f"{'0 or ' if zero_ok else ''}{low:g} to {high:g}{unit}"


def _number(kind, text):
    """A whole number of digits only (as the library's from_chars), or a float; None if not."""
    if kind == "uint":
        return int(text) if text.isascii() and text.isdigit() else None
    try:
        return float(text)
    except ValueError:
        return None


def read(name, environ=None):
    """NAME's value by its declared type (bool, int, float or str), its default where unset;
    ValueError naming NAME, the value and what it accepts, for any other value."""
    kind, default, low, high, zero_ok = SPECS[name]
    raw = (os.environ if environ is None else environ).get(name, "")
    text = raw if raw else default
    if kind == "bool":
        if text in _TRUE:
            return True
        if text in _FALSE or text == "":
            return False
        raise ValueError(f"{name}={raw!r} is not a boolean (1/0, yes/no, true/false, on/off)")
    if kind in ("uint", "seconds"):
        number = _number(kind, text)
        if number is None or number != number or \
                (number == 0 and not zero_ok) or (number != 0 and not low <= number <= high):
            raise ValueError(f"{name}={raw!r} is not a number from {_range(kind, low, high, zero_ok)}")
        return number
    return text
