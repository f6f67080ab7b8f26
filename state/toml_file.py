"""Reading a TOML file a person hands vigil, refusing anything that is not one with a reason.

Three files are TOML a person writes: ``vigil.toml``, a sweep's ``GRID.toml`` and an
organisation's ``policy.toml``. Each is read here, without blocking and regular files only
(``core.regular_file``): a FIFO blocked an ordinary ``open`` until someone wrote to it. tomllib
refuses text in ways beyond ``TOMLDecodeError`` (a plain ``ValueError`` for an integer of over
4,300 digits, a ``RecursionError`` for deep nesting) and reads only UTF-8 without an editor's
byte order mark; every one of these is one ``UnreadableTomlError`` saying which.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from core.regular_file import FileTooLargeError, read_regular_file

_BOM = "\ufeff"


class UnreadableTomlError(ValueError):
    """The file cannot be read as TOML; the message names it and says why."""


def read_toml(path: Path, what: str, *, max_bytes: int | None = None) -> dict[str, Any]:
    """The file's tables, or ``UnreadableTomlError`` naming it as ``what`` ("config file");
    ``max_bytes``: the most it may hold (``core.regular_file.read_regular_file``)."""
    named = f"{what} {path}"
    try:
        _, raw = read_regular_file(path, max_bytes=max_bytes)
    except FileTooLargeError as exc:
        raise UnreadableTomlError(f"{what} {exc}") from None
    except FileNotFoundError:
        raise UnreadableTomlError(f"{named} does not exist") from None
    except IsADirectoryError:  # what read_regular_file raises for anything but a regular file
        raise UnreadableTomlError(
            f"{named} is not a regular file (a directory, FIFO or device)"
        ) from None
    except OSError as exc:
        raise UnreadableTomlError(f"{named} cannot be read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableTomlError(
            f"{named} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} (save it as UTF-8)"
        ) from None
    # an editor's byte order mark is not content (tomllib refuses it as an "invalid statement")
    text = text.removeprefix(_BOM)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnreadableTomlError(f"{named} is not valid TOML: {exc}") from None
    except ValueError as exc:  # tomllib's int() of a number over 4,300 digits
        raise UnreadableTomlError(f"{named} holds a number too long: {exc}") from None
    except RecursionError:
        raise UnreadableTomlError(
            f"{named} has arrays or tables nested too deeply to read"
        ) from None
