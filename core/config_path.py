"""A path a person sets (a config file, the state dir, a data dir): never an empty one.

``Path("")`` is ``Path(".")``: an empty ``VIGIL_STATE_DIR``, ``state_dir = ""`` in the TOML or
``--out ""`` quietly meant the working directory, so a daemon wrote its state wherever it was
started, and ``vigil data fetch --out ""`` filled it with recordings. Unset is how to ask for the
default; an empty value is refused with that said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator

from core.errors import RefuseToStartError

#: what an empty path is told, on the command line as in the settings
EMPTY_PATH = "an empty path (write '.' for the working directory)"


def refuse_empty_path(value: object) -> object:
    """``value`` unchanged unless it is a string of nothing but whitespace."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{EMPTY_PATH}; unset the setting for its default")
    return value


#: a ``Path`` setting that refuses an empty (or blank) string from any source
ConfigPath = Annotated[Path, BeforeValidator(refuse_empty_path)]


def require_folder(folder: Path, named: str) -> None:
    """``RefuseToStartError`` naming ``folder`` (``named``: what the person set) unless it is a
    folder; a file there is said to be one, not to be missing."""
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise RefuseToStartError(f"{named} {folder} {why}")
