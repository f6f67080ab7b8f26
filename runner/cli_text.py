"""Free-text command-line arguments must be text: a byte that is not UTF-8 is a usage error.

Python hands such a byte over as a lone surrogate (``\\udcff``), which no file, journal or
database vigil writes can store: unchecked, ``vigil trading halt --reason $'\\xff'`` and
``vigil memory add`` failed with a traceback. Paths stay as they are (a file name may be bytes).
"""

from __future__ import annotations

import argparse

from state.json_checks import first_unencodable


def utf8_text(value: str) -> str:
    """An argparse ``type``: ``value`` unchanged when it is UTF-8 text, else a clear refusal."""
    found = first_unencodable(value)
    if found is not None:
        at, run = found
        raise argparse.ArgumentTypeError(
            f"not UTF-8 text: {_shown(run[0])} at position {at} "
            "(the terminal or script sent bytes in another encoding)"
        )
    return value


def _shown(char: str) -> str:
    """The byte Python stood a surrogate in for (``surrogateescape``), else the surrogate."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"byte 0x{code - 0xDC00:02x}"
    return f"half a surrogate pair (U+{code:04X})"
