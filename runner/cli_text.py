"""Free-text command-line arguments must be text: a byte that is not UTF-8 is a usage error.

Python hands such a byte over as a lone surrogate (``\\udcff``), which no file, journal or
database vigil writes can store: unchecked, ``vigil trading halt --reason $'\\xff'`` and
``vigil memory add`` failed with a traceback. Paths stay as they are (a file name may be bytes).
A halt reason is also one line of a log (``state.line_text``) and at most as long as the state
file keeps one: unchecked, a line break in it forged lines in ``logs/vigil.log``, and a reason over
the length was a pydantic traceback.
"""

from __future__ import annotations

import argparse
import math

from state.json_checks import first_unencodable
from state.line_text import line_text_problem
from state.trading import REASON_MAX_CHARS


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


def halt_reason(value: str) -> str:
    """An argparse ``type`` for ``--reason``: UTF-8 text of one line, at most
    ``REASON_MAX_CHARS`` characters, unchanged; else a clear refusal."""
    text = utf8_text(value)
    problem = line_text_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    if len(text) > REASON_MAX_CHARS:
        raise argparse.ArgumentTypeError(
            f"{len(text):,} characters; a reason is at most {REASON_MAX_CHARS:,}"
        )
    return text


def port_number(value: str) -> int:
    """An argparse ``type`` for a TCP port: 0 (any free one) to 65535; else a clear refusal
    (unchecked, ``vigil sim --port 70000`` was a traceback from ``bind``)."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535)")
    return port


def seconds_limit(value: str) -> float:
    """An argparse ``type`` for a limit in seconds: finite and not negative; else a clear refusal
    (unchecked, ``vigil health --stale-secs nan`` called a long-dead daemon healthy: no age is
    over nan). 0 is a limit every heartbeat is over: a way to see a daemon's check fail."""
    try:
        secs = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not (math.isfinite(secs) and secs >= 0):
        raise argparse.ArgumentTypeError(f"{value} is not a number of seconds, 0 or more")
    return secs


def _shown(char: str) -> str:
    """The byte Python stood a surrogate in for (``surrogateescape``), else the surrogate."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"byte 0x{code - 0xDC00:02x}"
    return f"half a surrogate pair (U+{code:04X})"
