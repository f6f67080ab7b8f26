"""lone_surrogate: the one thing json.loads accepts that no vigil file can be written back with."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from state.json_checks import lone_surrogate


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"a": "x\\ud800"}', "'\\ud800'"),
        ('{"\\uDC80": 1}', "'\\udc80'"),
        ('["ok", ["\\udbff"]]', "'\\udbff'"),
        ('{"a": "\\ud83d\\ude00"}', None),  # a pair: one character
        ('{"a": "\\ud7ff"}', None),  # just below the surrogates
        ('{"a": "plain"}', None),
    ],
)
def test_finds_an_escaped_half_of_a_pair(text: str, found: str | None) -> None:
    raw = json.loads(text)
    assert lone_surrogate(text, raw) == found
    assert lone_surrogate(text.encode(), raw) == found


@settings(max_examples=examples(200), deadline=None)
@example(value="\ud800\udc00")  # two halves, read back as one character
@given(st.text(st.characters(min_codepoint=0xD000, max_codepoint=0xE000, exclude_categories=())))
def test_none_exactly_when_the_parsed_text_can_be_encoded(value: str) -> None:
    text = json.dumps({"v": value})  # ASCII: every such character escaped
    raw = json.loads(text)
    try:
        raw["v"].encode("utf-8")  # not value: json joins an escaped high and low half into one
    except UnicodeEncodeError:
        assert lone_surrogate(text, raw) is not None
    else:
        assert lone_surrogate(text, raw) is None
