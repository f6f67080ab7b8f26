"""Typed journal records: what a line of ``decisions.jsonl`` and a row of ``trades.csv`` hold.

The writers (the decision routine, the tracker's review, the journal subscriptions) build these
models, and every reader (the report, ``vigil prompt``, the tests, later the API) parses lines back
into them, so the two sides cannot drift apart. Records are tolerant of fields a newer vigil adds
(``extra="allow"``): an old reader still reads a new journal. Nested payloads (the snapshot, the
agent's raw answer) stay plain JSON objects here; their own models live with their owners.
"""

from __future__ import annotations

import csv
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, get_args, get_origin

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.journal import read_csv_rows
from state.segments import open_segment, segments


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    type: str

    def as_line(self) -> dict[str, Any]:
        """The mapping the journal writes: its type and the fields the writer set."""
        return {**self.model_dump(mode="json", exclude_unset=True), "type": self.type}


class DecisionRecord(_Record):
    """One decision: trigger, snapshot as sent, the decider's answer, caps, orders, gate update."""

    type: Literal["decision"] = "decision"
    decision_id: str
    at_ms: int
    trigger: list[str]
    snapshot_digest: str | None = None
    snapshot: dict[str, Any] | None = None
    decided_by: str | None = None
    decider_reason: str | None = None
    raw_decision: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    accepted: list[dict[str, Any]] = Field(default_factory=list)
    cap_changes: list[dict[str, Any]] = Field(default_factory=list)
    cancelled: list[dict[str, Any]] | None = None
    skipped: list[dict[str, Any]] | None = None
    orders: list[dict[str, Any]] = Field(default_factory=list)
    gate_update: Any = None
    memory_saved: Any = None
    #: the assembled prompt: hash, part sizes, trims, tiers loaded (agent.prompt_assembly)
    prompt: dict[str, Any] | None = None
    context_error: str | None = None
    #: runner_state.json could not be saved after the orders went out (trading halted)
    state_error: str | None = None
    error: str | None = None

    @property
    def attempts(self) -> list[dict[str, Any]]:
        """The model calls behind the decision (in the agent's answer)."""
        return decision_attempts(self.raw_decision)


