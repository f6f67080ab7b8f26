"""A journal read as records' fields (``JournalReader.fields``, ``exact_record``) and the report's
projection of them: the same fields, projections and refusals as the validated models give."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from report.learning import MOVED_MARK, projected_learning
from report.memory_section import projected_memory
from report.run_files import RunFolderError, projected_fields, read_journal
from state.journal import JsonlJournal
from state.records import (
    DecisionRecord,
    JournalLineError,
    JournalReader,
    JournalRecord,
    ReviewRecord,
    _shape,
    exact_record,
    parse_record,
)

#: a journal time the report reads (2025-03-03 UTC: 2010 .. 2100, core.clock)
T0_MS = 1_741_000_000_000
_INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what orjson writes
_JSON_LEAF = st.none() | st.booleans() | _INTS | st.floats(allow_nan=False) | st.text()
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
#: values near each field's type: exact ones and the look-alikes validation would convert
_NEAR: st.SearchStrategy[Any] = st.sampled_from(
    [1, 0, True, 1.0, "1", "d", "", None, [], ["a"], [1], [{}], [{"a": 1}], [None], {}, {"k": 1}]
)
_FIELDS = [
    *DecisionRecord.model_fields,
    *ReviewRecord.model_fields,
    "kind",
    "detail",
    "extra",
    "attempts",
    "_private",
]


@st.composite
def _lines(draw: st.DrawFn) -> dict[str, Any]:
    """Decoded lines: a writer's decision, review, failure or other line, then some fields
    replaced by near values, dropped, or added."""
    kind = draw(st.sampled_from(["decision", "review", "agent_failure", "other", None, 3]))
    raw: dict[str, Any] = {"decision_id": "d1-1", "at_ms": 5, "trigger": ["gate:x"], "kind": "k"}
    raw |= {"tickers": ["BTC/USDT"], "decided_by": "fallback", "detail": ""}
    if kind is not None:
        raw["type"] = kind
    for name in draw(st.lists(st.sampled_from(_FIELDS), max_size=4)):
        raw[name] = draw(_NEAR | _JSON)
    for name in draw(st.lists(st.sampled_from(sorted(raw)), max_size=2)):
        raw.pop(name, None)
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(raw))  # what a journal line decodes to
    return decoded


def _field_values(record: JournalRecord) -> dict[str, Any]:
    return {**dict(record), **(record.model_extra or {})}


@given(_lines())
def test_an_exact_line_reads_as_the_validated_record(raw: dict[str, Any]) -> None:
    model = exact_record(raw)
    if model is None:
        return  # validated as always (the next test pins that path)
    record = parse_record(raw)
    assert type(record) is model
    for name, value in _field_values(record).items():
        given_value = raw.get(name, value)
        assert given_value == value and type(given_value) is type(value), name
    assert projected_fields(model, raw) == _projected_reference(record)


@given(_lines())
def test_every_line_projects_as_its_validated_record(raw: dict[str, Any]) -> None:
    try:
        record = parse_record(raw)
    except ValueError:
        assert exact_record(raw) is None  # a refused line is never taken as exact
        return
    model = exact_record(raw)
    fields = raw if model is not None else dict(record)
    assert projected_fields(type(record), fields) == _projected_reference(record)


@pytest.mark.parametrize(
    "changed",
    [
        {"at_ms": True},
        {"at_ms": 5.0},
        {"decision_id": 1},
        {"trigger": "gate:x"},
        {"trigger": ["gate:x", 1]},
        {"accepted": [None]},
        {"snapshot": []},
        {"cancelled": [1]},
        {"prompt": "p"},
        {"type": "review"},
    ],
)
def test_a_value_validation_would_convert_or_refuse_is_not_exact(changed: dict[str, Any]) -> None:
    raw = {"type": "decision", "decision_id": "d", "at_ms": 1, "trigger": ["gate:x"]}
    assert exact_record(raw) is DecisionRecord
    assert exact_record(raw | changed) is None


def test_written_lines_are_read_without_their_models(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    decision = DecisionRecord(
        decision_id="d1-1",
        at_ms=T0_MS,
        trigger=["gate:x"],
        snapshot={"portfolio_value": 10.0, "tickers": {"BTC/USDT": {"price": 2.0}}},
        raw_decision={"attempts": [{"model": "m"}], "decisions": []},
        usage={"cost_usd": 0.1},
    )
    review = ReviewRecord(at_ms=T0_MS + 1, tickers=["BTC/USDT"], decided_by="claude")
    with JsonlJournal(path, fsync=False) as journal:
        journal.append(decision.as_line())
        journal.append(review.as_line())
        journal.append({"type": "trading_state", "at_ms": T0_MS + 3, "state": "HALTED"})
    fields = list(JournalReader(path).fields())
    assert [model for model, _ in fields] == [type(r) for r in JournalReader(path)]
    with path.open("rb") as lines:
        decoded = [orjson.loads(line) for line in lines]
    assert [raw for _, raw in fields] == decoded
    assert all(exact_record(raw) is not None for raw in decoded)  # no model was built
    assert read_journal(path)[0] == [_projected_reference(r) for r in JournalReader(path)]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"type":"decision","at_ms":1}\n', "not a journal record"),
        (b'{"type":"decision","decision_id":"d","at_ms":"x","trigger":[]}\n', "not a journal"),
    ],
)
def test_a_bad_line_is_refused_as_the_models_refuse_it(
    tmp_path: Path, line: bytes, why: str
) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"type":"review","at_ms":1,"tickers":[],"decided_by":"c"}\n\n' + line)
    with pytest.raises(JournalLineError) as by_models:
        list(JournalReader(path))
    with pytest.raises(JournalLineError) as by_fields:
        list(JournalReader(path).fields())
    assert str(by_fields.value) == str(by_models.value)
    assert f"decisions.jsonl line 3: {why}" in str(by_fields.value)
    with pytest.raises(RunFolderError, match=rf"decisions\.jsonl line 3: {why}"):
        read_journal(path)


def test_a_torn_last_line_is_skipped_and_measured_by_fields(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_bytes(b'{"type":"decision","decision_id":"d","at_ms":1,"trigger":[]}\n{"type":"dec')
    reader = JournalReader(path)
    assert len(list(reader.fields())) == 1 and reader.torn_bytes == len(b'{"type":"dec')


def _projected_reference(record: JournalRecord) -> dict[str, Any]:
    """The report's projection as it read the validated models (before ``projected_fields``)."""
    kept: dict[str, Any] = {"type": record.type}
    if record.at_ms is not None:
        kept["at_ms"] = record.at_ms
    if isinstance(record, ReviewRecord):
        kept.update(usage=record.usage, attempts=record.attempts)
    if not isinstance(record, DecisionRecord):
        return kept
    kept.update(
        decided_by=record.decided_by,
        decider_reason=record.decider_reason,
        trigger=record.trigger,
        usage=record.usage,
        attempts=record.attempts,
    )
    kept["learning"] = projected_learning(
        {"snapshot": record.snapshot, "raw_decision": record.raw_decision}
    )
    kept["memory"] = projected_memory(
        {
            "snapshot": record.snapshot,
            "raw_decision": record.raw_decision,
            "decision_id": record.decision_id,
            "at_ms": record.at_ms,
        }
    )
    snapshot = record.snapshot
    if snapshot is not None:
        tickers = snapshot.get("tickers")
        kept["snapshot"] = {
            "portfolio_value": snapshot.get("portfolio_value"),
            "open_positions": bool(snapshot.get("open_positions")),
            "tickers": {
                ticker: {"price": view.get("price")}
                for ticker, view in (tickers.items() if isinstance(tickers, dict) else ())
                if isinstance(view, dict)
            },
        }
    return kept


