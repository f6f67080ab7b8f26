"""The snapshot as sent, vouched plain (``PlainJson``), gives the journal line the walks gave: the
same bytes as the validated line, on hostile snapshots too; and a snapshot's forms are its walks,
made once and not copied."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from snapshot_walks_support import (
    hostile_snapshot,
    outcome,
    reference_compact,
    reference_is_plain,
    reference_rounded,
    same,
)

from agent.routine import _typed_line
from agent.snapshot import sent_digest
from state.journal import PlainJson, encode_jsonl_record

_finite_json = st.recursive(
    st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(), st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.text(max_size=3), _finite_json, max_size=5))
def test_plain_json_is_written_as_the_dict_it_holds(snapshot: dict[str, Any]) -> None:
    record = {"type": "decision", "snapshot": snapshot, "at_ms": 1}
    vouched = {**record, "snapshot": PlainJson(snapshot)}
    # the same bytes, or the same refusal (an integer orjson cannot hold)
    assert outcome(encode_jsonl_record, vouched) == outcome(encode_jsonl_record, record)


@settings(max_examples=examples(200), deadline=None)
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
    assert outcome(encode_jsonl_record, vouched) == outcome(encode_jsonl_record, record)
    nested = {**record, "nested": {"x": PlainJson(snapshot, encoded)}}  # only the top level's
    assert encode_jsonl_record(nested) == encode_jsonl_record({**record, "nested": {"x": snapshot}})


def test_a_snapshot_as_sent_is_what_plain_json_promises() -> None:
    sent = hostile_snapshot().as_sent()
    assert reference_is_plain(sent)


def _decision_record(**fields: Any) -> dict[str, Any]:
    """A decision line's record with ``fields`` before its gate update."""
    head = {"type": "decision", "decision_id": "d1-1", "at_ms": 1_000, "trigger": ["test"]}
    return {**head, **fields, "gate_update": {"next_check_seconds": 60}}


def test_a_line_with_the_vouched_snapshot_equals_the_validated_line() -> None:
    sent = hostile_snapshot().as_sent()
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
    sent = hostile_snapshot().as_sent()
    record = _decision_record(snapshot=sent, prompt=info)
    validated = _typed_line(record)
    vouched = _typed_line({**record, "snapshot": PlainJson(sent), "prompt": PlainJson(info)})
    assert list(vouched) == list(validated) and vouched == validated
    assert encode_jsonl_record(vouched) == encode_jsonl_record(validated)


def test_a_record_unfit_for_its_model_is_still_journaled_with_the_reason() -> None:
    sent = hostile_snapshot().as_sent()
    record = {"decision_id": "d1-1", "at_ms": "late", "trigger": [], "snapshot": PlainJson(sent)}
    line = _typed_line(record)
    assert "at_ms" in line["record_invalid"] and line["snapshot"] == sent


def test_a_snapshots_forms_are_its_walks_made_once_and_not_copied() -> None:
    snapshot = hostile_snapshot()
    forms = snapshot.forms()
    sent = snapshot.as_sent()
    assert same(dict(forms.sent), reference_rounded(snapshot.model_dump(mode="json")))
    assert same(dict(forms.compact), reference_compact(sent))
    assert forms.json == snapshot.to_json_bytes() == orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)
    assert snapshot.digest() == sent_digest(sent)
    assert snapshot.forms() is forms and forms.holds(sent)
    copied = snapshot.model_copy(update={"cash": 5.0})
    assert copied.forms() is not forms and copied.as_sent()["cash"] == 5.0


def test_forms_hold_only_the_very_entries() -> None:
    forms = hostile_snapshot().forms()
    sent = dict(forms.sent)
    assert forms.holds(sent)
    assert not forms.holds({**sent, "open_interest": dict(sent["open_interest"])})  # equal, not it
    assert not forms.holds({k: v for k, v in sent.items() if k != "cash"})
    assert not forms.holds({**sent, "extra": None})
    swapped = {**sent, "cash": sent["btc_change_24h_pct"], "btc_change_24h_pct": sent["cash"]}
    assert swapped == sent  # both None: the same objects, the same JSON
    assert forms.holds(swapped)
