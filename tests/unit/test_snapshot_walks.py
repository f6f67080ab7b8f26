"""The decision path's walks over a snapshot and its journal line, rewritten to check leaves in
their parent's loop (and ``rounded`` to remember rounded floats), answer exactly as the
one-call-per-node definitions they replace, kept as the reference (``snapshot_walks_support``):
the same values of the same types, zeros with their signs, the same errors, on hostile nested
inputs as well as JSON.
The journal line a vouched snapshot gives is checked in ``test_snapshot_walks_journal_line``."""

from __future__ import annotations

import math
import struct
import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from snapshot_walks_support import (
    Model,
    outcome,
    reference_compact,
    reference_is_plain,
    reference_rounded,
    same,
)

from agent import snapshot_walks
from agent.snapshot_finite import non_finite
from agent.snapshot_walks import (
    FLOAT_DECIMALS,
    FLOAT_SPEC,
    compact,
    compact_reusing,
    rounded_and_compact,
)
from agent.snapshot_walks import rounded as _rounded
from state.journal import _is_plain


class _Float(float):
    pass


class _Int(int):
    pass


class _Str(str):
    pass


# --- the definitions the fast walks replace -----------------------------------------------------


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
    st.just(Model()),
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


def _same_outcome(walk: Any, reference: Any, value: Any) -> bool:
    (kind, got), (want_kind, want) = outcome(walk, value), outcome(reference, value)
    return kind == want_kind and (same(got, want) if kind == "value" else got == want)


# --- properties -----------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(_values, _json))
def test_is_plain_answers_as_its_reference(value: Any) -> None:
    assert _is_plain(value) is reference_is_plain(value)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(_values, _json))
def test_rounded_answers_as_its_reference_twice(value: Any) -> None:
    # twice: the second walk reads the floats the first remembered
    assert _same_outcome(_rounded, reference_rounded, value)
    assert _same_outcome(_rounded, reference_rounded, value)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(_values, _json))
def test_compact_answers_as_its_reference_twice(value: Any) -> None:
    # twice: the second walk reads the floats the first remembered
    assert _same_outcome(compact, reference_compact, value)
    assert _same_outcome(compact, reference_compact, value)


def _both_references(value: Any) -> tuple[Any, Any]:
    done = reference_rounded(value)
    return done, reference_compact(done)


@settings(max_examples=examples(400), deadline=None)
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


@settings(max_examples=examples(400), deadline=None)
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
    assert same(compact_reusing(value, base, compact(base)), reference_compact(value))
    assert same(compact_reusing(base, base, compact(base)), reference_compact(base))


@settings(max_examples=examples(500), deadline=None)
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


@settings(max_examples=examples(3000), deadline=None)
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


@settings(max_examples=examples(300), deadline=None)
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
        {"a": Model()},
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
