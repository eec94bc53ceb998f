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


class _NotAccepted(Exception):
    """What a declared variable accepts, for a value it does not."""


def _parse(name, raw):
    kind, default, low, high, zero_ok = SPECS[name]
    text = raw if raw else default
    if kind == "bool":
        if text in _TRUE:
            return True
        if text in _FALSE or text == "":
            return False
        raise _NotAccepted("not a boolean (1/0, yes/no, true/false, on/off)")
    if kind in ("uint", "seconds"):
        number = _number(kind, text)
        if number is None or number != number or \
                (number == 0 and not zero_ok) or (number != 0 and not low <= number <= high):
            raise _NotAccepted(f"not a number from {_range(kind, low, high, zero_ok)}")
        return number
    return text


def read(name, environ=None):
    """NAME's value by its declared type (bool, int, float or str), its default where unset;
    ValueError naming NAME, the value and what it accepts, for any other value."""
    raw = (os.environ if environ is None else environ).get(name, "")
    try:
        return _parse(name, raw)
    except _NotAccepted as e:
        raise ValueError(f"{name}={raw!r} is {e}") from None


def not_accepted(name, value):
    """What NAME accepts where it would not take VALUE (for a message naming the option that
    sets it), else None."""
    try:
        _parse(name, value)
        return None
    except _NotAccepted as e:
        return str(e)
