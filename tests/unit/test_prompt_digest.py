"""The prompt hash with the system blocks' share kept: the hash of the whole dump, every call."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.claude_prompt import DECISION_SYSTEM_PROMPT
from agent.prompt_assembly import PromptAssembler

_text = st.one_of(st.text(max_size=40), st.just(DECISION_SYSTEM_PROMPT))
_block = st.builds(
    lambda text, cached: (
        {"type": "text", "text": text}
        | ({"cache_control": {"type": "ephemeral"}} if cached else {})
    ),
    _text,
    st.booleans(),
)
_blocks = st.lists(_block, max_size=3)


def _whole(system: list[dict[str, Any]], user: list[dict[str, Any]]) -> str:
    return hashlib.sha256(orjson.dumps([system, user], option=orjson.OPT_SORT_KEYS)).hexdigest()[
        :16
    ]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(_blocks, _blocks), min_size=1, max_size=6))
def test_digest_is_the_hash_of_the_whole_dump_whatever_came_before(
    prompts: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]],
) -> None:
    assembler = PromptAssembler(None)
    for system, user in [*prompts, *prompts]:  # the second round mostly from the kept state
        assert assembler._digest(system, user) == _whole(system, user)


def test_digest_sees_system_blocks_changed_in_place_after_hashing() -> None:
    """The kept state is keyed on a copy: blocks edited after they were hashed do not fool it."""
    assembler = PromptAssembler(None)
    system = [{"type": "text", "text": "policy A"}]
    user = [{"type": "text", "text": "snapshot"}]
    assert assembler._digest(system, user) == _whole(system, user)
    system[0]["text"] = "policy B"
    assert assembler._digest(system, user) == _whole(system, user)
