"""Reading a TOML file a person hands vigil (``vigil.toml`` / ``VIGIL_CONFIG_FILE``, a sweep's
``GRID.toml``) once, refusing anything that is not a TOML file.

The settings source used to open the file itself with a plain ``open``: a FIFO there blocked start-up
until someone wrote to it, and a directory, bytes that are not UTF-8 or an integer of over 4,300
digits (tomllib's own limit) escaped as tracebacks. The file is now read here, without blocking and
regular files only (``state.regular_file``), and the settings are built from what was read.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from core.errors import RefuseToStartError
from state.regular_file import read_regular_file

_BOM = "\ufeff"


def read_toml_file(path: Path, what: str) -> dict[str, Any]:
    """The file's tables, or ``RefuseToStartError`` naming it as ``what`` ("config file") and
    saying why it cannot be used."""
    named = f"{what} {path}"
    try:
        _, raw = read_regular_file(path)
    except FileNotFoundError:
        raise RefuseToStartError(f"{named} does not exist") from None
    except IsADirectoryError:  # what read_regular_file raises for anything but a regular file
        raise RefuseToStartError(
            f"{named} is not a regular file (a directory, FIFO or device)"
        ) from None
    except OSError as exc:
        raise RefuseToStartError(f"{named} cannot be read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RefuseToStartError(
            f"{named} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} (save it as UTF-8)"
        ) from None
    # an editor's byte order mark is not content (tomllib refuses it as an "invalid statement")
    text = text.removeprefix(_BOM)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RefuseToStartError(f"{named} is not valid TOML: {exc}") from None
    except ValueError as exc:  # tomllib's int() of a number over 4,300 digits
        raise RefuseToStartError(f"{named} holds a number too long: {exc}") from None
    except RecursionError:
        raise RefuseToStartError(
            f"{named} has arrays or tables nested too deeply to read"
        ) from None
