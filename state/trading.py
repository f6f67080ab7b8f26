"""``TradingState``: whether the daemon may open positions, as stored in ``runner_state.json``.

ACTIVE: trading as usual. HALTED (with a reason): no new entries until a person resumes trading;
exits and stops still run. The field is person-editable (``vigil trading resume`` or an editor), so it
lives with the state file; ``broker.trading_state.TradingSwitch`` is what the daemon acts through.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from state.line_text import as_one_line, line_text_problem

ACTIVE: Literal["active"] = "active"
HALTED: Literal["halted"] = "halted"
#: the longest reason stored, and so the longest one the CLI, the API and a file edit take
REASON_MAX_CHARS: Final = 2000


def halt_reason_problem(reason: str) -> str | None:
    """Why ``reason`` cannot be a person's reason for a halt (``vigil trading halt --reason``,
    ``POST /api/trading/halt``), for that person; None when it can. One check for both ways in.

    It is one line of the log and the status line (``state.line_text``), at most what the state
    file keeps, and has a character to read: an empty or blank one was stored, and the status
    showed ``HALTED ... by cli:`` and nothing, or "no reason given", for a halt someone did give."""
    problem = line_text_problem(reason)
    if problem is not None:
        return problem
    if len(reason) > REASON_MAX_CHARS:
        return f"{len(reason):,} characters; a reason is at most {REASON_MAX_CHARS:,}"
    if not any(char.isprintable() and not char.isspace() for char in reason):
        return "is empty or only spaces: a halt needs a reason a person can read"
    return None


class TradingState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    mode: Literal["active", "halted"] = ACTIVE
    reason: Annotated[str, Field(max_length=REASON_MAX_CHARS)] = ""
    since_ms: Annotated[int, Field(ge=0)] = 0
    #: who changed it last: "daemon", "cli" or "state edit"
    by: Annotated[str, Field(max_length=200)] = ""

    @property
    def halted(self) -> bool:
        return self.mode == HALTED

    def describe(self) -> str:
        """One line for a person: ``active`` or ``HALTED since <time> by <who>: <reason>``."""
        if not self.halted:
            return ACTIVE
        since = f" since {_when(self.since_ms)}" if self.since_ms else ""
        by = f" by {self.by}" if self.by else ""
        # escaped: a reason already in the file is loaded as it is, and its ESC drove the
        # terminal of `vigil trading status` and of a person tailing the log
        return as_one_line(f"HALTED{since}{by}: {self.reason or 'no reason given'}")


def _when(ms: int) -> str:
    """``ms`` as a UTC time, or as it is when no calendar holds it (a hand edit of ``since_ms``
    past year 9999: ``datetime`` raised, and `vigil trading status`, a start and the daemon's
    journaling of the edit each ended in a traceback)."""
    try:
        return f"{datetime.fromtimestamp(ms / 1000, tz=UTC):%Y-%m-%d %H:%M:%S}Z"
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms (no calendar date)"
