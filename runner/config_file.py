"""Reading a TOML file a person hands vigil (``vigil.toml`` / ``VIGIL_CONFIG_FILE``, a sweep's
``GRID.toml``) once, refusing anything that is not a TOML file.

The settings source used to open the file itself with a plain ``open``: a FIFO there blocked start-up
until someone wrote to it, and a directory, bytes that are not UTF-8 or an integer of over 4,300
digits (tomllib's own limit) escaped as tracebacks. The file is now read here, without blocking and
regular files only (``core.regular_file``), and the settings are built from what was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.errors import RefuseToStartError
from state.toml_file import UnreadableTomlError, read_toml


def read_toml_file(path: Path, what: str, *, max_bytes: int | None = None) -> dict[str, Any]:
    """The file's tables, or ``RefuseToStartError`` naming it as ``what`` ("config file") and
    saying why it cannot be used (``state.toml_file``); ``max_bytes``: the most it may hold."""
    try:
        return read_toml(path, what, max_bytes=max_bytes)
    except UnreadableTomlError as exc:
        raise RefuseToStartError(str(exc)) from None


def refuse_names_spelt_twice(tables: dict[str, Any], path: Path, where: str = "") -> None:
    """Setting names ignore case, so ``[market]`` and ``[MARKET]`` in one file are one table
    written twice: the first one won, unseen. ``RefuseToStartError`` naming them, as for the
    environment."""
    seen: dict[str, str] = {}
    for name, value in tables.items():
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise RefuseToStartError(
                f"{path}: {where + other!r} and {where + name!r} are one setting spelt two ways "
                "(setting names ignore case); write it once"
            )
        if isinstance(value, dict):
            refuse_names_spelt_twice(value, path, f"{where}{name}.")
