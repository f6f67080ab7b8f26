"""Claude's answer on arrival: structural failures, per-decision drops, caps, clamps, keywords."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from fakes.claude_support import PRICES, answer, decision_with, snapshot
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.claude_prompt import render_request, render_review_request
from agent.claude_schema import (
    MAX_ANSWER_BYTES,
    AnswerInvalid,
    answer_json_schema,
    convert_answer,
    extract_signal_weights,
    parse_answer_json,
)
from agent.config import AgentConfig
from agent.signal_names import SIGNAL_NAMES, SYNONYMS, canonical_signal


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if node.get("type") == "object" else []
        return found + [o for v in node.values() for o in _objects(v)]
    if isinstance(node, list):
        return [o for v in node for o in _objects(v)]
    return []


def test_every_object_in_the_schema_forbids_extra_properties() -> None:
    objects = _objects(answer_json_schema())
    assert len(objects) >= 4
    assert all(o.get("additionalProperties") is False for o in objects)
    assert set(answer_json_schema()["required"]) == set(answer())


def test_a_valid_answer_converts_without_notes() -> None:
    decision, notes = convert_answer(answer(), prices=PRICES)
    assert notes == []
    assert decision.decided_by == "claude" and len(decision.decisions) == 2


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1, 2]", "invalid_json"),
        ("", "invalid_json"),
        ('"' + "a" * MAX_ANSWER_BYTES + '"', "answer_too_large"),
    ],
)
def test_bytes_level_problems_fail_the_answer(text: str, kind: str) -> None:
    with pytest.raises(AnswerInvalid) as caught:
        parse_answer_json(text)
    assert caught.value.kind == kind


# any code point, the lone surrogates a proxy's JSON body can carry included (and made common)
_any_char = st.characters(exclude_categories=()) | st.characters(
    min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=()
)


@settings(max_examples=examples(300), deadline=None)
@given(
    valid=st.booleans(),
    cut=st.integers(0, 10_000),
    inserted=st.text(_any_char, max_size=8),
)
@example(valid=True, cut=10_000, inserted="\ud800")  # escaped as an unexpected error
def test_any_text_is_an_answer_or_invalid(valid: bool, cut: int, inserted: str) -> None:
    """Whatever text the model (or a proxy) hands back, the answer parses or fails as
    ``AnswerInvalid``: a failed try with its usage billed, never an unexpected error."""
    base = json.dumps(answer()) if valid else ""
    text = base[:cut] + inserted + base[cut:]
    try:
        data = parse_answer_json(text)
    except AnswerInvalid as exc:
        assert exc.kind in {"invalid_json", "answer_too_large"}
    else:
        assert isinstance(data, dict)


@pytest.mark.parametrize(
    "data",
    [
        answer(decisions="BUY everything"),
        answer(next_check_seconds="soon"),
        answer(next_check_seconds="60"),  # a string is not the number asked for
        answer(next_check_seconds=True),  # nor is true (it was read as 1 s)
        answer(decisions=["BTC/USDT"]),
        {k: v for k, v in answer().items() if k != "memory_update"},
    ],
)
def test_structural_problems_fail_the_whole_answer(data: dict[str, Any]) -> None:
    with pytest.raises(AnswerInvalid) as caught:
        convert_answer(data, prices=PRICES)
    assert caught.value.kind == "schema_mismatch"


def test_a_duplicate_ticker_and_a_trade_without_price_are_dropped() -> None:
    first = answer()["decisions"][0]
    data = answer(decisions=[first, {**first, "ticker": "btcusdt"}])
    decision, notes = convert_answer(data, prices={**PRICES, "BTC/USDT": None})
    assert decision.decisions == ()
    assert [n.reason for n in notes] == [
        "dropped: no current market price",
        "dropped: no current market price",
    ]
    decision, notes = convert_answer(data, prices=PRICES)
    assert len(decision.decisions) == 1 and "second decision" in notes[0].reason


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_position_pct_is_never_above_the_cap_whatever_the_model_says(pct: float) -> None:
    data = orjson.loads(orjson.dumps(decision_with(position_pct=pct)))  # NaN/inf -> null
    decision, _ = convert_answer(data, prices=PRICES)
    assert all(0.0 <= d.position_pct <= 0.20 for d in decision.decisions)


@given(st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False))
@example(1e19)  # past what an int field parses: the whole answer failed, not clamped
def test_next_check_seconds_always_lands_in_60_3600(secs: float) -> None:
    data = orjson.loads(json.dumps(answer(next_check_seconds=secs)))  # as the model's text reads
    decision, notes = convert_answer(data, prices=PRICES)
    assert 60 <= decision.next_check_seconds <= 3600
    assert type(decision.next_check_seconds) is int
    if not 60 <= secs <= 3600:
        assert [n.what for n in notes] == ["next_check_seconds"]


def test_keyword_extraction_matches_word_starts_and_sums_to_one() -> None:
    weights = extract_signal_weights("Bollinger squeeze, fear index low; funding flat; trend up")
    assert set(weights) == {"bollinger", "fear_greed", "funding", "momentum"}
    assert sum(weights.values()) == pytest.approx(1.0)
    assert extract_signal_weights("Nothing to see; operator words: trendy") == {"momentum": 1.0}
    assert extract_signal_weights("no keywords here") == {}


def test_the_rendered_request_marks_the_system_prompt_for_caching_and_holds_no_secret() -> None:
    request = render_request(AgentConfig(model="claude-x", max_tokens=1000), snapshot())
    # one hour: passes come 15 min apart, a 5-minute entry would expire between them
    assert request["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    short = render_request(AgentConfig(prompt_cache_ttl="5m"), snapshot())
    assert short["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert (
        "0.05" in request["system"][0]["text"] and "exposure_scale" in request["system"][0]["text"]
    )
    assert set(request) == {"model", "max_tokens", "system", "messages", "output_config"}
    assert request["model"] == "claude-x" and request["max_tokens"] == 1000
    assert "sk-ant" not in orjson.dumps(request).decode()


def test_the_review_request_has_its_own_schema() -> None:
    request = render_review_request(AgentConfig(), [], {"note": "x"})
    schema = request["output_config"]["format"]["schema"]
    assert schema["properties"]["reviews"]["type"] == "array"
    assert request["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_the_prompt_sends_a_compact_snapshot_and_the_journal_keeps_the_whole_one() -> None:
    shot = snapshot().model_copy(update={"btc_price": 78_123.456789})
    sent = shot.as_sent()
    compact = render_request(AgentConfig(), shot)["messages"][0]["content"]
    whole = render_request(AgentConfig(compact_snapshot=False), shot)["messages"][0]["content"]
    assert '"btc_price":78123.5' in compact and '"btc_price":78123.456789' in whole
    assert sent["news_summary"] is None and "news_summary" in sent["unavailable"]
    assert '"news_summary"' not in compact.split('"unavailable"')[0]  # explained null: absent
    assert "schema_version" not in compact and "schema_version" in whole
    assert len(compact) < len(whole)


_weight_names = st.sampled_from([*SIGNAL_NAMES, *SYNONYMS]) | st.text(max_size=12)
_json_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e308, -1e308])


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(_weight_names, _json_floats, max_size=8))
@example({"momentum": 1e308, "trend": 1e308})  # two spellings overflowed to inf: a crash
def test_any_finite_signal_weights_convert_to_finite_weights(weights: dict[str, float]) -> None:
    """Weights are summed per signal over its spellings: a sum past the float range is dropped and
    noted like a weight that is not a number, never an error out of the conversion."""
    decision, notes = convert_answer(decision_with(signal_weights=weights), prices=PRICES)
    (trade,) = decision.decisions
    assert all(math.isfinite(w) for w in trade.signal_weights.values())
    if len(trade.signal_weights) < len({canonical_signal(n) for n in weights} - {None}):
        assert any(n.what == "signal_weights" for n in notes)
