"""``vigil trading``, ``vigil serve`` and the ``vigil memory`` commands that read refuse a state dir
that does not exist.

A mistyped ``--state-dir`` (or ``VIGIL_STATE_DIR``) passed for a fresh state: ``vigil trading
halt`` made the folder and wrote a halt no daemon reads (exit 0), ``trading status`` said active,
``serve`` made the folder and served nothing, ``memory list`` made it and an empty ``memory.db``
and listed nothing. ``vigil run`` and ``replay`` make their folder on purpose; ``prompt`` says on
stderr that it shows a fresh start; ``health`` and ``status`` fail in a line naming the missing
heartbeat; ``memory add`` and ``import`` may fill a new instance's store before its start.
"""

from __future__ import annotations

from core.errors import RefuseToStartError
from runner.config import Settings

#: commands acting on a state dir a daemon made, where a missing one can only be a mistake
STATE_DIR_COMMANDS = frozenset({"trading", "serve"})

#: ``vigil memory`` commands that read what is there (forget and a notes rollback change only what
#: is there): on a missing state dir none has anything to do
MEMORY_READ_COMMANDS = frozenset({"list", "search", "show", "forget", "export", "stats", "notes"})

#: of those, the ones that read the memory graph, which is not in the state dir with Neo4j
_GRAPH_READ_COMMANDS = MEMORY_READ_COMMANDS - {"notes"}


def require_state_dir(command: str, settings: Settings, memory_command: str | None = None) -> None:
    """Raise ``RefuseToStartError`` naming the folder when ``command`` (``memory_command`` under
    ``vigil memory``) needs it and it is missing."""
    if settings.state_dir.exists():
        return
    if command in STATE_DIR_COMMANDS:
        raise RefuseToStartError(
            f"no state dir at {settings.state_dir}: is --state-dir (or VIGIL_STATE_DIR) right? "
            f"vigil {command} acts on a daemon's state dir (make the folder to prepare a new one)"
        )
    if command == "memory" and _reads_the_state_dir(memory_command, settings):
        raise RefuseToStartError(
            f"no state dir at {settings.state_dir}: is --state-dir (or VIGIL_STATE_DIR) right? "
            f"vigil memory {memory_command} reads a state dir's memory and makes none "
            "(vigil memory add or import fill a new one)"
        )


def _reads_the_state_dir(memory_command: str | None, settings: Settings) -> bool:
    if memory_command not in MEMORY_READ_COMMANDS:
        return False
    return not (settings.memory.neo4j_uri and memory_command in _GRAPH_READ_COMMANDS)


__all__ = ["MEMORY_READ_COMMANDS", "STATE_DIR_COMMANDS", "require_state_dir"]
