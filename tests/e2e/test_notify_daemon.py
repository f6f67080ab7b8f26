"""Notifications of a real ``vigil run --sim`` reach a webhook receiver on loopback: a fill and
an exit (tight stops make an exit follow the entry), trading halted and resumed over the API, in
the generic JSON, Slack and Telegram shapes, each hook getting only the events it asked for."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import aiohttp
import pytest
from fakes.api_client import wait_for_api
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop
from fakes.webhook_receiver import webhook_receiver

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
async def test_a_sim_run_notifies_its_fill_exit_and_halt(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with webhook_receiver() as rx:
        hooks = [
            {"url": rx.url + "/generic"},
            {"url": rx.url + "/slack", "kind": "slack", "events": ["exit"]},
            {"url": rx.url + "/bot42:secret/sendMessage", "kind": "telegram", "chat_id": "7"},
        ]
        env = daemon_env(
            state,
            VIGIL_SIM__START="2025-03-01T03:00:00Z",  # the fallback buys ETH about 2 h later
            # as restart safety's: at 1200x, beside another make test, the daemon fell behind
            # its clock (0.2 s of real time is 4 simulated minutes), placed its BUYs at stale
            # prices, and they expired unfilled, so no fill came within the wait
            VIGIL_SIM__SPEED="600",
            # ETH alone (the one it buys) on a light market: beside another suite (load 6-7 on
            # 2 cores) the daemon on Binance's 250 ms updates for three tickers saw no market
            # data for 300-1,791 simulated seconds at a time and no fill came within the wait
            VIGIL_MARKET__TICKERS='["ETH/USDT"]',
            **LIGHT_MARKET,
            VIGIL_TRACKER__STOP_LOSS_PCT="-0.2",
            VIGIL_TRACKER__TRAILING_ARM_PCT="0.2",
            VIGIL_TRACKER__TRAILING_STOP_PCT="0.2",
            VIGIL_NOTIFY__WEBHOOKS=json.dumps(hooks),
            VIGIL_NOTIFY__WATCH_INTERVAL_SECS="60",
        )
        log = tmp_path / "daemon.log"
        async with sim_daemon(env, log) as proc:
            url, token = await wait_for_api(state, proc)
            await rx.wait_until(lambda: {"fill", "exit"} <= set(rx.events("/generic")), 200)
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
                async with http.post(url + "/api/trading/halt", json={"reason": "notify test"}):
                    pass
                await rx.wait_until(lambda: "trading_halted" in rx.events("/generic"), 60)
                async with http.post(url + "/api/trading/resume"):
                    pass
                await rx.wait_until(lambda: "trading_resumed" in rx.events("/generic"), 60)
            assert await stop(proc) == 0
        text = log.read_text()
    assert "secret" not in text  # the webhook URL holds a token: never logged

    generic = rx.received["/generic"]
    with (state / "logs" / "trades.csv").open() as rows:
        filled = {row["client_order_id"]: row for row in csv.DictReader(rows)}
    fills = [n for n in generic if n["event"] == "fill"]
    for n in fills:
        row = filled[n["fields"]["client_order_id"]]
        assert (n["fields"]["ticker"], n["fields"]["side"]) == (row["ticker"], row["side"])
        assert n["fields"]["price"] == pytest.approx(float(row["price"]))
    exits = [n for n in generic if n["event"] == "exit"]
    assert exits[0]["fields"]["ticker"] in {n["fields"]["ticker"] for n in fills}
    halted = next(n for n in generic if n["event"] == "trading_halted")
    assert halted["text"] == "trading HALTED: notify test"

    slack = [body["text"] for body in rx.received["/slack"]]
    assert slack and all(text.startswith("vigil exit ") for text in slack)
    telegram = rx.received["/bot42:secret/sendMessage"]
    assert {body["chat_id"] for body in telegram} == {"7"}
    assert any(body["text"].startswith("vigil fill ") for body in telegram)
