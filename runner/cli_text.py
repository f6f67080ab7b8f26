"""Free-text command-line arguments must be text: a byte that is not UTF-8 is a usage error.

Python hands such a byte over as a lone surrogate (``\\udcff``), which no file, journal or
database vigil writes can store: unchecked, ``vigil trading halt --reason $'\\xff'`` and
``vigil memory add`` failed with a traceback. Paths stay as they are (a file name may be bytes).
A halt reason is also one line of a log (``state.line_text``) and at most as long as the state
file keeps one: unchecked, a line break in it forged lines in ``logs/vigil.log``, and a reason over
the length was a pydantic traceback.

Numbers and paths are argparse types here too, each refusing what would have been a traceback or
a silently wrong run: a count out of its range, nan or infinity, an empty path (the working
directory). A refused value is quoted cut to ``_SHOWN_CHARS``: a 5,000-digit "port" is not echoed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from core.config_path import EMPTY_PATH
from regime.labels import CryptoLabel
from runner.config import is_usdt_perpetual
from state.json_checks import first_unencodable
from state.trading import halt_reason_problem

_SHOWN_CHARS = 40
N = TypeVar("N", int, float)


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


def usdt_ticker(value: str) -> str:
    """An argparse ``type``: a USDⓈ-M perpetual as config takes them, BASE/USDT in capitals, else
    a clear refusal. ``data fetch`` names files by it (BTC was a traceback, ../../X/USDT a path
    out of --out); ``memory add --ticker BTC`` stored a lesson no decision on BTC/USDT is sent,
    and ``memory list --ticker btc`` listed nothing, both without a word."""
    if not is_usdt_perpetual(value):
        raise argparse.ArgumentTypeError(
            f"{value[:_SHOWN_CHARS]!r} is not BASE/USDT in capitals, e.g. BTC/USDT"
        )
    return value


#: the regimes a decision is made in, hence a lesson's regime (``regime.labels``)
REGIME_NAMES: tuple[str, ...] = tuple(label.value for label in CryptoLabel)


def regime_name(value: str) -> str:
    """An argparse ``type`` for ``memory --regime``: a regime a decision is made in, else a clear
    refusal listing them. ``memory add --regime bogus`` stored a lesson no decision is ever sent,
    and ``memory list --regime bogus`` listed nothing, both without a word."""
    if value not in REGIME_NAMES:
        raise argparse.ArgumentTypeError(
            f"{value[:_SHOWN_CHARS]!r} is not a regime; one of {', '.join(REGIME_NAMES)}"
        )
    return value


def halt_reason(value: str) -> str:
    """An argparse ``type`` for ``--reason``: UTF-8 text the API's halt takes too
    (``state.trading.halt_reason_problem``), unchanged; else a clear refusal."""
    text = utf8_text(value)
    problem = halt_reason_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def path_argument(value: str) -> Path:
    """An argparse ``type`` for a file or folder: ``Path(value)``, refusing an empty one, which
    ``Path`` reads as the working directory (``--out ""`` wrote a sweep or a data fetch there),
    and one that is not UTF-8."""
    if not value.strip():
        raise argparse.ArgumentTypeError(EMPTY_PATH)
    # a path goes into replay.json, reports and log lines, all UTF-8: --out 'run\xff' ran the
    # whole replay, then failed writing its report
    return Path(utf8_text(value))


def whole_number(what: str, low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of ``what`` from ``low`` to ``high`` (no top when
    None); else a clear refusal. Unchecked, each counted argument was a traceback or a silently
    wrong run at its edge (a port past 65535, ``--limit -1`` listing everything, ``--workers 0``
    waiting for ever)."""
    span = f"{low:,} to {high:,}" if high is not None else f"{low:,} or more"
    return _number_type(
        int, "a whole number", what, lambda n: n >= low and (high is None or n <= high), span
    )


def finite_number(
    what: str, low: float, *, low_allowed: bool, high: float = math.inf
) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of ``what`` above ``low`` (or at it when
    ``low_allowed``), at most ``high``; else a clear refusal. nan is refused everywhere: no value
    is over it, so a nan limit or age silently meant "never"."""

    def fits(number: float) -> bool:
        above = number >= low if low_allowed else number > low
        return math.isfinite(number) and above and number <= high

    span = f"finite, {low:g} or more" if low_allowed else f"finite, above {low:g}"
    span += f", at most {high:g}" if math.isfinite(high) else ""
    return _number_type(float, "a number", what, fits, span)


def _number_type(
    convert: Callable[[str], N], noun: str, what: str, fits: Callable[[N], bool], span: str
) -> Callable[[str], N]:
    def parse(value: str) -> N:
        shown = value if len(value) <= _SHOWN_CHARS else f"{value[:_SHOWN_CHARS]}..."
        try:
            number = convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not {noun} ({what}: {span})") from None
        if not fits(number):
            raise argparse.ArgumentTypeError(f"{shown} is out of range ({what}: {span})")
        return number

    return parse


#: a TCP port; 0 is any free one (unchecked, ``vigil sim --port 70000`` was a traceback from bind)
port_number = whole_number("port", 0, 65535)

#: a limit in seconds (``vigil health --stale-secs``): unchecked, nan called a long-dead daemon
#: healthy. 0 is a limit every heartbeat is over: a way to see a daemon's check fail.
seconds_limit = finite_number("seconds", 0.0, low_allowed=True)

#: a pause between requests (``vigil data fetch --min-interval-secs``): unchecked, inf or 1e300
#: slept for ever after the first page, and nan or a negative one was taken as no pause unsaid
pause_secs = finite_number("seconds", 0.0, low_allowed=True, high=3600.0)


def _shown(char: str) -> str:
    """The byte Python stood a surrogate in for (``surrogateescape``), else the surrogate."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"byte 0x{code - 0xDC00:02x}"
    return f"half a surrogate pair (U+{code:04X})"
