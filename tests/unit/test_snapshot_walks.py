"""The decision path's walks over a snapshot and its journal line, rewritten to check leaves in
their parent's loop (and ``rounded`` to remember rounded floats), answer exactly as the
one-call-per-node definitions they replace, kept here as the reference: the same values of the
same types, zeros with their signs, the same errors, on hostile nested inputs as well as JSON.
And the snapshot as sent, vouched plain (``PlainJson``), gives the journal line the walks gave."""

from __future__ import annotations

import math
import struct
import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent import snapshot_walks
from agent.routine import _typed_line
from agent.snapshot import MarketSnapshot, sent_digest
from agent.snapshot_finite import non_finite
from agent.snapshot_walks import (
    FLOAT_DECIMALS,
    FLOAT_SPEC,
    NOT_SENT,
    compact,
    compact_reusing,
    rounded_and_compact,
)
from agent.snapshot_walks import rounded as _rounded
from state.journal import PlainJson, _is_plain, encode_jsonl_record


class _Float(float):
    pass


class _Int(int):
    pass


class _Str(str):
    pass


class _Model(BaseModel):
    x: float = 1.0


# --- the definitions the fast walks replace -----------------------------------------------------


def reference_is_plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and reference_is_plain(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return all(reference_is_plain(item) for item in value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return not isinstance(value, BaseModel | Mapping)


def reference_rounded(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: reference_rounded(v) for k, v in value.items()}
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number in snapshot: {value!r}")
        return round(value, FLOAT_DECIMALS)
    if isinstance(value, Mapping):
        return {k: reference_rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reference_rounded(v) for v in value]
    return value


def reference_compact(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is not dict:
        if isinstance(value, float):
            return float(format(value, FLOAT_SPEC))
        if isinstance(value, list):
            return [reference_compact(v) for v in value]
        if not isinstance(value, dict):
            return value
    reasons = value.get("unavailable")
    explained = set(reasons) if isinstance(reasons, dict) else set()
    return {
        k: reference_compact(v)
        for k, v in value.items()
        if k not in NOT_SENT
        and not (v is None and k in explained)
        and not (k == "unavailable" and v == {})
    }


def reference_non_finite(value: Any, path: str = "") -> list[str]:
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path or 'value'}={value!r}"]
    if isinstance(value, Mapping):
        return [
            p for k, v in value.items() for p in reference_non_finite(v, f"{path}.{k}".lstrip("."))
        ]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in reference_non_finite(v, f"{path}[{i}]")]
    return []


# --- inputs ---------------------------------------------------------------------------------------

_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-9, -1e-9, 5e-9, 1.23456789012, 43210.987654321]),
    st.floats(allow_nan=True, allow_infinity=True).map(_Float),
)
_leaves = st.one_of(
    _floats,
    st.integers(),
    st.integers().map(_Int),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.text(max_size=4).map(_Str),
    st.just(_Model()),
)
_keys = st.one_of(
    st.sampled_from(["unavailable", "schema_version", "price", "rsi", "trend"]),
    st.text(max_size=3),
    st.text(max_size=3).map(_Str),
    st.integers(min_value=-2, max_value=2),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    dicts = st.dictionaries(_keys, children, max_size=5)
    return st.one_of(
        dicts,
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        dicts.map(OrderedDict),
        dicts.map(types.MappingProxyType),
    )


_values = st.recursive(_leaves, _containers, max_leaves=40)
#: the JSON shapes a dumped snapshot has, with ``unavailable`` maps naming some null fields
_json = st.recursive(
    st.one_of(_floats, st.integers(), st.booleans(), st.none(), st.text(max_size=4)),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            _keys.filter(lambda k: type(k) is str), st.one_of(st.none(), children), max_size=5
        ).flatmap(
            lambda d: st.sets(st.sampled_from(sorted(d) or ["x"])).map(
                lambda names: {**d, "unavailable": {n: "why" for n in names}} if names else d
            )
        ),
    ),
    max_leaves=40,
)


