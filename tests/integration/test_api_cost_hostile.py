"""``/api/status``'s cost block over a journal line whose usage is garbled (a person's edit, a
damaged copy): a token count that is text, a list, 1e308, true or negative, a ``cost_usd`` of
text or 1e300, a usage or try that is not an object. The line is left out of the sums and named in
``unavailable``; the other lines' figures are as before, never a 500 or a NaN."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from fakes.api_support import serve_api, write_state_dir
from test_api_cost import DAY2_MS, HAIKU, ClockOnlyDaemon, append, day_lines

from agent.cost_accounting import cost_summary

GOOD = day_lines(DAY2_MS)[:4]
AT_MS = DAY2_MS + 600_000


def with_usage(**fields: Any) -> dict[str, Any]:
    usage = {"model": HAIKU, "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.001, **fields}
    return {"type": "decision", "decision_id": "bad", "at_ms": AT_MS, "trigger": ["agent_timer"],
            "decided_by": "claude", "usage": usage,
            "raw_decision": {"attempts": [{"usage": usage}]}}  # fmt: skip


HOSTILE: dict[str, dict[str, Any]] = {
    "text tokens": with_usage(input_tokens="abc"),
    "list tokens": with_usage(output_tokens=[1]),
    "1e308 tokens": with_usage(input_tokens=1e308),
    "true tokens": with_usage(cache_read_input_tokens=True),
    "negative tokens": with_usage(input_tokens=-5),
    "text dollars": with_usage(cost_usd="x"),
    "1e300 dollars": with_usage(cost_usd=1e300),
    "usage a list": {**with_usage(), "usage": [1, 2]},
    "try usage a string": {**with_usage(), "raw_decision": {"attempts": [{"usage": "x"}]}},
    "attempts a number": {**with_usage(), "raw_decision": {"attempts": 5}},
    "raw_decision a list": {**with_usage(), "raw_decision": [1]},
    "trigger a number": {**with_usage(), "trigger": 5},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_a_garbled_usage_is_left_out_and_named(tmp_path: Path, name: str) -> None:
    state = tmp_path / "state"
    write_state_dir(state, decisions=0)
    journal = state / "logs" / "decisions.jsonl"
    append(journal, [*GOOD, HOSTILE[name]])
    async with serve_api(state, daemon=ClockOnlyDaemon(DAY2_MS + 3_600_000)) as api:
        code, body = await api.get("/api/status")
    assert code == 200 and isinstance(body, dict)
    total = body["cost"]["today"]["total"]
    assert total == cost_summary(GOOD, 1.0).total.model_dump(mode="json")
    assert math.isfinite(total["cost_usd"])
    why = body["unavailable"]["cost_lines"]
    assert journal.name in why and str(AT_MS) in why