@pytest.mark.parametrize(
    "annotation",
    [float, bool, list[int], dict[str, int], list[dict[str, int]], Literal["x"], int | float],
)
def test_a_field_without_an_exact_shape_is_refused_when_the_table_is_made(
    annotation: Any,
) -> None:
    with pytest.raises(TypeError, match="no exact shape"):
        _shape("field", annotation, required=True)


#: one strategy, not a union (a union of unions is flattened, drawing odd values most often)
_ODD = st.sampled_from([None, True, False, 0, 2, -1.5, "", "x", [], [1]])
_MEAN = st.floats(allow_nan=False) | st.integers(-3, 3) | st.booleans() | st.text(max_size=2)
_ENTRY = st.fixed_dictionaries({"mean": _MEAN}, optional={"draw": _ODD})
_SIGNALS = st.fixed_dictionaries(
    {"rsi": _ENTRY, "momentum": _ENTRY | _ODD | st.just({})}, optional={"bollinger": _ENTRY}
)
_VIEW: st.SearchStrategy[Any] = st.fixed_dictionaries({"signals": _SIGNALS}) | st.sampled_from(
    [None, {}, {"signals": None}, {"signals": []}, 1]
)
_TICKERS = st.dictionaries(st.sampled_from(["BTC/USDT", "ETH/USDT", "SOL/USDT"]), _VIEW, min_size=2)
_REASONING = st.sampled_from(
    [
        "HOLD",
        "memory rule: x0.5 (3 similar)",
        "The learner moved this decision: x",
        3,
        None,
        ["The learner moved this decision, in a list"],
    ]
)
_DECISION = st.fixed_dictionaries({"ticker": st.text(max_size=3), "reasoning": _REASONING})
_INSIGHT = st.fixed_dictionaries({"kind": st.sampled_from(["insight", "posterior"])})
_SNAPSHOT = st.fixed_dictionaries(
    {
        "ts_posteriors": st.fixed_dictionaries({"tickers": _TICKERS | _ODD}) | _ODD,
        "historical_insights": st.lists(_INSIGHT | _ODD, min_size=1, max_size=4) | _ODD,
    },
    optional={"unavailable": st.fixed_dictionaries({"historical_insights": _ODD}) | _ODD},
)
_RAW = st.fixed_dictionaries(
    {"decisions": st.lists(_DECISION | _ODD, min_size=1, max_size=3) | _ODD},
    optional={"regime_agreement": _ODD},
)


