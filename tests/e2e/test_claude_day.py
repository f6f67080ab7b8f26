"""The daemon against the simulator and a fake Messages API for a simulated day: Claude decides, a
storm of 529s opens the breaker (the fallback decides, saying why), the breaker closes again, and the
journal accounts for every call: who decided, tokens and cost, breaker transitions, caps applied."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from fakes.claude_support import answer
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop, until_while_running
from fakes.journal_lines import read_all
from fakes.messages_api import (
    FakeMessagesApi,
    RecordedRequest,
    ScriptedResponse,
    json_message,
    overloaded,
    usage_body,
)

from agent.claude_prompt import DECISION_SYSTEM_PROMPT, REVIEW_SYSTEM_PROMPT
from agent.claude_reflector import REFLECTION_SYSTEM_PROMPT
from agent.snapshot import MarketSnapshot, sent_json_bytes
from agent.snapshot_walks import compact

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-test-claude-day-0123456789abcdef"
START = "2025-04-07T00:00:00Z"
START_MS = 1_743_984_000_000
DAY_MS = 86_400_000
SPEED = 3000  # a simulated day in ~29 s
#: sim seconds (4.8 real s at SPEED): the next decision must come while it is open, whatever the
#: host's speed (at 1800, 0.6 real s, a slow CI host once let the breaker half-open first), and
#: it re-closes well within the day
BREAKER_OPEN_SECS = 4 * 3600
VALID_BEFORE_STORM = 4  # decision requests answered before the 529 storm
STORM_DECISIONS = 3  # failed decisions in a row open the breaker (breaker_failures default)
UNKNOWN_TICKER = "DOGE/USDT"


def _hold(ticker: str) -> dict[str, Any]:
    return {
        "ticker": ticker,
        "action": "HOLD",
        "position_pct": 0.0,
        "confidence": 0.5,
        "reasoning": "No edge.",
    }


def _decision_answer(number: int) -> dict[str, Any]:
    """Answer number ``number`` (1-based): an oversized BUY, an unknown ticker, then HOLDs."""
    if number == 1:
        buy = {**answer()["decisions"][0], "position_pct": 0.9}  # the caps cut it to 0.20
        return answer(decisions=[buy, _hold("ETH/USDT")])
    if number == 2:
        stray = {**answer()["decisions"][0], "ticker": UNKNOWN_TICKER}
        return answer(decisions=[stray, _hold("SOL/USDT")])
    return answer(decisions=[_hold("BTC/USDT"), _hold("ETH/USDT")], memory_update=None)


class ScriptedDay(FakeMessagesApi):
    """Answers as a function of how many decision requests came in, since timing decides how many
    there are: valid answers, then 529 for everything until ``STORM_DECISIONS`` decisions failed,
    then valid answers again. Position reviews get HOLD with zero usage so the decision journal's
    per-line usage must add up to the ledger's running totals exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.decision_requests = 0
        self.storm_decisions = 0
        self.review_requests = 0

    def _storm(self) -> bool:
        return self.decision_requests >= VALID_BEFORE_STORM and (
            self.storm_decisions < STORM_DECISIONS
        )

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        system = body.get("system") or [{}]
        text = system[0].get("text", "")
        if text == REVIEW_SYSTEM_PROMPT:
            self.review_requests += 1
            if self._storm():
                return overloaded()
            return json_message(_review_answer(body), usage=usage_body(0, 0))
        if text != DECISION_SYSTEM_PROMPT:
            return overloaded()  # an unknown request kind fails loudly in the journal
        if self._storm():
            self.storm_decisions += 1
            return overloaded()
        self.decision_requests += 1
        n = self.decision_requests
        usage = usage_body(
            input_tokens=1000 + n,
            output_tokens=200 + n,
            cache_creation_input_tokens=3000 if n == 1 else 0,
            cache_read_input_tokens=0 if n == 1 else 3000,
        )
        return json_message(_decision_answer(n), usage=usage)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw) if raw else {}
        self.requests.append(
            RecordedRequest(
                path=request.path,
                headers={k.lower(): v for k, v in request.headers.items()},
                body=body,
            )
        )
        scripted = self.respond(body)
        assert isinstance(scripted.body, dict)
        return web.Response(
            status=scripted.status,
            body=orjson.dumps(scripted.body),
            headers={"content-type": "application/json", "request-id": "req_fake"},
        )


def _review_answer(body: dict[str, Any]) -> dict[str, Any]:
    content = body["messages"][0]["content"]
    positions = json.loads(content.split("<positions>\n", 1)[1].split("\n</positions>", 1)[0])
    return {
        "reviews": [
            {"ticker": p["ticker"], "action": "HOLD", "reason": "thesis intact"} for p in positions
        ]
    }


