"""The dashboard in headless Chromium against a real ``vigil run --sim``.

A person opens ``/dashboard``, types the token once into the page, and sees the daemon: the
figures in the DOM are checked against the API, a decision made after the page opened arrives on
the live stream, the memory editor saves through ``PUT /api/memory/notes``, the halt and resume
buttons act on the daemon, a reload keeps the token (sessionStorage). A screenshot is saved and
must show the charts; any console error, uncaught exception, failed load or CSP violation fails.
Set VIGIL_KEEP_SCREENSHOT=1 to also copy it to runs/screenshots/dashboard.png.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Final

import aiohttp
import numpy as np
import pytest
from browser_support import decode_png, read_png_header
from cdp_support import Page, open_browser
from fakes.api_client import ask, wait_for_api
from fakes.daemon import LIGHT_MARKET, daemon_env, sim_daemon, stop

pytestmark = pytest.mark.e2e

WIDTH: Final = 1280
HEIGHT: Final = 1800
SCREENSHOTS_DIR: Final = Path(__file__).resolve().parents[2] / "runs" / "screenshots"
CHARTS_DRAWN_JS: Final = (
    "/ decisions$/.test(document.getElementById('points').textContent)"
    " && document.querySelectorAll('#equity-chart canvas').length > 0"
)
FIGURES_JS: Final = """(() => {
  const v = (id) => document.getElementById(id).dataset.value;
  return {
    equity: v("equity"), open_positions: v("open-positions"), trading: v("trading-state"),
    breaker: v("breaker"), budget: v("budget"), budget_text: document.getElementById("budget").textContent,
    max_drawdown: v("max-drawdown"), gate_passes: v("gate-passes"), stream: v("stream-state"),
    source: v("source"),
    tickers: [...document.querySelectorAll("#positions tbody tr[data-ticker]")].map((r) => r.dataset.ticker),
    decisions: [...document.querySelectorAll("#decisions li")].map((li) => li.dataset.decisionId),
    fresh: [...document.querySelectorAll("#decisions li.fresh")].map((li) => [li.dataset.decisionId, li.dataset.decidedBy]),
    canvases: document.querySelectorAll("#equity-chart canvas, #drawdown-chart canvas").length,
    token_in_url: location.href.includes("token"),
    login_shown: document.getElementById("login").offsetParent !== null,
  };
})()"""


class Api:
    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url = http, url

    async def get(self, path: str) -> Any:
        # the page polls beside the test: on a loaded host the API sheds some of the requests
        status, body = await ask(self.http, "GET", self.url + path)
        assert status == 200, body
        return body


@pytest.mark.timeout(300)
async def test_the_dashboard_shows_the_daemon_and_acts_on_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = daemon_env(state, VIGIL_SIM__SPEED="600", **LIGHT_MARKET)
    async with sim_daemon(env, tmp_path / "daemon.log") as proc:
        url, token = await wait_for_api(state, proc)
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession(headers=headers) as http,
            open_browser(tmp_path / "profile", WIDTH, HEIGHT) as page,
        ):
            api = Api(http, url)
            await _until(lambda: _has_equity(api))
            await page.send("Page.navigate", url=url + "/dashboard")
            await page.wait_for("!document.getElementById('login').hidden", 30)
            await _type(page, "token", token)
            await page.evaluate("document.getElementById('login').requestSubmit()")
            await page.wait_for("document.body.dataset.state === 'ready'", 30)
            assert await page.evaluate(
                f"sessionStorage.getItem('vigil.api_token') === {json.dumps(token)}"
            )

            # a decision journaled after the page subscribed arrives live
            await page.wait_for(
                "document.getElementById('stream-state').dataset.value === 'live'", 30
            )
            await page.wait_for("document.querySelector('#decisions li.fresh') !== null", 120)
            newest = await api.get("/api/decisions?limit=1")
            await _refreshed_after(page, newest["decisions"][-1]["at_ms"])
            figures, status, account, equity = await _consistent(page, api)
            journal = await api.get("/api/decisions?limit=500")

            await _type(page, "notes", "watch SOL funding (from the dashboard)")
            await page.evaluate("document.getElementById('memory').requestSubmit()")
            await page.wait_for("document.getElementById('memory-result').dataset.value !== ''", 20)
            result = await page.evaluate("document.getElementById('memory-result').dataset.value")
            memory = await api.get("/api/memory")

            await page.evaluate("document.getElementById('halt').click()")
            await _until(lambda: _trading_is(api, "halted"))
            await page.evaluate("document.getElementById('resume').click()")
            await _until(lambda: _trading_is(api, "active"))

            await page.send("Page.reload")
            await page.wait_for("document.body.dataset.state === 'ready'", 30)
            await page.wait_for(CHARTS_DRAWN_JS, 30)  # after the first equity read
            legend_time = await _hover_time(page)
            png_path = tmp_path / "dashboard.png"
            png = await page.screenshot(png_path)
            errors = [e for e in page.errors() if not _shed(e)]
        assert await stop(proc) == 0

    assert not errors, errors
    assert figures["source"] == "daemon" and not figures["token_in_url"]
    assert not figures["login_shown"]
    assert float(figures["equity"]) == pytest.approx(account["equity_usd"], rel=0.01)
    assert figures["tickers"] == [p["ticker"] for p in account["positions"]]
    assert int(figures["open_positions"]) == len(account["positions"])
    assert figures["trading"] == status["trading"]["state"] == "active"
    assert figures["breaker"] == status["agent"]["breaker"] == "closed"
    assert status["agent"]["budget_left_today_usd"] is None
    assert (figures["budget"], figures["budget_text"]) == ("", "no budget")
    assert float(figures["max_drawdown"]) == pytest.approx(equity["max_drawdown_pct"], abs=0.5)
    assert int(figures["gate_passes"]) <= status["gate"]["passes"]
    assert figures["canvases"] >= 2
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", legend_time), legend_time  # 24 h UTC
    journaled = {d["decision_id"]: d["decided_by"] for d in journal["decisions"]}
    assert figures["fresh"], "no decision arrived on the stream"
    for decision_id, decided_by in figures["fresh"]:
        assert journaled[decision_id] == decided_by == "fallback"
    assert set(figures["decisions"]) <= set(journaled)
    assert result == "accepted"
    assert memory["notes"] == "watch SOL funding (from the dashboard)"

    header = read_png_header(png)
    assert WIDTH - 20 <= header.width <= WIDTH and header.height >= HEIGHT  # less a scrollbar
    pixels = decode_png(png)
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 200  # charts, not a blank page
    if os.environ.get("VIGIL_KEEP_SCREENSHOT"):
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png_path, SCREENSHOTS_DIR / "dashboard.png")


async def _hover_time(page: Page) -> str:
    """The time the equity chart's legend shows with the mouse over the chart's middle."""
    x, y = await page.evaluate(
        "(() => { const r = document.querySelector('#equity-chart .u-over').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    await page.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    return str(
        await page.evaluate(
            "document.querySelector('#equity-chart .u-legend .u-series:first-child .u-value')"
            ".textContent"
        )
    )


async def _type(page: Page, element_id: str, text: str) -> None:
    """Focus a field, select what is in it and type over it, as a person would."""
    await page.evaluate(
        f"(e => {{ e.focus(); e.select(); }})(document.getElementById('{element_id}'))"
    )
    await page.send("Input.insertText", text=text)


async def _consistent(page: Page, api: Api) -> tuple[Any, Any, Any, Any]:
    """The page's figures and the API's, read close together; the daemon runs at 600x, so a
    position may open between the two reads: read again after the page's next refresh until the
    positions agree."""
    for _ in range(5):
        figures = await page.evaluate(FIGURES_JS)
        status, account, equity = await asyncio.gather(
            api.get("/api/status"), api.get("/api/positions"), api.get("/api/equity")
        )
        if figures["tickers"] == [p["ticker"] for p in account["positions"]]:
            break
        await _refreshed_after(page, int(status["now_ms"]))
    return figures, status, account, equity


async def _refreshed_after(page: Page, at_ms: int) -> None:
    """Until the page shows a status the daemon gave after its instant ``at_ms`` (the page reads
    status and positions together, every 3 s)."""
    await page.wait_for(f"Number(document.getElementById('clock').dataset.value) > {at_ms}", 60)


def _shed(entry: dict[str, Any]) -> bool:
    """The browser's log line for a request the API shed (503 or 429), as it may beside other
    work: the page asks again after the Retry-After (``test_dashboard_busy``)."""
    shed = re.search(r"responded with a status of (503|429)\b", entry["text"])
    return entry["source"] == "network" and shed is not None


async def _has_equity(api: Api) -> bool:
    return bool((await api.get("/api/equity"))["points"])


async def _trading_is(api: Api, state: str) -> bool:
    return bool((await api.get("/api/status"))["trading"]["state"] == state)


async def _until(check: Any, timeout_secs: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_secs
    while not await check():
        if loop.time() > deadline:
            raise TimeoutError(f"{check} stayed false for {timeout_secs} s")
        await asyncio.sleep(0.5)