def _same(a: Any, b: Any) -> bool:
    """Equal values of the very same types; floats bit for bit (the sign of a zero counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or a is b


def _outcome(walk: Any, value: Any) -> tuple[str, Any]:
    try:
        return "value", walk(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _same_outcome(walk: Any, reference: Any, value: Any) -> bool:
    (kind, got), (want_kind, want) = _outcome(walk, value), _outcome(reference, value)
    return kind == want_kind and (_same(got, want) if kind == "value" else got == want)


# --- properties -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.one_of(_values, _json))
def test_is_plain_answers_as_its_reference(value: Any) -> None:
    assert _is_plain(value) is reference_is_plain(value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_values, _json))
def test_rounded_answers_as_its_reference_twice(value: Any) -> None:
    # twice: the second walk reads the floats the first remembered
    assert _same_outcome(_rounded, reference_rounded, value)
    assert _same_outcome(_rounded, reference_rounded, value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_values, _json))
def test_compact_answers_as_its_reference_twice(value: Any) -> None:
    # twice: the second walk reads the floats the first remembered
    assert _same_outcome(compact, reference_compact, value)
    assert _same_outcome(compact, reference_compact, value)


def _both_references(value: Any) -> tuple[Any, Any]:
    done = reference_rounded(value)
    return done, reference_compact(done)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_values, _json))
def test_rounded_and_compact_in_one_walk_answer_as_the_two_walks_twice(value: Any) -> None:
    # twice: the second walk reads the floats the first remembered
    assert _same_outcome(rounded_and_compact, _both_references, value)
    assert _same_outcome(rounded_and_compact, _both_references, value)


def _with_reasons(d: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``d`` with an ``unavailable`` map naming some of its keys, or without one."""
    return st.sets(st.sampled_from(sorted(d) or ["x"])).map(
        lambda names: {**d, "unavailable": {n: "why" for n in names}} if names else d
    )


#: a snapshot as sent, in small: finite floats, some nulls explained
_sent_value = st.recursive(
    st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(), st.text(max_size=3)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "unavailable"]), children, max_size=3),
    ),
    max_leaves=20,
)
_json_object = st.dictionaries(
    st.sampled_from(["unavailable", "schema_version", "price", "rsi", "x", "y"]),
    st.one_of(st.none(), _sent_value),
    max_size=6,
).flatmap(_with_reasons)


@settings(max_examples=400, deadline=None)
@given(
    base=_json_object,
    replaced=st.dictionaries(
        st.sampled_from(["unavailable", "schema_version", "price", "rsi", "x", "new"]),
        st.one_of(st.none(), _sent_value),
        max_size=3,
    ),
    removed=st.sets(st.sampled_from(["unavailable", "price", "rsi", "x"])),
)
def test_compact_reusing_the_base_is_compact(
    base: dict[Any, Any], replaced: dict[str, Any], removed: set[str]
) -> None:
    """A top-level copy with entries replaced (a trimmed field, new reasons), removed (the
    model's note) or added: the compact form is the one ``compact`` gives it."""
    base = reference_rounded(base)
    value = {k: v for k, v in base.items() if k not in removed} | replaced
    assert _same(compact_reusing(value, base, compact(base)), reference_compact(value))
    assert _same(compact_reusing(base, base, compact(base)), reference_compact(base))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 5e-324, 1.2345675])), max_size=8)
)
def test_compact_floats_remembered_keep_their_value_and_sign(values: list[float]) -> None:
    for value in [*values, *values]:  # the second round from the memo
        got, want = compact(value), float(format(value, FLOAT_SPEC))
        assert (
            math.isnan(got)
            if math.isnan(want)
            else struct.pack("<d", got) == struct.pack("<d", want)
        )


@st.composite
def _near_decimal_halves(draw: st.DrawFn) -> float:
    """A float within a few ulps of a half (or a whole) at ``FLOAT_DECIMALS``, up to where the
    product leaves the shortcut's range: where a rounding shortcut would slip if anywhere."""
    whole = draw(st.integers(-(2**31), 2**31))
    x = (whole + draw(st.sampled_from([0.5, 0.0, 0.4999, 0.5001, 0.499, 0.501]))) / 10.0**8
    for _ in range(draw(st.integers(0, 3))):
        x = math.nextafter(x, draw(st.sampled_from([math.inf, -math.inf])))
    return x


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        _near_decimal_halves(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.floats(-1.0, 1.0),  # draws, rates, scores
        st.floats(-1e-7, 1e-7),  # signed zeros come out
    )
)
def test_the_walks_round_a_float_as_round_does_bit_for_bit(value: float) -> None:
    """The walks round with ``scaled_round``; a decision's journal holds ``round``'s floats."""
    want = struct.pack("<d", round(value, FLOAT_DECIMALS))
    assert struct.pack("<d", snapshot_walks._rounded_float(value)) == want
    assert struct.pack("<d", rounded_and_compact(value)[0]) == want  # remembered, or not