def _decisions(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    return [r for r in map(orjson.loads, complete.splitlines()) if r.get("type") == "decision"]


def _day_done(records: list[dict[str, Any]], api: ScriptedDay) -> bool:
    """A simulated day has passed, the storm is over and Claude decided again after it."""
    if not records or records[-1]["at_ms"] < START_MS + DAY_MS:
        return False
    closed_again = [
        i
        for i, r in enumerate(records)
        if any(t["to_state"] == "closed" for t in r.get("agent", {}).get("breaker_transitions", []))
    ]
    return (
        api.storm_decisions >= STORM_DECISIONS
        and bool(closed_again)
        and any(r.get("decided_by") == "claude" for r in records[closed_again[0] :])
    )


async def _wait_for_day(path: Path, proc: asyncio.subprocess.Process, api: ScriptedDay) -> None:
    await until_while_running(proc, lambda: _day_done(_decisions(path), api), "the day's end")


@pytest.mark.timeout(300)
async def test_a_day_with_claude_a_529_storm_and_the_breaker(tmp_path: Path) -> None:
    state = tmp_path / "state"
    journal = state / "logs" / "decisions.jsonl"
    log_path = tmp_path / "daemon.log"
    async with ScriptedDay() as api:
        env = daemon_env(
            state,
            ANTHROPIC_API_KEY=API_KEY,
            VIGIL_SIM__START=START,
            VIGIL_SIM__SPEED=str(SPEED),
            VIGIL_AGENT__BASE_URL=api.base_url,
            VIGIL_AGENT__MAX_ATTEMPTS="1",
            # every pass a call, one model: the test counts calls through a 529 storm
            VIGIL_AGENT__DELTA__ENABLED="false",
            VIGIL_AGENT__TIERS__ROUTINE_MODEL="claude-sonnet-4-6",
            VIGIL_AGENT__BREAKER_OPEN_SECS=str(BREAKER_OPEN_SECS),
            VIGIL_STATE__FSYNC_JOURNALS="false",
            # Binance's 250 ms updates (12,000 frames a real second a stream at SPEED) starved the
            # daemon on a loaded host: 9 decisions in 2.8 simulated days, all on the watchdog
            **LIGHT_MARKET,
        )
        async with sim_daemon(env, log_path) as proc:
            await _wait_for_day(journal, proc, api)
            assert await stop(proc) == 0
        requests = list(api.requests)
    log = log_path.read_text()
    assert "Traceback" not in log, log
    assert API_KEY not in log

    lines = read_all(journal)  # every line complete JSON
    records = [r for r in lines if r["type"] == "decision"]
    failures = [r for r in lines if r["type"] == "agent_failure"]
    _check_who_decided(records)
    _check_usage_adds_up(records)
    _check_breaker(records)
    _check_caps(records)
    assert sum(f["kind"] == "overloaded" for f in failures) >= STORM_DECISIONS
    assert all(f["kind"] in {"overloaded", "review_overloaded"} for f in failures), failures
    _check_requests(requests)
    _check_prompt_is_reproducible(records[0], requests)


def _check_who_decided(records: list[dict[str, Any]]) -> None:
    assert all("error" not in r for r in records[:-1]), "only a shutdown may cut one short"
    finished = [r for r in records if "error" not in r]
    assert len({r["decision_id"] for r in records}) == len(records)
    for rec in finished:
        assert rec["decided_by"] in {"claude", "fallback"}
        assert rec["decider_reason"], rec["decision_id"]
        assert "agent" in rec and rec["agent"]["enabled"] is True
        if rec["decided_by"] == "claude":
            assert rec["decider_reason"].startswith("answered")
            assert rec["usage"]["input_tokens"] > 1000
        else:
            reason = rec["decider_reason"]
            assert reason.startswith(("claude_failed: overloaded", "breaker_open")), reason
            assert "no_api_key" not in reason
    by = [r["decided_by"] for r in finished]
    assert by[:VALID_BEFORE_STORM] == ["claude"] * VALID_BEFORE_STORM
    assert "fallback" in by and by.count("claude") > VALID_BEFORE_STORM


def _check_usage_adds_up(records: list[dict[str, Any]]) -> None:
    last = [r for r in records if "agent" in r][-1]
    upto = records[: records.index(last) + 1]
    totals = last["agent"]
    for field in (
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ):
        assert sum(r.get("usage", {}).get(field, 0) for r in upto) == totals[field], field
    cost = sum(r.get("usage", {}).get("cost_usd", 0.0) for r in upto)
    assert cost > 0
    assert cost == pytest.approx(totals["cost_total_usd"], rel=1e-9)
    assert totals["failed_calls"] >= STORM_DECISIONS


def _breaker_path(records: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """The breaker's transitions in the order they happened: as the journal first lists them (each
    line carries the last ten), sorted by time only. Two may share a simulated ms: a regime fit
    holds the scaled clock, and a trial answered meanwhile closes the breaker at the very instant
    it half-opened; sorted by their names too, half_open -> closed came before open -> half_open."""
    seen: dict[tuple[int, str, str], None] = {}
    for rec in records:
        for t in rec.get("agent", {}).get("breaker_transitions", []):
            seen[(t["at_ms"], t["from_state"], t["to_state"])] = None
    return sorted(seen, key=lambda transition: transition[0])  # stable: journal order kept


def _check_breaker(records: list[dict[str, Any]]) -> None:
    transitions = _breaker_path(records)
    path = [(f, t) for _, f, t in transitions]
    opened = path.index(("closed", "open"))
    half = path.index(("open", "half_open"), opened)
    assert ("half_open", "closed") in path[half:], path
    open_from = min(at for at, f, t in transitions if (f, t) == ("closed", "open"))
    closed_at = min(at for at, f, t in transitions if (f, t) == ("half_open", "closed"))
    during = [r for r in records if open_from < r["at_ms"] < closed_at and "error" not in r]
    blocked = [r for r in during if r["decider_reason"].startswith("breaker_open")]
    assert blocked, "decisions while the breaker was open"
    assert all(r["decided_by"] == "fallback" for r in blocked)


def _check_caps(records: list[dict[str, Any]]) -> None:
    first = records[0]
    assert first["decided_by"] == "claude"
    # 0.9 is cut to 0.20 where the answer is converted (a note) or by the risk caps (a change)
    notes = [n for a in first["raw_decision"]["attempts"] for n in a.get("notes", [])]
    capped = [
        c for c in [*notes, *first["cap_changes"]]
        if c["ticker"] == "BTC/USDT" and c["what"] == "position_pct"
    ]  # fmt: skip
    assert capped, (notes, first["cap_changes"])
    buys = [i for i in first["accepted"] if i["action"] == "BUY" and i["ticker"] == "BTC/USDT"]
    assert len(buys) == 1
    assert 0 < buys[0]["notional_usd"] <= 0.20 * first["snapshot"]["portfolio_value"] + 1e-6
    second = records[1]
    notes = [n for a in second["raw_decision"]["attempts"] for n in a.get("notes", [])]
    assert any(n["ticker"] == UNKNOWN_TICKER and "dropped" in n["reason"] for n in notes), notes
    for rec in records:
        assert all(i["ticker"] != UNKNOWN_TICKER for i in rec.get("accepted", []))
        value = rec.get("snapshot", {}).get("portfolio_value")
        for intent in rec.get("accepted", []):
            if intent["action"] == "BUY":
                assert intent["notional_usd"] <= 0.20 * value + 1e-6


def _check_requests(requests: list[RecordedRequest]) -> None:
    assert len(requests) > VALID_BEFORE_STORM + STORM_DECISIONS
    for req in requests:
        assert req.path == "/v1/messages"
        # this SDK sends the key as a bearer token; older ones used x-api-key
        sent = req.headers.get("x-api-key") or req.headers["authorization"].removeprefix("Bearer ")
        assert sent == API_KEY
        system = req.body["system"][0]
        # a closed trade's reflection (70 words) is far under the shortest prompt the API caches
        # (1,024 tokens): it carries no marker, the decision and review prompts do
        if system["text"] != REFLECTION_SYSTEM_PROMPT:
            assert system["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        assert API_KEY not in orjson.dumps(req.body).decode()


def _check_prompt_is_reproducible(first: dict[str, Any], requests: list[RecordedRequest]) -> None:
    """The journal line names exactly the prompt that was sent: the assembled prompt's hash (over
    its system and user blocks, before the cache TTL is stamped on) equals the sent body's, and the
    sent snapshot part is the journaled snapshot as the prompt compacts it."""
    sent = next(r.body for r in requests if r.body["system"][0]["text"] == DECISION_SYSTEM_PROMPT)

    def unstamped(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**b, "cache_control": {"type": "ephemeral"}} if "cache_control" in b else b
            for b in blocks
        ]

    body = [unstamped(sent["system"]), unstamped(sent["messages"][0]["content"])]
    digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    assert first["prompt"]["hash"] == digest
    snapshot = MarketSnapshot.model_validate(first["snapshot"]).as_sent()
    snapshot.pop("agent_memory", None)
    assert sent_json_bytes(compact(snapshot)).decode() in sent["messages"][0]["content"][-1]["text"]
