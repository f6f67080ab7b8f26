"""The typed bodies of ``/api/runs``: a replay asked for, its job's status, its report summary.

The request is the design's replay request mapped to vigil's replay options (``vigil replay``'s
flags): ``tickers`` (``--tickers``; none: every configured one), ``from`` / ``to`` (whole UTC
days, ``to`` inclusive), ``decider``, ``seed`` (the regime models' EM seed) and ``use_memory``
(``--no-memory`` when false).
"""

from __future__ import annotations

from datetime import date
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.clock import FIRST_RECORDING_DAY, LAST_RECORDING_DAY
from regime.config import SEED_MAX

RunState = Literal["queued", "running", "done", "failed"]
FINISHED: tuple[RunState, ...] = ("done", "failed")


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunRequest(_Body):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    tickers: list[str] | None = Field(
        None, min_length=1, max_length=20, description="a subset of the configured tickers"
    )
    # a day no recording can hold was queued, and failed later with the replay's own message
    from_day: date = Field(
        alias="from",
        ge=FIRST_RECORDING_DAY,
        le=LAST_RECORDING_DAY,
        description="first UTC day, e.g. 2025-03-01",
    )
    to_day: date = Field(
        alias="to",
        ge=FIRST_RECORDING_DAY,
        le=LAST_RECORDING_DAY,
        description="last UTC day, inclusive",
    )
    decider: Literal["fallback", "claude", "debate"] = "fallback"
    seed: int = Field(42, ge=0, le=SEED_MAX, description="the regime models' EM seed")
    use_memory: bool = Field(True, description="false: the agent's notes and the learner stay out")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.to_day < self.from_day:
            raise ValueError(f"'to' {self.to_day} is before 'from' {self.from_day}")
        if self.tickers is not None and len(set(self.tickers)) != len(self.tickers):
            raise ValueError(f"'tickers' names one twice: {self.tickers}")
        return self

    @property
    def days(self) -> int:
        return (self.to_day - self.from_day).days + 1


class RunAccepted(_Body):
    run_id: str
    status: RunState


class RunSummary(_Body):
    """The head figures of the run's ``report.json`` (and ``replay.json``); the full report is
    ``report.html`` / ``report.json`` in the run's folder. A NaN or Infinity figure (json reads
    them) is not a report vigil wrote: it was kept, and served as null with no reason."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    finished: bool | None  # the replay reached its ``to`` (false: stopped early)
    decisions: int
    fills: int | None
    start_equity_usd: float | None
    end_equity_usd: float | None
    total_return_pct: float | None
    max_drawdown_pct: float | None
    sharpe: float | None
    win_rate_pct: float | None
    round_trips: int | None
    fees_usd: float | None
    buy_and_hold_return_pct: dict[str, float | None]
    deciders: dict[str, int]  # decisions by decided_by
    wall_secs: float | None
    unavailable: dict[str, str] = Field(default_factory=dict)


class RunBody(_Body):
    run_id: str
    status: RunState
    request: RunRequest
    out_dir: str  # the run's folder: <state dir>/runs/<run_id>
    submitted_at_ms: int  # wall time, as every job time
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    exit_code: int | None = None
    reason: str | None = None  # why it failed (or why it is still queued)
    summary: RunSummary | None = None
    unavailable: dict[str, str] = Field(default_factory=dict)


class RunsList(_Body):
    runs: list[RunBody]  # newest first
    queued: int
    running: int
    capacity: int  # unfinished jobs accepted at once (running + waiting); more get 429


__all__ = [
    "FINISHED",
    "RunAccepted",
    "RunBody",
    "RunRequest",
    "RunState",
    "RunSummary",
    "RunsList",
]
