"""Named crash points for the restart-safety tests.

A test arms points by name (``VIGIL_FAILPOINTS='["after_fill"]'``); the first time the daemon reaches
an armed point it kills itself with SIGKILL: no cleanup, no flush, exactly like a power cut there.
Nothing is armed by default, and an unarmed point costs one set lookup.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterable

from core.errors import RefuseToStartError

log = logging.getLogger(__name__)

#: where the daemon can be cut; tests name them, so they are part of the contract
KNOWN = frozenset(
    {
        "after_orders_sent",  # the broker has the orders (and persisted them); not journaled yet
        "after_decision_journaled",  # the decision line is written; state not yet saved
        "after_fill",  # a fill is journaled in trades.csv
        "after_exit_fill",  # an exit's SELL filled (its trades.csv row written); exit not recorded
        "after_exit_outboxed",  # the exit is in the outbox; the learner has not taken it yet
        "after_exit_recorded",  # the learner took the exit; the position is still tracked
        "after_exit",  # an exit is published (learner updated)
        "journal_mid_rotation",  # the live journal is renamed to its segment; no new live file yet
        "journal_mid_compression",  # a segment's .gz.tmp is written; not renamed to .gz yet
        "journal_after_compression",  # the segment's .gz is in place; the plain one not deleted
    }
)


class Failpoints:
    def __init__(self, armed: Iterable[str] = ()) -> None:
        self._armed = frozenset(armed)
        unknown = self._armed - KNOWN
        if unknown:
            raise RefuseToStartError(
                f"unknown failpoints {sorted(unknown)}; known: {sorted(KNOWN)}"
            )
        if self._armed:
            log.warning("failpoints armed (tests only): %s", ", ".join(sorted(self._armed)))

    def hit(self, name: str) -> None:
        if name in self._armed:
            log.warning("failpoint %s reached: killing the process", name)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