def decision_attempts(raw_decision: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A decision's model calls, read from its ``raw_decision`` (a new list; none: empty)."""
    found = raw_decision.get("attempts") if raw_decision else None
    return list(found) if isinstance(found, list) else []


class ReviewRecord(_Record):
    """One review of open positions by the tracker's agent layer."""

    type: Literal["review"] = "review"
    at_ms: int
    tickers: list[str]
    decided_by: str
    usage: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    #: the positions as the reviewer saw them (sent, or kept unchanged without a call) and the
    #: review's context: a skipped review can be re-asked offline from its line
    positions: list[dict[str, Any]] = Field(default_factory=list)
    context: dict[str, Any] | None = None


class AgentFailureRecord(_Record):
    """A failed model call (also inside its decision's ``attempts`` when a decision made it)."""

    type: Literal["agent_failure"] = "agent_failure"
    at_ms: int
    kind: str
    detail: str


class OtherRecord(_Record):
    """A line of a type this reader does not know (written by a newer vigil)."""

    type: str = ""
    at_ms: int | None = None


JournalRecord = DecisionRecord | ReviewRecord | AgentFailureRecord | OtherRecord

_BY_TYPE: Final[dict[str, type[_Record]]] = {
    "decision": DecisionRecord,
    "review": ReviewRecord,
    "agent_failure": AgentFailureRecord,
}


class JournalLineError(ValueError):
    """A journal line that is not a JSON object of its type (``number`` is 1-based)."""

    def __init__(self, path: Path, number: int, detail: str) -> None:
        super().__init__(f"{path} line {number}: {detail}")
        self.path, self.number = path, number


def parse_record(raw: dict[str, Any]) -> JournalRecord:
    """A decoded line as its typed record (``OtherRecord`` for unknown types)."""
    model = _BY_TYPE.get(str(raw.get("type", "")), OtherRecord)
    record = model.model_validate(raw)
    assert isinstance(record, DecisionRecord | ReviewRecord | AgentFailureRecord | OtherRecord)
    return record


class FieldShape(NamedTuple):
    """A field's JSON values that its model keeps exactly as they are: ``types`` (exact types;
    None: any value) and, for a list, ``items`` (the exact type of every element)."""

    name: str
    required: bool
    types: frozenset[type] | None
    items: type | None


def _shape(name: str, annotation: Any, required: bool) -> FieldShape:
    """The exact-type shape of an annotation the journal models use; anything else (a float that
    an int would become, a nested model) is refused here so that no field is taken on trust."""
    if annotation is Any or (name == "type" and get_origin(annotation) is Literal):
        # a record's ``type`` literal: the line's type chose the model (``_BY_TYPE``)
        return FieldShape(name, required, None, None)
    options = get_args(annotation) if get_origin(annotation) is types.UnionType else (annotation,)
    allowed: set[type] = set()
    items: type | None = None
    for option in options:
        origin, args = get_origin(option), get_args(option)
        if option is type(None) or option in (str, int):
            allowed.add(option)
        elif origin is dict and args == (str, Any):
            allowed.add(dict)
        elif origin is list and len(args) == 1 and (args[0] is str or get_origin(args[0]) is dict):
            if get_origin(args[0]) is dict and get_args(args[0]) != (str, Any):
                raise TypeError(f"{name}: no exact shape for {annotation!r}")
            allowed.add(list)
            items = args[0] if args[0] is str else dict
        else:
            raise TypeError(f"{name}: no exact shape for {annotation!r}")
    return FieldShape(name, required, frozenset(allowed), items)


def _shapes(model: type[_Record]) -> tuple[FieldShape, ...]:
    return tuple(
        _shape(name, field.annotation, field.is_required())
        for name, field in model.model_fields.items()
    )


_MODELS: Final[tuple[type[_Record], ...]] = (*_BY_TYPE.values(), OtherRecord)
_SHAPES: Final[dict[type[_Record], tuple[FieldShape, ...]]] = {
    model: _shapes(model) for model in _MODELS
}
_ABSENT: Final = object()


def field_shapes(model: type[_Record]) -> tuple[FieldShape, ...]:
    """``model``'s fields as exact-type shapes, in its field order (one of the journal models)."""
    return _SHAPES[model]


def exact_record(raw: dict[str, Any]) -> type[_Record] | None:
    """The record type of a decoded JSON line whose every field is already what its model would
    hold (exact types, required fields present): validating it would change and refuse nothing,
    so the line's dict can be read as the record (unset fields read as their defaults). None for
    any other line, which ``parse_record`` then validates (accepting or refusing it as always).
    For JSON-decoded dicts only: their keys are str."""
    model = _BY_TYPE.get(str(raw.get("type", "")), OtherRecord)
    for name, required, allowed, items in _SHAPES[model]:
        value = raw.get(name, _ABSENT)
        if value is _ABSENT:
            if required:
                return None
            continue
        if allowed is None:
            continue
        if type(value) not in allowed:
            return None
        if items is not None and type(value) is list:
            for item in value:
                if type(item) is not items:
                    return None
    return model


class JournalReader:
    """Streams a (possibly live or crashed) ``decisions.jsonl`` as typed records, across its
    rotated segments (``state.segments``, gzipped or not), oldest first.

    A torn last line (a crash mid-write; the daemon repairs it on open) is skipped and its length
    kept in ``torn_bytes``: a reader reports it instead of failing. Any other bad line raises
    ``JournalLineError`` naming the segment file and line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.torn_bytes = 0

    def __iter__(self) -> Iterator[JournalRecord]:
        for segment, number, line in self._lines():
            yield self._parse(segment, line, number)

    def fields(self) -> Iterator[tuple[type[_Record], dict[str, Any]]]:
        """Each record as its type and its fields, without building the model when validation
        would change nothing (``exact_record``): a line's decoded dict itself, whose unset fields
        read as the model's defaults. Any other line is validated as ``__iter__`` does (the same
        errors) and given as its model's fields and extras."""
        for segment, number, line in self._lines():
            raw = self._decode(segment, line, number)
            model = exact_record(raw)
            if model is not None:
                yield model, raw
            else:
                record = self._validate(segment, raw, number)
                yield type(record), dict(record)

    def _lines(self) -> Iterator[tuple[Path, int, bytes]]:
        # line by line: a year's journal is about a gigabyte, which need not be in memory at once
        for segment in segments(self.path):
            for number, line in enumerate(open_segment(segment), start=1):
                if not line.endswith(b"\n"):
                    self.torn_bytes = len(line)  # only the live file's last line can be torn
                    break
                if not line.strip():
                    continue
                yield segment, number, line

    @classmethod
    def _parse(cls, segment: Path, line: bytes, number: int) -> JournalRecord:
        return cls._validate(segment, cls._decode(segment, line, number), number)

    @staticmethod
    def _decode(segment: Path, line: bytes, number: int) -> dict[str, Any]:
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise JournalLineError(segment, number, f"not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise JournalLineError(segment, number, "not a JSON object")
        return raw

    @staticmethod
    def _validate(segment: Path, raw: dict[str, Any], number: int) -> JournalRecord:
        try:
            return parse_record(raw)
        except ValueError as exc:
            raise JournalLineError(segment, number, f"not a journal record: {exc}") from None


def read_journal(path: Path) -> list[JournalRecord]:
    """Every complete record of a journal (small journals and tests; large ones: JournalReader)."""
    return list(JournalReader(path))


class TradeRow(BaseModel):
    """One fill, one row of ``trades.csv``. ``fee_usd`` is empty when the fee is not known."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at_ms: int
    client_order_id: str
    ticker: str
    side: Literal["buy", "sell"]
    # the writer refuses a non-finite cell (state.journal): one read back is corrupt, not a fill
    quantity: float = Field(gt=0, allow_inf_nan=False)
    price: float = Field(gt=0, allow_inf_nan=False)
    fee_usd: float | None = Field(None, allow_inf_nan=False)
    #: true when the exchange's fee was unreadable and ``fee_usd`` is the configured rate x
    #: notional; empty in rows written before the column existed
    fee_estimated: bool | None = False

    def as_row(self) -> dict[str, Any]:
        return self.model_dump()


#: the columns of trades.csv, in order: the writer's and every reader's
TRADE_COLUMNS: Final = tuple(TradeRow.model_fields)
#: the columns before ``fee_estimated`` (``state.csv_widen`` widens such a file on start)
TRADE_COLUMNS_V1: Final = TRADE_COLUMNS[:-1]


class TradesFileError(ValueError):
    """A trades.csv row that is not a fill (``number`` is the 1-based line, header = 1)."""


def read_trades(path: Path) -> list[TradeRow]:
    """Every row of a trades.csv as ``TradeRow``, in file order. ``TradesFileError`` for a file
    that is not UTF-8 CSV or a row that is not a fill; ``OSError`` for one that cannot be opened."""
    rows: list[TradeRow] = []
    try:
        text_rows = read_csv_rows(path)
    except UnicodeDecodeError as exc:
        raise TradesFileError(f"{path} is not UTF-8 text (bad byte at {exc.start})") from None
    except csv.Error as exc:
        raise TradesFileError(f"{path} is not CSV: {exc}") from None
    for number, row in enumerate(text_rows, start=2):
        cells: dict[str, Any] = {k: (v if v != "" else None) for k, v in row.items()}
        if isinstance(cells.get("side"), str):
            cells["side"] = cells["side"].lower()
        try:
            rows.append(TradeRow.model_validate(cells))
        except ValidationError as exc:
            raise TradesFileError(f"{path} line {number}: {_first_problem(exc)}") from None
    return rows


def _first_problem(exc: ValidationError) -> str:
    """``price: Input should be a finite number ('nan')``: one line, not pydantic's page."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "row"
    return f"{where}: {error['msg']} ({str(error.get('input'))[:40]!r})"


__all__ = [
    "TRADE_COLUMNS",
    "TRADE_COLUMNS_V1",
    "AgentFailureRecord",
    "DecisionRecord",
    "FieldShape",
    "JournalLineError",
    "JournalReader",
    "JournalRecord",
    "OtherRecord",
    "ReviewRecord",
    "TradeRow",
    "TradesFileError",
    "decision_attempts",
    "exact_record",
    "field_shapes",
    "parse_record",
    "read_journal",
    "read_trades",
]
