"""The API's typed bodies. Journal lines and fills are the journal's own records
(``state.records.DecisionRecord`` / ``TradeRow``), so the API and the files cannot drift apart.

A figure the API cannot know is ``null`` and its reason is under ``unavailable`` (as in the
snapshot): never an invented number.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from api.cost import CostBody
from state.json_checks import first_unencodable
from state.memory_history import MemoryVersion
from state.records import DecisionRecord, TradeRow
from state.trading import REASON_MAX_CHARS, halt_reason_problem


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorBody(_Body):
    detail: str


class ValidationIssue(BaseModel):
    """One of FastAPI's validation errors (with ``input``, ``ctx`` and the like besides)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    loc: list[str | int]
    msg: str
    type: str


class InvalidBody(_Body):
    """A 422: the route's own reason, or the body's validation errors (a list)."""

    detail: str | list[ValidationIssue]


#: a 413 of a route with a JSON body (``api.bodylimit``)
TOO_LARGE_BODY: dict[str, object] = {
    "model": ErrorBody,
    "description": "the body is over 1 MiB (api.bodylimit.MAX_BODY_BYTES)",
}
#: a 400 of a route with a JSON body (FastAPI's: the parser refused the bytes)
UNREADABLE_BODY: dict[str, object] = {
    "model": ErrorBody,
    "description": "the body is not JSON that can be read (not UTF-8, nested too deep, a number "
    "of thousands of digits)",
}


class LoopBody(_Body):
    name: str
    state: str
    restarts: int
    last_error: str | None = None


class StreamBody(_Body):
    ticker: str
    timeframe: str
    last_update_at_ms: int | None  # the feed's event time of the newest tick
    age_secs: float | None  # on the daemon's clock (simulated seconds against the simulator)


class AgentBody(_Body):
    enabled: bool
    disabled_reason: str = ""
    breaker: str
    budget_limit_usd: float | None
    budget_left_today_usd: float | None  # null: no budget configured
    budget_exhausted: bool
    calls: int
    failed_calls: int
    input_tokens: int
    output_tokens: int
    cost_total_usd: float
    cost_today_usd: float


class GateBody(_Body):
    """The adaptive gate's counts since the daemon started."""

    evaluations: int
    passes: int
    passes_by_layer: dict[str, int]  # candle_close, agent_timer, anomaly, wake_condition
    last_pass_at_ms: int | None
    last_wake_reasons: list[str]


class TradingBody(_Body):
    state: str | None  # active / halted; null when this build has no trading state
    reason: str | None = None
    changed_at_ms: int | None = None


class LastDecisionBody(_Body):
    decision_id: str
    at_ms: int
    decided_by: str | None
    decider_reason: str | None
    trigger: list[str]
    error: str | None = None


class StatusBody(_Body):
    source: Literal["daemon", "state_dir"]  # a running daemon, or `vigil serve` on its files
    now_ms: int  # the daemon's clock (simulated time against the simulator), else wall time
    heartbeat_age_secs: float | None  # real seconds since the heartbeat file was written
    loops: list[LoopBody] | None
    streams: list[StreamBody] | None
    trading: TradingBody
    agent: AgentBody | None
    gate: GateBody | None = None
    equity_usd: float | None
    open_positions: int | None
    last_decision: LastDecisionBody | None
    #: model calls, tokens and dollars today, per day and per model, from the journal
    cost: CostBody | None = None
    unavailable: dict[str, str] = Field(default_factory=dict)


class PositionBody(_Body):
    ticker: str
    quantity: float
    entry_price: float
    mark_price: float | None
    notional_usd: float
    unrealised_pnl_usd: float | None
    unrealised_pnl_pct: float | None
    opened_at_ms: int


class AccountBody(_Body):
    equity_usd: float | None
    cash_usd: float | None
    starting_cash_usd: float | None
    positions: list[PositionBody]
    unavailable: dict[str, str] = Field(default_factory=dict)


class DecisionsPage(_Body):
    decisions: list[DecisionRecord]
    next_since: int | None  # pass as ``since`` for the next page; null: nothing newer yet
    segments_read: int


class TradesPage(_Body):
    trades: list[TradeRow]


class MemoryBody(_Body):
    agent_memory: str
    notes: str
    agent_memory_max_chars: int
    history: list[MemoryVersion]
    insights: list[dict[str, object]] | None
    unavailable: dict[str, str] = Field(default_factory=dict)


def _encodable(text: str) -> str:
    """A body's JSON may escape half of a surrogate pair; json reads it as a str UTF-8 cannot
    encode. Let through (a plain ``str`` field does), writing the file failed: a 500."""
    found = first_unencodable(text)
    if found is not None:
        raise ValueError(f"holds {found[1]!r}, half of a surrogate pair")
    return text


#: text a person sends that vigil stores in a file
StoredText = Annotated[str, AfterValidator(_encodable)]


class NotesBase(_Body):
    """The texts an edit started from, as the editor loaded them (``GET /api/memory``)."""

    agent_memory: StoredText | None = None
    notes: StoredText | None = None


class NotesEdit(_Body):
    """``PUT /api/memory/notes``: the person-editable fields of runner_state.json (either or both).

    ``based_on`` (optional) holds the texts the edit started from: where a field given in the edit
    is stored otherwise now (a decision rewrote the agent's memory, another editor saved), the
    edit is refused with a 409 and nothing is saved, where it replaced what the editor never saw.
    """

    agent_memory: StoredText | None = None
    notes: StoredText | None = None
    based_on: NotesBase | None = None


class NotesEditResult(_Body):
    accepted: bool
    changed: list[str]
    merged_by_daemon: bool  # the running daemon merged it now (else: on its next start)
    detail: str


def _halt_reason(text: str) -> str:
    """The CLI's check (``state.trading``): one line of the log and the status line (a line break
    wrote lines that read like the daemon's own), and a reason a person can read."""
    problem = halt_reason_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


class HaltRequest(_Body):
    # the state's own cap, which the CLI and a file edit use too (the API's own 500 refused
    # reasons the other ways in took); said here too for the schema's maxLength
    reason: Annotated[str, AfterValidator(_halt_reason)] = Field(
        "halted from the API", max_length=REASON_MAX_CHARS
    )


__all__ = [
    "TOO_LARGE_BODY",
    "UNREADABLE_BODY",
    "AccountBody",
    "AgentBody",
    "DecisionsPage",
    "ErrorBody",
    "GateBody",
    "HaltRequest",
    "InvalidBody",
    "LastDecisionBody",
    "LoopBody",
    "MemoryBody",
    "NotesEdit",
    "NotesEditResult",
    "PositionBody",
    "StatusBody",
    "StreamBody",
    "TradesPage",
    "TradingBody",
    "ValidationIssue",
]
