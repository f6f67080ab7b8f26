"""The state dir must not be a source folder: vigil's runtime files beside Python sources get
imported, committed or overwritten by an upgrade (the old default ``state`` was the package)."""

from __future__ import annotations

from pathlib import Path

from core.errors import RefuseToStartError


def refuse_package_dir(state_dir: Path) -> None:
    """Refuse a state dir that is a Python package (it holds an ``__init__.py``)."""
    if (state_dir / "__init__.py").exists():
        raise RefuseToStartError(
            f"the state dir {state_dir} is a Python package folder (it has __init__.py): vigil "
            "would write its journals and state among source files. Point --state-dir or "
            "VIGIL_STATE_DIR at a folder of its own (the default is ./vigil-state)"
        )