@settings(max_examples=300, deadline=None)
@given(st.one_of(_values, _json))
def test_non_finite_names_what_its_reference_names(value: Any) -> None:
    assert non_finite(value) == reference_non_finite(value)


# --- cases a random draw may miss -------------------------------------------------------------


def test_rounded_keeps_each_zeros_sign_whichever_came_first() -> None:
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        got = [_rounded({"a": first})["a"], _rounded({"a": second})["a"]]
        assert [math.copysign(1.0, z) for z in got] == [
            math.copysign(1.0, first),
            math.copysign(1.0, second),
        ]


def test_rounded_remembers_a_bounded_number_of_floats() -> None:
    memo = snapshot_walks.ROUNDED
    memo.entries.clear()
    size = memo.size
    values = {str(i): 1.0 + i / 7.0 for i in range(size + 10)}
    want = {k: round(v, FLOAT_DECIMALS) for k, v in values.items()}
    assert _rounded(values) == want
    assert 0 < len(memo.entries) <= size
    assert _rounded(values) == want  # partly from the memo now


def test_rounded_names_a_non_finite_number_met_in_a_nested_dict() -> None:
    with pytest.raises(ValueError, match="non-finite number in snapshot: inf"):
        _rounded({"tickers": {"BTC/USDT": {"price": 1.0, "rsi": math.inf}}})


def test_is_plain_refuses_what_orjson_would_write_otherwise() -> None:
    assert _is_plain({"a": [1, 2.5, {"b": None, "c": (True, "x")}]})
    hostile: Any
    for hostile in (
        {"a": {1: 2}},
        {"a": [math.nan]},
        {"a": (0.0, {"b": -math.inf})},
        {"a": _Model()},
        {"a": types.MappingProxyType({})},
        {"a": OrderedDict()},
    ):
        assert not _is_plain(hostile), hostile


def test_compact_drops_only_explained_nulls_and_empty_reasons() -> None:
    sent: dict[str, Any] = {
        "schema_version": 1,
        "funding": None,
        "basis": None,
        "price": 43210.987654321,
        "unavailable": {"funding": "not recorded"},
        "nested": {"x": None, "unavailable": {}},
    }
    assert compact(sent) == {
        "basis": None,
        "price": 43211.0,
        "unavailable": {"funding": "not recorded"},
        "nested": {"x": None},
    }


# --- the snapshot as sent goes into the journal line unwalked -----------------------------------

_finite_json = st.recursive(
    st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(), st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=3), _finite_json, max_size=5))
def test_plain_json_is_written_as_the_dict_it_holds(snapshot: dict[str, Any]) -> None:
    record = {"type": "decision", "snapshot": snapshot, "at_ms": 1}
    vouched = {**record, "snapshot": PlainJson(snapshot)}
    # the same bytes, or the same refusal (an integer orjson cannot hold)
    assert _outcome(encode_jsonl_record, vouched) == _outcome(encode_jsonl_record, record)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=3), _finite_json, max_size=5), st.text(max_size=3))
