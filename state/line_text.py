"""Text a person gives that vigil writes into one line of a log or a listing: a trading halt's
reason, an insight added with ``vigil memory add``.

``logs/vigil.log``, the status line and ``vigil health`` print such text with ``%s``. A control
character in it (Unicode category Cc: NUL, CR, LF, ESC, NEL...) or a line or paragraph separator
(U+2028/U+2029, line breaks to ``str.splitlines`` and to some viewers) let whoever typed it end the
record early and write lines that read like the daemon's own, or drive the terminal a person tails
the log in. The JSON journals escape them, but the text log and the terminal do not.

A tab is allowed: no log reader or terminal ends a line at one, so it cannot forge a record, and a
reason pasted from a table or a script's output may well hold one.
"""

from __future__ import annotations

import re
from typing import Final

#: Cc but the tab (U+0000-U+0008, U+000A-U+001F, U+007F-U+009F), and U+2028/U+2029
_NOT_IN_A_LINE: Final = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def first_line_break(text: str) -> tuple[int, str] | None:
    """Where ``text`` first holds a character that has no place in one line of a log, and that
    character; None when it has none."""
    found = _NOT_IN_A_LINE.search(text)
    return None if found is None else (found.start(), found.group())


def line_text_problem(text: str) -> str | None:
    """Why ``text`` cannot be one line of a log, for a person; None when it can."""
    found = first_line_break(text)
    if found is None:
        return None
    at, char = found
    return (
        f"holds the control character U+{ord(char):04X} at position {at} "
        "(one line of text is needed: no line breaks, NUL or escape codes; a tab is fine)"
    )


def as_one_line(text: str) -> str:
    """``text`` with each such character written as its escape (``\\n``, ``\\x00``, ``\\u2028``):
    for text vigil did not get from a person (an error's message), which it must keep, not refuse."""
    if _NOT_IN_A_LINE.search(text) is None:
        return text
    return _NOT_IN_A_LINE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


#: DEL and C1 (U+007F-U+009F): JSON may hold them raw, and orjson writes them so
_RAW_IN_JSON: Final = re.compile("[\x7f-\x9f]")


def terminal_safe_json(text: str) -> str:
    """JSON text with DEL and U+0080..U+009F written as ``\\u`` escapes: a terminal shown it
    reads U+009B as ESC [. JSON's structure is ASCII, so they can only be inside strings, where
    the escape is the same text (orjson already escapes U+0000..U+001F)."""
    return _RAW_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


#: the same characters in UTF-8: DEL, and C1 (its lead byte 0xC2 never ends another character)
_RAW_IN_JSON_UTF8: Final = re.compile(b"\x7f|\xc2[\x80-\x9f]")


def terminal_safe_json_bytes(data: bytes) -> bytes:
    """``terminal_safe_json`` for UTF-8 JSON bytes (a journal line), without decoding them: most
    lines hold neither byte, and are returned as they are after two ``memchr`` scans."""
    if b"\x7f" not in data and b"\xc2" not in data:
        return data
    return _RAW_IN_JSON_UTF8.sub(
        lambda found: b"\\u%04x" % ord(found.group().decode("utf-8")), data
    )


def terminal_safe_lines(text: str) -> str:
    """``text`` line by line, each as ``as_one_line`` writes it: its line breaks kept, every
    other control character escaped, for several lines of a model's or a person's text printed
    to a terminal."""
    return "\n".join(as_one_line(line) for line in text.split("\n"))
