"""core.jsonread: whatever json cannot read is one ``UnreadableJsonError`` saying why; what it can
read is what json reads; a hook's own error passes through unchanged."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.jsonread import UnreadableJsonError, loads_json

DIGITS = sys.get_int_max_str_digits()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("[" * 100_000, "arrays or objects are nested too deeply to read"),
        (b'{"a": ' * 100_000, "arrays or objects are nested too deeply to read"),
        (
            "[" + "9" * 5000 + "]",
            f"a number is too long to read (5,000 digits; at most {DIGITS:,})",
        ),
        (b'{"n": -' + b"1" * 5000 + b"}", "a number is too long to read (5,000 digits"),
        (b'{"a": "\xff"}', "not UTF-8 text (bad byte at offset 7)"),
        (b'"\xed\xa0\x80"', "not UTF-8 text (bad byte at offset 1)"),  # an encoded half surrogate
        ('{"a": 1}'.encode("utf-16"), "not UTF-8 text (bad byte at offset 0)"),
        ('{\n  "a": oops}', "not valid JSON at line 2 column 8: Expecting value"),
        (b"", "not valid JSON at line 1 column 1: Expecting value"),
        ("\ufeff{}", "not valid JSON at line 1 column 1: Unexpected UTF-8 BOM"),
    ],
)
def test_each_way_json_cannot_read_is_one_error_saying_why(data: bytes | str, problem: str) -> None:
    with pytest.raises(UnreadableJsonError) as refused:
        loads_json(data)
    assert str(refused.value).startswith(problem)
    assert isinstance(refused.value, ValueError)  # callers that catch ValueError still do


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ('{"trad', "not valid JSON at line 1 column 2: Unterminated string starting"),
        ('{"mode": "a\x01"}', "not valid JSON at line 1 column 12: Invalid control character"),
    ],
)
def test_a_reason_json_ends_with_at_is_not_left_cut_off(data: str, problem: str) -> None:
    """json's own message goes on with the position ("Invalid control character at: line 1
    column 12"); the position comes first here, and the reason read as cut off mid-sentence."""
    with pytest.raises(UnreadableJsonError) as refused:
        loads_json(data)
    assert str(refused.value) == problem


def test_bytes_are_utf8_with_an_editors_bom_skipped() -> None:
    assert loads_json('\ufeff{"a": "é"}'.encode()) == {"a": "é"}


def test_a_number_of_as_many_digits_as_python_reads_is_read_one_more_is_refused() -> None:
    assert loads_json(b"[-" + b"9" * DIGITS + b"]") == [-int("9" * DIGITS)]
    with pytest.raises(UnreadableJsonError, match=f"too long to read \\({DIGITS + 1:,} digits"):
        loads_json(b"[-" + b"9" * (DIGITS + 1) + b"]")


def test_nan_and_infinity_are_floats_unless_the_caller_refuses_them() -> None:
    read = loads_json(b"[NaN, Infinity, -Infinity]")
    assert repr(read) == "[nan, inf, -inf]"

    class CallerError(ValueError):
        pass

    def no_constants(name: str) -> Any:
        raise CallerError(f"{name} is not a number JSON allows")

    with pytest.raises(CallerError, match="NaN is not a number"):
        loads_json('{"a": NaN}', parse_constant=no_constants)


def test_a_hooks_own_error_passes_through_unchanged() -> None:
    """A plain ValueError from a hook is the caller's, not mistaken for a number too long."""

    def refuse(pairs: list[tuple[str, Any]]) -> Any:
        raise ValueError("the hook's own reason")

    with pytest.raises(ValueError) as raised:
        loads_json('{"a": 1}', object_pairs_hook=refuse)
    assert type(raised.value) is ValueError and str(raised.value) == "the hook's own reason"
    assert loads_json('{"a": 1, "a": 2}', object_pairs_hook=list) == [("a", 1), ("a", 2)]


_JSONISH = st.text(alphabet='[]{}",:0123456789-.eE tnrufalsNIiy\\\n', max_size=60)


@settings(max_examples=examples(500), deadline=None)
@given(text=_JSONISH | st.text(max_size=40))
@example(text="[" * 100_000)
@example(text="-" + "1" * 5000)
@example(text="[1e999, NaN, -0.0]")
def test_text_reads_as_json_reads_it_or_is_refused_with_the_error(text: str) -> None:
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, or json's own two limits
        with pytest.raises(UnreadableJsonError):
            loads_json(text)
    else:
        assert json.dumps(loads_json(text)) == json.dumps(expected)  # NaN equal to NaN


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=60) | _JSONISH.map(str.encode))
@example(data=b"\xef\xbb\xbf[1]")
def test_bytes_read_as_their_utf8_text_or_are_refused_with_the_error(data: bytes) -> None:
    try:
        expected = json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
        with pytest.raises(UnreadableJsonError):
            loads_json(data)
    else:
        assert json.dumps(loads_json(data)) == json.dumps(expected)
