"""The API under many clients, on loopback (real uvicorn, aiohttp): admission control (``[api]
max_in_flight``: beyond it a request waits, then 503 with Retry-After; /healthz is never held) and
the answer cache (a decision journaled is in the very next answer; live figures are kept at most
``[api] live_cache_ms``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes.api_support import (
    T0_MS,
    TOKEN,
    IdleDaemon,
    decision_line,
    serve_api,
    write_state_dir,
)
from fastapi import FastAPI

from api.admission import Admission
from api.app import ApiContext
from api.auth import BearerAuth
from api.config import ApiConfig

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Blocker:
    """An extension route that holds its slot until released: a slow request in flight."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.admission: Admission | None = None

    def __call__(self, app: FastAPI, _ctx: ApiContext, _auth: BearerAuth) -> None:
        self.admission = app.state.admission

        @app.get("/test/slow")
        async def slow() -> dict[str, bool]:
            self.entered.set()
            await self.release.wait()
            return {"ok": True}


async def until(condition: object) -> None:
    async with asyncio.timeout(10):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.005)


async def test_beyond_the_limit_a_request_is_503_with_retry_after(state_dir: Path) -> None:
    blocker = Blocker()
    config = ApiConfig(port=0, max_in_flight=1, admission_wait_ms=50, busy_retry_after_secs=3)
    async with serve_api(state_dir, extensions=[blocker], config=config) as api:
        slow = asyncio.create_task(api.session.get(api.url + "/test/slow", headers=AUTH))
        await blocker.entered.wait()
        async with api.session.get(api.url + "/api/status", headers=AUTH) as r:
            assert r.status == 503
            assert r.headers["Retry-After"] == "3"
            assert "busy" in (await r.json())["detail"]
        async with api.session.get(api.url + "/healthz") as r:
            assert r.status == 200  # a liveness probe is never held behind a busy dashboard
        blocker.release.set()
        async with await slow as r:
            assert r.status == 200
        async with api.session.get(api.url + "/api/status", headers=AUTH) as r:
            assert r.status == 200  # the slot came back
    assert blocker.admission is not None and blocker.admission.refused == 1
    assert blocker.admission.in_flight == 0


async def test_a_waiting_request_gets_the_slot_when_it_frees(state_dir: Path) -> None:
    blocker = Blocker()
    config = ApiConfig(port=0, max_in_flight=1, admission_wait_ms=30_000)
    async with serve_api(state_dir, extensions=[blocker], config=config) as api:
        slow = asyncio.create_task(api.session.get(api.url + "/test/slow", headers=AUTH))
        await blocker.entered.wait()
        admission = blocker.admission
        assert admission is not None
        waiting = asyncio.create_task(api.get("/api/decisions"))
        await until(lambda: admission.waiting == 1)
        assert not waiting.done()
        blocker.release.set()
        code, _ = await waiting
        async with await slow as r:
            assert r.status == 200
    assert code == 200 and admission.refused == 0


def test_the_limit_is_config_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from runner.config import load_settings

    (tmp_path / "vigil.toml").write_text("[api]\nmax_in_flight = 2\nlive_cache_ms = 250\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VIGIL_CONFIG_FILE", raising=False)
    monkeypatch.setenv("VIGIL_API__ADMISSION_WAIT_MS", "400")
    api = load_settings().api
    assert (api.max_in_flight, api.live_cache_ms, api.admission_wait_ms) == (2, 250, 400)
    assert ApiConfig().max_in_flight == 4


async def test_a_decision_journaled_is_in_the_next_answer(state_dir: Path) -> None:
    # live figures kept for a minute: the journal's answers still follow the file
    config = ApiConfig(port=0, live_cache_ms=60_000)
    async with serve_api(state_dir, config=config) as api:
        before = [await api.get(p) for p in ("/api/status", "/api/decisions", "/api/equity")]
        at_ms = T0_MS + 3_600_000
        with (state_dir / "logs" / "decisions.jsonl").open("ab") as journal:
            journal.write(decision_line(99, at_ms, equity_usd=10_050.0))
        code, status = await api.get("/api/status")
        _, page = await api.get("/api/decisions")
        _, equity = await api.get("/api/equity")
    assert all(code == 200 for code, _ in before) and code == 200
    assert before[0][1]["last_decision"]["at_ms"] < at_ms  # type: ignore[index]
    assert status["last_decision"]["decision_id"] == f"d{at_ms}-99"  # type: ignore[index]
    assert page["decisions"][-1]["at_ms"] == at_ms  # type: ignore[index]
    assert equity["equity_usd"][-1] == 10_050.0  # type: ignore[index]


class CountingDaemon(IdleDaemon):
    """``api.ports.LiveDaemon`` whose clock moves on every read: tells a kept answer apart."""

    def __init__(self) -> None:
        self.reads = 0

    def now_ms(self) -> int:
        self.reads += 1
        return T0_MS + self.reads


@pytest.mark.parametrize(("live_cache_ms", "computed"), [(60_000, 1), (0, 6)])
async def test_live_figures_are_computed_at_most_once_per_interval(
    state_dir: Path, live_cache_ms: int, computed: int
) -> None:
    daemon = CountingDaemon()
    config = ApiConfig(port=0, live_cache_ms=live_cache_ms)
    async with serve_api(state_dir, daemon=daemon, config=config) as api:
        answers = [await api.get("/api/status") for _ in range(6)]
    assert all(code == 200 for code, _ in answers)
    assert len({body["now_ms"] for _, body in answers}) == computed  # type: ignore[index]
    assert daemon.reads == computed


async def test_over_the_request_ceiling_is_429_with_retry_after_and_healthz_is_exempt(
    tmp_path: Path,
) -> None:
    write_state_dir(tmp_path)
    # one request per 100 s: the second comes sooner on any machine
    async with serve_api(tmp_path, config=ApiConfig(port=0, max_requests_per_sec=0.01)) as api:
        statuses = []
        for _ in range(3):
            async with api.session.get(api.url + "/api/trades", headers=api.auth) as r:
                statuses.append(r.status)
                if r.status == 429:
                    assert r.headers["Retry-After"] == "100"
                    assert "requests a second" in (await r.json())["detail"]
        assert statuses == [200, 429, 429]
        for _ in range(10):
            async with api.session.get(api.url + "/healthz") as r:
                assert r.status == 200


async def test_requests_without_the_token_never_take_the_operators_share_of_the_ceiling(
    tmp_path: Path,
) -> None:
    """Any local process could spend the one bucket with requests only ever answered 401, and
    the operator's halts got 429 (six clients without a token: 12 of 17 halts refused)."""
    write_state_dir(tmp_path)
    async with serve_api(tmp_path, config=ApiConfig(port=0, max_requests_per_sec=0.01)) as api:
        anonymous = []
        for headers in ({}, {"Authorization": "Bearer wrong"}, {}):
            async with api.session.get(api.url + "/api/trades", headers=headers) as r:
                anonymous.append(r.status)
        async with api.session.get(api.url + "/api/trades", headers=api.auth) as r:
            operator = r.status
        async with api.session.get(api.url + "/api/trades", headers=api.auth) as r:
            operator_again = r.status
    assert anonymous == [401, 429, 429]  # their own bucket, and it ran dry
    assert (operator, operator_again) == (200, 429)  # the operator's, still full, then spent