@settings(max_examples=examples(300))
@given(_SNAPSHOT | _ODD, _RAW | _ODD)
def test_learning_and_memory_projections_are_their_plain_formulas(snapshot: Any, raw: Any) -> None:
    record = {"snapshot": snapshot, "raw_decision": raw, "decision_id": "d", "at_ms": 1}
    for projection, reference in (
        (projected_learning, _learning_reference),
        (projected_memory, _memory_reference),
    ):
        try:
            expected: Any = reference(record)
        except AttributeError:  # a truthy non-dict where a mapping belongs, as ever
            with pytest.raises(AttributeError):
                projection(record)
            continue
        found = projection(record)
        assert found == expected and repr(found) == repr(expected)


def _learning_reference(record: dict[str, Any]) -> dict[str, Any]:
    """``projected_learning`` as written with comprehensions (before the plain loops)."""
    snapshot, raw = record.get("snapshot"), record.get("raw_decision")
    learned: dict[str, float] | None = None
    posteriors = snapshot.get("ts_posteriors") if isinstance(snapshot, dict) else None
    tickers = posteriors.get("tickers") if isinstance(posteriors, dict) else None
    if isinstance(snapshot, dict) and isinstance(tickers, dict):
        sums: dict[str, list[float]] = defaultdict(list)
        for view in tickers.values():
            signals = view.get("signals") if isinstance(view, dict) else None
            for name, entry in signals.items() if isinstance(signals, dict) else ():
                mean = entry.get("mean") if isinstance(entry, dict) else None
                if isinstance(mean, int | float) and 0.0 <= mean <= 1.0:  # a Beta mean
                    sums[name].append(float(mean))
        learned = {name: sum(values) / len(values) for name, values in sorted(sums.items())}
    kept: dict[str, Any] = {"learned": learned, "moved": False}
    if isinstance(raw, dict):
        kept["agreement"] = raw.get("regime_agreement")
        decisions = raw.get("decisions")
        kept["moved"] = isinstance(decisions, list) and any(
            isinstance(d, dict) and MOVED_MARK in str(d.get("reasoning", "")) for d in decisions
        )
    return kept


def _memory_reference(record: dict[str, Any]) -> dict[str, Any] | None:
    """``projected_memory``'s insight count as a generator sum (before the plain loop)."""
    found = projected_memory(record)
    snapshot = record["snapshot"]
    if found is not None:
        items = snapshot.get("historical_insights")
        found["insights"] = (
            sum(1 for item in items if isinstance(item, dict) and item.get("kind") == "insight")
            if items and isinstance(items, list)
            else None
        )
    return found
