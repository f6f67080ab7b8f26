"""The dashboard when the API sheds its requests, as it does under load: a 503 or 429 with
Retry-After is asked again after that wait, a few times, before the page shows an error.

It showed the first one: a busy answer to the page's first read left it never ready, with an empty
memory editor (saving it would have emptied the notes); a busy answer to a save said "rejected"
for an edit never made; a 503 to the live stream from an API process whose daemon did not answer
left the page "not live" until reloaded. The busy answers here are the API's own: a slot of its
admission control (one request at a time) is held across the chosen requests, and the stream's
503 is the API process's own answer when the daemon does not answer (``api.proxy.unreachable``).
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cdp_support import open_browser
from dashboard_support import save_notes
from fakes.api_support import serve_api, write_state_dir
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.admission import Admission
from api.app import ApiContext
from api.asgi import send_answer
from api.auth import BearerAuth
from api.config import ApiConfig
from api.proxy import STREAM_PATH, unreachable
from api.stream import stream_routes

pytestmark = pytest.mark.e2e

DECISIONS = ("GET", "/api/decisions")
SAVE = ("PUT", "/api/memory/notes")
STREAM = ("GET", STREAM_PATH)
#: dashboard.js's RETRIES: a shed request is asked this many times more before the page says so
RETRIES = 3
#: the page's own waits (30 s in the other browser tests), with room for a loaded host
PAGE_WAIT_SECS = 60.0


@dataclass
class Asked:
    at: float  # time.monotonic() when the request came in
    answered: float = 0.0
    status: int = 0


@dataclass
class Shedding:
    """An extension that sheds the first ``refusals[(method, path)]`` requests of each: the
    admission control's only slot is held across them (the API then answers its own 503 with
    Retry-After), and the stream is answered as the API process answers when the daemon does not.
    Every request to those paths is kept in ``asked``."""

    refusals: dict[tuple[str, str], int]
    asked: dict[tuple[str, str], list[Asked]] = field(default_factory=lambda: defaultdict(list))

    def __call__(self, app: FastAPI, _ctx: ApiContext, _auth: BearerAuth) -> None:
        app.add_middleware(_Shed, shedding=self, admission=app.state.admission)

    def statuses(self, key: tuple[str, str]) -> list[int]:
        return [a.status for a in self.asked[key]]


class _Shed:
    """Pure ASGI middleware, outside the API's own guards (an extension adds it last)."""

    def __init__(self, app: ASGIApp, *, shedding: Shedding, admission: Admission) -> None:
        self.app, self.shedding, self.admission = app, shedding, admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = (scope.get("method", ""), scope.get("path", ""))
        if scope["type"] != "http" or key not in self.shedding.refusals:
            await self.app(scope, receive, send)
            return
        asked = Asked(time.monotonic())
        self.shedding.asked[key].append(asked)

        async def noted(message: Message) -> None:
            if message["type"] == "http.response.start":
                asked.status, asked.answered = message["status"], time.monotonic()
            await send(message)

        left = self.shedding.refusals[key]
        self.shedding.refusals[key] = left - 1
        if left <= 0:
            await self.app(scope, receive, noted)
        elif key == STREAM:
            error = unreachable(ConnectionRefusedError())
            await send_answer(noted, error.status, error.body, error.headers)
        else:
            while not await self.admission.admit():  # the slot: the request below finds none
                pass
            try:
                await self.app(scope, receive, noted)
            finally:
                self.admission.release()


def _asked_again_after_retry_after(asked: list[Asked]) -> None:
    """Each retry came no sooner than the Retry-After (1 s) of the answer before it."""
    for refused, retry in itertools.pairwise(asked):
        assert refused.status == 503
        assert retry.at - refused.answered >= 0.9, (refused, retry)


@pytest.mark.timeout(240)
async def test_requests_the_api_sheds_are_asked_again_after_retry_after(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    shedding = Shedding({DECISIONS: 1, SAVE: 1, STREAM: 1})
    extensions = [shedding, stream_routes(None)]  # a state dir: no daemon streams
    config = ApiConfig(port=0, max_in_flight=1)
    async with (
        serve_api(state_dir, extensions=extensions, config=config) as api,
        open_browser(tmp_path / "profile") as page,
    ):
        await page.send("Page.navigate", url=f"{api.url}/dashboard#token={api.token}")
        await page.wait_for("document.body.dataset.state === 'ready'", PAGE_WAIT_SECS)
        await page.wait_for(
            "document.getElementById('stream-state').dataset.value === 'unavailable'",
            PAGE_WAIT_SECS,
        )
        problem_hidden = await page.evaluate("document.getElementById('problem').hidden")
        loaded_notes = await page.evaluate("document.getElementById('notes').value")
        stream_text = await page.evaluate("document.getElementById('stream-state').textContent")
        saved = await save_notes(page, "watch ETH")
        thrown = [e for e in page.errors() if e["source"] == "exception"]
        status, memory = await api.get("/api/memory")

    assert not thrown, thrown
    assert problem_hidden and loaded_notes == "watch SOL"
    assert shedding.statuses(DECISIONS) == [503, 200]
    assert saved[0] == "accepted", saved
    assert shedding.statuses(SAVE) == [503, 200]
    assert status == 200 and isinstance(memory, dict) and memory["notes"] == "watch ETH"
    # asked again, then the state dir's own answer: no daemon streams here
    assert shedding.statuses(STREAM) == [503, 503]
    assert "no daemon is running" in stream_text, stream_text
    for key in (DECISIONS, SAVE, STREAM):
        _asked_again_after_retry_after(shedding.asked[key])


@pytest.mark.timeout(240)
async def test_an_api_that_stays_busy_is_said_after_a_few_tries(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    shedding = Shedding({SAVE: 1_000})
    config = ApiConfig(port=0, max_in_flight=1)
    async with (
        serve_api(state_dir, extensions=[shedding], config=config) as api,
        open_browser(tmp_path / "profile") as page,
    ):
        await page.send("Page.navigate", url=f"{api.url}/dashboard#token={api.token}")
        await page.wait_for("document.body.dataset.state === 'ready'", PAGE_WAIT_SECS)
        value, shown = await save_notes(page, "watch ETH")
        status, memory = await api.get("/api/memory")

    assert (value, shown.startswith("rejected: the API is busy")) == ("rejected", True), shown
    assert shedding.statuses(SAVE) == [503] * (1 + RETRIES)
    _asked_again_after_retry_after(shedding.asked[SAVE])
    assert status == 200 and isinstance(memory, dict)
    assert memory["notes"] == "watch SOL"  # never saved