def test_plain_json_with_its_json_is_written_as_the_dict_it_holds(
    snapshot: dict[str, Any], key: str
) -> None:
    record = {"type": "decision", "at_ms": 1, key: snapshot}
    try:
        encoded = orjson.dumps(snapshot, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return  # nothing to carry: such a value never gets its JSON made
    vouched = {**record, key: PlainJson(snapshot, encoded)}
    assert _outcome(encode_jsonl_record, vouched) == _outcome(encode_jsonl_record, record)
    nested = {**record, "nested": {"x": PlainJson(snapshot, encoded)}}  # only the top level's
    assert encode_jsonl_record(nested) == encode_jsonl_record({**record, "nested": {"x": snapshot}})


def _hostile_snapshot() -> MarketSnapshot:
    """Outside data of odd shapes (tuples, int keys, a model, tiny and huge floats): the JSON dump
    and the rounding leave only what ``PlainJson`` promises."""
    return MarketSnapshot(
        at_ms=1_000,
        tickers={},
        btc_price=90_000.123456789,
        btc_change_1h_pct=-0.0,
        btc_change_24h_pct=None,
        open_interest={"BTC/USDT": {1: (1.5, 2), "m": _Model(x=1e-12), "o": OrderedDict(a=1e300)}},
        regime=None,
        exposure_scale=1.0,
        open_positions=[],
        portfolio_value=10_000.0,
        cash=None,
        gate_wake_reasons=["test"],
        unavailable={"regime": "test", "cash": "test"},
    )


def test_a_snapshot_as_sent_is_what_plain_json_promises() -> None:
    sent = _hostile_snapshot().as_sent()
    assert reference_is_plain(sent)


def _decision_record(**fields: Any) -> dict[str, Any]:
    """A decision line's record with ``fields`` before its gate update."""
    head = {"type": "decision", "decision_id": "d1-1", "at_ms": 1_000, "trigger": ["test"]}
    return {**head, **fields, "gate_update": {"next_check_seconds": 60}}


def test_a_line_with_the_vouched_snapshot_equals_the_validated_line() -> None:
    sent = _hostile_snapshot().as_sent()
    record = _decision_record(snapshot_digest=sent_digest(sent), snapshot=sent)
    validated = _typed_line(record)
    vouched = _typed_line({**record, "snapshot": PlainJson(sent)})
    assert list(vouched) == list(validated) and vouched == validated
    assert encode_jsonl_record(vouched) == encode_jsonl_record(validated)


def test_a_line_with_the_vouched_prompt_info_equals_the_validated_line() -> None:
    from fakes.claude_support import snapshot

    from agent.prompt_assembly import PromptAssembler
    from memory.context import AssembledContext

    ctx = AssembledContext(at_ms=1, values={"notes": "a\nb"}, caps={"max_position_pct": 0.1})
    prompt = PromptAssembler(None).build(snapshot().as_sent(), ctx)
    info = prompt.info.model_dump(mode="json")
    assert reference_is_plain(info)  # what PlainJson promises, whatever the prompt held
    sent = _hostile_snapshot().as_sent()
    record = _decision_record(snapshot=sent, prompt=info)
    validated = _typed_line(record)
    vouched = _typed_line({**record, "snapshot": PlainJson(sent), "prompt": PlainJson(info)})
    assert list(vouched) == list(validated) and vouched == validated
    assert encode_jsonl_record(vouched) == encode_jsonl_record(validated)


def test_a_record_unfit_for_its_model_is_still_journaled_with_the_reason() -> None:
    sent = _hostile_snapshot().as_sent()
    record = {"decision_id": "d1-1", "at_ms": "late", "trigger": [], "snapshot": PlainJson(sent)}
    line = _typed_line(record)
    assert "at_ms" in line["record_invalid"] and line["snapshot"] == sent


def test_a_snapshots_forms_are_its_walks_made_once_and_not_copied() -> None:
    snapshot = _hostile_snapshot()
    forms = snapshot.forms()
    sent = snapshot.as_sent()
    assert _same(dict(forms.sent), reference_rounded(snapshot.model_dump(mode="json")))
    assert _same(dict(forms.compact), reference_compact(sent))
    assert forms.json == snapshot.to_json_bytes() == orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)
    assert snapshot.digest() == sent_digest(sent)
    assert snapshot.forms() is forms and forms.holds(sent)
    copied = snapshot.model_copy(update={"cash": 5.0})
    assert copied.forms() is not forms and copied.as_sent()["cash"] == 5.0


def test_forms_hold_only_the_very_entries() -> None:
    forms = _hostile_snapshot().forms()
    sent = dict(forms.sent)
    assert forms.holds(sent)
    assert not forms.holds({**sent, "open_interest": dict(sent["open_interest"])})  # equal, not it
    assert not forms.holds({k: v for k, v in sent.items() if k != "cash"})
    assert not forms.holds({**sent, "extra": None})
    swapped = {**sent, "cash": sent["btc_change_24h_pct"], "btc_change_24h_pct": sent["cash"]}
    assert swapped == sent  # both None: the same objects, the same JSON
    assert forms.holds(swapped)
