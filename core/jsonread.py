"""``json.loads`` whose every refusal is one typed error with a reason a person can act on.

Besides ``JSONDecodeError`` (bad syntax), json refuses text in two ways of its own: a number of
more than ``sys.get_int_max_str_digits()`` digits (4300 by default) is a plain ``ValueError``, and
arrays or objects nested past the stack a ``RecursionError``. Each file reader that caught only
``JSONDecodeError`` let those through as a traceback (a failed start, or an edit neither rejected
nor kept aside), and each had learned to catch them separately; this is the one place that does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from core.regular_file import read_regular_file


class UnreadableJsonError(ValueError):
    """The data is not JSON that can be read: not UTF-8, bad syntax, a number too long to read
    or nesting too deep. The message says which (and where, for syntax)."""


def loads_json(
    data: bytes | str,
    *,
    parse_constant: Callable[[str], Any] | None = None,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """``json.loads(data)``, raising ``UnreadableJsonError`` for whatever keeps it from reading.

    Bytes must be UTF-8 (a leading BOM, which some editors add, is skipped): json's own guess
    would also take UTF-16 and UTF-32 and let encoded halves of surrogate pairs through. The
    hooks are json's; an error a hook raises is its caller's and passes through unchanged.
    Without ``parse_constant``, NaN and Infinity are read as floats, as json reads them.
    """
    text = _text_of(data) if isinstance(data, bytes) else data
    try:
        return json.loads(
            text,
            parse_int=_int,
            parse_constant=parse_constant,
            object_pairs_hook=object_pairs_hook,
        )
    except json.JSONDecodeError as exc:
        # json's own message adds the position after some of its reasons ("Invalid control
        # character at"); this one says it first, and such a reason read as cut off mid-sentence
        reason = exc.msg.removesuffix(" at")
        raise UnreadableJsonError(
            f"not valid JSON at line {exc.lineno} column {exc.colno}: {reason}"
        ) from None
    except RecursionError:
        raise UnreadableJsonError("arrays or objects are nested too deeply to read") from None


def _text_of(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableJsonError(f"not UTF-8 text (bad byte at offset {exc.start})") from None


def _int(digits: str) -> int:
    """json's integer: a JSON integer literal is ASCII digits, so ``int`` refuses one only for
    its length (caught here, where it is known to be a number, not in a hook's ValueError)."""
    try:
        return int(digits)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        raise UnreadableJsonError(
            f"a number is too long to read ({len(digits.lstrip('-')):,} digits; at most {limit:,})"
        ) from None


#: a run's replay.json or report.json is kilobytes (the report's series keep 2,000 points); as
#: the API's run summaries and the report's parameters read them
JSON_OBJECT_MAX_BYTES: Final = 64 << 20


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, cannot be read, or is not an object
    (a file a run left behind, read by whoever must tell a finished run from one to redo), or
    is not a regular file of at most ``JSON_OBJECT_MAX_BYTES``: a FIFO there blocked
    ``read_bytes`` until someone wrote to it, and a sweep's resume with it, and a gigabyte (a
    crash's zeros, a person's file) was read whole into memory before it was found no JSON."""
    try:
        body = loads_json(read_regular_file(path, max_bytes=JSON_OBJECT_MAX_BYTES)[1])
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


__all__ = ["UnreadableJsonError", "loads_json", "read_json_object"]
