"""The command that runs one of vigil's own modules in a child process.

``-P`` (Python 3.11's safe path) keeps the working directory off the child's ``sys.path``. Without
it a folder there named like one of vigil's packages (a state dir called ``state``, with its
``outbox/``) became a namespace package ahead of vigil's own under an editable install, whose
finder is asked only after the path: every replay the API started from that folder failed on
``cannot import name 'Outbox' from 'state.outbox'``.
"""

from __future__ import annotations

import sys


def own_module(module: str) -> list[str]:
    """``python -P -m module`` with this interpreter; append the module's arguments."""
    return [sys.executable, "-P", "-m", module]


__all__ = ["own_module"]
