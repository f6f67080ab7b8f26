"""RunnerState: strict validation, clear problems, migrations, frozen values, file rendering."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import ValidationError

from state.models import (
    DAEMON_FIELDS,
    EDITABLE_FIELDS,
    SCHEMA_VERSION,
    InvalidStateFileError,
    NewerSchemaError,
    RunnerState,
    migrate_raw_state,
    parse_state_bytes,
    render_state,
)


def _file(**fields: Any) -> bytes:
    return json.dumps({"schema_version": SCHEMA_VERSION, **fields}).encode()


def test_defaults_are_empty_and_current_version() -> None:
    state = RunnerState()
    assert state.schema_version == SCHEMA_VERSION == 1
    assert state.agent_memory == state.notes == ""
    assert dict(state.entry_prices) == {}
    assert state.updated_at_ms == 0


def test_field_groups_cover_the_model() -> None:
    fields = set(RunnerState.model_fields)
    assert fields == {*EDITABLE_FIELDS, *DAEMON_FIELDS, "schema_version", "updated_at_ms"}
    assert not set(EDITABLE_FIELDS) & set(DAEMON_FIELDS)


def test_render_then_parse_round_trips() -> None:
    state = RunnerState(
        agent_memory="Trend up. Be patient.",
        notes="café ✓",
        entry_prices={"BTC/USDT": 97000.5},
        entry_times_ms={"BTC/USDT": 1_740_000_000_000},
        trailing_highs={"BTC/USDT": 98000.0},
        updated_at_ms=5,
        extra={"learner": {"weights": [1, 2.5, None, True], "name": "x"}},
    )
    data = render_state(state)
    assert data.endswith(b"\n")
    assert "café ✓".encode() in data  # readable for a person, not \u-escaped
    parsed, version = parse_state_bytes(data)
    assert version == SCHEMA_VERSION
    assert parsed == state
    assert parsed.model_dump(mode="json")["extra"] == {
        "learner": {"weights": [1, 2.5, None, True], "name": "x"}
    }


def test_del_and_c1_are_written_escaped_and_read_back_as_they_were() -> None:
    """A model's memory note holding U+009B (a terminal reads it as ESC [) or DEL reached
    runner_state.json raw, the file a person ``cat``s and edits while the daemon runs."""
    note = "watch BTC\x9b31m\x7f\x85 closely"
    state = RunnerState(agent_memory=note, extra={"history": [{"text": note}]})
    data = render_state(state)
    assert b"\xc2\x9b" not in data and b"\x7f" not in data and b"\xc2\x85" not in data
    assert b"\\u009b" in data
    parsed, _ = parse_state_bytes(data)
    assert parsed == state


def test_rendered_file_lists_editable_fields_first() -> None:
    keys = list(json.loads(render_state(RunnerState())))
    assert keys[:3] == ["schema_version", "agent_memory", "notes"]


def test_state_is_frozen_all_the_way_down() -> None:
    state = RunnerState(entry_prices={"BTC/USDT": 1.0}, extra={"a": {"b": [1]}})
    with pytest.raises(ValidationError):
        state.notes = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        state.entry_prices["ETH/USDT"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError):
        state.extra["a"]["b"] = 2
    assert state.extra["a"]["b"] == (1,)


def test_input_mappings_are_copied_not_shared() -> None:
    prices = {"BTC/USDT": 1.0}
    state = RunnerState(entry_prices=prices)
    prices["ETH/USDT"] = 2.0
    assert dict(state.entry_prices) == {"BTC/USDT": 1.0}


def test_unknown_top_level_key_is_rejected_by_name() -> None:
    with pytest.raises(InvalidStateFileError, match="unknown key 'memroy'"):
        parse_state_bytes(_file(memroy="typo"))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"agent_memory": 42}, "agent_memory"),
        ({"notes": ["a"]}, "notes"),
        ({"entry_prices": {"BTC/USDT": "97000"}}, "entry_prices.BTC/USDT"),
        ({"entry_prices": {"BTC/USDT": -1.0}}, "entry_prices.BTC/USDT"),
        ({"entry_prices": ["BTC/USDT"]}, "entry_prices"),
        ({"entry_times_ms": {"BTC/USDT": 1.5}}, "entry_times_ms.BTC/USDT"),
        ({"updated_at_ms": True}, "updated_at_ms"),
        ({"updated_at_ms": "5"}, "updated_at_ms"),
    ],
)
def test_wrong_types_name_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidStateFileError) as info:
        parse_state_bytes(_file(**fields))
    assert f"field '{named}'" in info.value.problem


def test_an_overflowing_number_is_not_stored_as_infinity() -> None:
    data = b'{"schema_version": 1, "trailing_highs": {"ETH/USDT": 1e400}}'
    with pytest.raises(InvalidStateFileError, match=r"field 'trailing_highs\.ETH/USDT'.*finite"):
        parse_state_bytes(data)


def test_too_long_memory_is_rejected_with_its_length() -> None:
    with pytest.raises(InvalidStateFileError, match=r"'agent_memory' is 501 characters.*500"):
        parse_state_bytes(_file(agent_memory="x" * 501))


def test_extra_must_hold_plain_json() -> None:
    with pytest.raises(ValidationError, match="only JSON values"):
        RunnerState(extra={"when": object()})
    with pytest.raises(ValidationError, match="finite"):
        RunnerState(extra={"x": [float("nan")]})


def test_json_syntax_error_gives_line_and_column() -> None:
    data = b'{\n  "schema_version": 1\n  "notes": "missing comma above"\n}\n'
    with pytest.raises(
        InvalidStateFileError, match=r"not valid JSON at line 3 column 3: Expecting"
    ):
        parse_state_bytes(data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"[1, 2]", "expected one JSON object, found a list"),
        (b'{"schema_version": 1, "notes": "a", "notes": "b"}', "'notes' appears twice"),
        (b'{"schema_version": 1, "updated_at_ms": NaN}', "NaN is not a number JSON allows"),
        (b'{"notes": "\xff"}', "not UTF-8"),
        (b'{"schema_version": "1"}', "schema_version must be an integer"),
        (b'{"schema_version": -1}', "schema_version -1 is not a version vigil ever wrote"),
        (b'{"notes": "a\\udc80b"}', "half of a surrogate pair"),
        (b'{"extra": {"\\ud800": 1}}', "half of a surrogate pair"),
    ],
)
def test_unreadable_files_explain_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(InvalidStateFileError) as info:
        parse_state_bytes(data)
    assert problem in info.value.problem


def test_an_escaped_surrogate_pair_is_one_character() -> None:
    state, _ = parse_state_bytes(b'{"notes": "\\ud83d\\ude00 \\uD7FF"}')
    assert state.notes == "\U0001f600 \ud7ff"
    assert parse_state_bytes(render_state(state))[0] == state


def test_a_utf8_bom_is_tolerated() -> None:
    state, _ = parse_state_bytes(b"\xef\xbb\xbf" + _file(notes="from notepad"))
    assert state.notes == "from notepad"


def test_newer_schema_is_its_own_error() -> None:
    with pytest.raises(NewerSchemaError) as info:
        parse_state_bytes(_file(schema_version=SCHEMA_VERSION + 1))
    assert info.value.found_version == SCHEMA_VERSION + 1
    assert "newer" in info.value.problem


def test_file_without_a_version_is_version_0_and_migrates() -> None:
    state, version = parse_state_bytes(b'{"agent_memory": "old notes."}')
    assert version == 0
    assert state.schema_version == SCHEMA_VERSION
    assert state.agent_memory == "old notes."


def test_migrations_run_in_order_up_to_the_target() -> None:
    def v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
        raw["memory"] = raw.pop("mem")
        return raw

    def v2_to_v3(raw: dict[str, Any]) -> dict[str, Any]:
        raw["memory"] = raw["memory"].upper()
        return raw

    steps = {1: v1_to_v2, 2: v2_to_v3}
    raw = {"schema_version": 1, "mem": "hello"}
    migrated = migrate_raw_state(raw, target_version=3, migrations=steps)
    assert migrated == {"schema_version": 3, "memory": "HELLO"}
    assert raw == {"schema_version": 1, "mem": "hello"}  # the input is not changed
    with pytest.raises(InvalidStateFileError, match="schema_version 0"):
        migrate_raw_state({"schema_version": 0}, target_version=3, migrations=steps)


def test_state_objects_cannot_claim_another_version() -> None:
    with pytest.raises(ValidationError):
        RunnerState(schema_version=SCHEMA_VERSION + 1)


# any code point, lone surrogates included: json.dumps escapes them, as a person may write one
_any_char = st.characters(exclude_categories=()) | st.characters(
    min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=()
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(_any_char, max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_edited_files = st.one_of(
    st.binary(max_size=200),
    st.dictionaries(
        st.sampled_from([*RunnerState.model_fields, "note"]), _json_values, max_size=5
    ).map(lambda raw: json.dumps(raw).encode()),
)


@settings(max_examples=examples(300), deadline=None)
@given(data=_edited_files)
@example(data=b'{"notes": ' + b"7" * 5000 + b"}")  # json raises a plain ValueError
@example(data=b"[" * 100_000)  # and a RecursionError
@example(data=b'{"notes": "a\\ud800b"}')  # accepted, then no save could write it
def test_any_edit_parses_or_says_what_is_wrong(data: bytes) -> None:
    """Whatever a person leaves in the file, the store gets a state or an
    ``InvalidStateFileError`` to report and keep aside; anything else escaped its judgement."""
    try:
        state, _ = parse_state_bytes(data)
    except InvalidStateFileError as exc:
        assert exc.problem
    else:
        assert parse_state_bytes(render_state(state))[0] == state
