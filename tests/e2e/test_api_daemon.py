"""The operator's API of a real ``vigil run --sim``: status from the live daemon, /metrics parsed
by the Prometheus text parser with counters moving, and a decision made after subscribing
arriving on the SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from fakes.api_client import sse_events, wait_for_api
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop
from fakes.journal_lines import journal_text
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, _), v in parsed.items() if n == name)


@pytest.mark.timeout(240)
async def test_status_metrics_and_stream_of_a_sim_daemon(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = daemon_env(state, VIGIL_SIM__SPEED="600", **LIGHT_MARKET)
    async with sim_daemon(env, tmp_path / "daemon.log") as proc:
        url, token = await wait_for_api(state, proc)
        auth = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=auth) as http:
            async with http.get(url + "/api/status") as r:
                assert r.status == 200
                status = await r.json()
            assert status["source"] == "daemon"
            assert {loop["name"] for loop in status["loops"]} >= {"market", "api", "heartbeat"}
            assert status["agent"]["enabled"] is False  # no key: the fallback decides
            assert status["equity_usd"] == pytest.approx(10_000, rel=0.05)

            first = await _scrape_until(http, url, lambda m: total(m, "vigil_ticks_total") > 0)

            async with http.get(url + "/api/decisions", params={"limit": "500"}) as before:
                known = {d["decision_id"] for d in (await before.json())["decisions"]}
            async with http.get(
                url + "/api/decisions/stream", timeout=aiohttp.ClientTimeout(total=90)
            ) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                events = sse_events(r)
                assert (await anext(events)) == ("comment", "subscribed")
                kind, data = await asyncio.wait_for(_next_event(events), timeout=90)
            streamed = json.loads(data)
            assert kind == "decision"
            assert streamed["decision_id"] not in known  # journaled after we subscribed
            assert streamed["decided_by"] == "fallback"

            second = await _scrape_until(
                http,
                url,
                lambda m: total(m, "vigil_ticks_total") > total(first, "vigil_ticks_total"),
            )
            async with http.get(url + "/api/decisions", params={"limit": "50"}) as r:
                journaled = [d["decision_id"] for d in (await r.json())["decisions"]]

            async with http.post(url + "/api/trading/halt", json={"reason": "operator test"}) as r:
                assert r.status == 200, await r.text()
                assert (await r.json())["state"] == "halted"
            async with http.get(url + "/api/status") as r:
                assert (await r.json())["trading"]["reason"] == "operator test"
            async with http.post(url + "/api/trading/resume") as r:
                assert r.status == 200 and (await r.json())["state"] == "active"
        assert streamed["decision_id"] in journaled  # the stream sends what the journal holds
        assert total(second, "vigil_ticks_total") > total(first, "vigil_ticks_total") > 0
        assert total(second, "vigil_decisions_total") > total(first, "vigil_decisions_total")
        assert total(second, "vigil_decision_latency_seconds_count") >= 1
        assert total(second, "vigil_gate_evaluations_total") > 0
        assert second[("vigil_breaker_state", (("state", "closed"),))] == 1.0
        assert total(second, "vigil_equity_usd") > 0
        assert await stop(proc) == 0
    assert not (state / "api.json").exists()
    changes = [
        json.loads(line)
        for line in journal_text(state / "logs" / "decisions.jsonl").splitlines()
        if '"type":"trading_state"' in line
    ]
    assert [(c["mode"], c["by"]) for c in changes] == [("halted", "api"), ("active", "api")]


Parsed = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _scrape_until(
    http: aiohttp.ClientSession,
    url: str,
    done: Callable[[Parsed], bool],
    timeout_secs: float = 90.0,
) -> Parsed:
    """Scrape /metrics until ``done(parsed)``: the daemon connects its market after the API."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_secs
    while True:
        async with http.get(url + "/metrics") as r:
            assert r.status == 200 and r.content_type == "text/plain"
            parsed = samples(await r.text())
        if done(parsed) or loop.time() > deadline:
            return parsed
        await asyncio.sleep(0.5)


async def _next_event(events: AsyncIterator[tuple[str, str]]) -> tuple[str, str]:
    async for kind, data in events:
        if kind != "comment":
            return kind, data
    raise AssertionError("the stream ended")
