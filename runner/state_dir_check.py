"""``vigil trading`` and ``vigil serve`` refuse a state dir that does not exist.

A mistyped ``--state-dir`` (or ``VIGIL_STATE_DIR``) passed for a fresh state: ``vigil trading
halt`` made the folder and wrote a halt no daemon reads (exit 0), ``trading status`` said active,
``serve`` made the folder and served nothing. ``vigil run`` and ``replay`` make their folder on
purpose; ``prompt`` says on stderr that it shows a fresh start; ``health`` and ``status`` fail in a
line naming the missing heartbeat; ``memory`` may fill a new instance's store before its start.
"""

from __future__ import annotations

from core.errors import RefuseToStartError
from runner.config import Settings

#: commands acting on a state dir a daemon made, where a missing one can only be a mistake
STATE_DIR_COMMANDS = frozenset({"trading", "serve"})


def require_state_dir(command: str, settings: Settings) -> None:
    """Raise ``RefuseToStartError`` naming the folder when ``command`` needs it and it is missing."""
    if command in STATE_DIR_COMMANDS and not settings.state_dir.exists():
        raise RefuseToStartError(
            f"no state dir at {settings.state_dir}: is --state-dir (or VIGIL_STATE_DIR) right? "
            f"vigil {command} acts on a daemon's state dir (make the folder to prepare a new one)"
        )


__all__ = ["STATE_DIR_COMMANDS", "require_state_dir"]
