"""The operator's API on loopback (real uvicorn, aiohttp client), served on a state dir's files
(as ``vigil serve``): auth on every data route, bad input -> 4xx with a reason, the journal's
records, the notes edit validated like a file edit."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from fakes.api_support import (
    T0_MS,
    IdleDaemon,
    Served,
    decision_line,
    serve_api,
)

from api import models as api_models
from api.auth import resolve_token
from api.bodylimit import MAX_BODY_BYTES
from api.server import ENDPOINT_FILE_NAME
from broker.trading_state import TradingSwitch
from core.clock import VirtualClock
from core.errors import RefuseToStartError
from runner.api_wiring import SwitchControl
from state.edit_checks import NOTES_MAX_CHARS
from state.models import parse_state_bytes, render_state
from state.store import RunnerStateStore
from state.trading import HALTED, REASON_MAX_CHARS, TradingState

DATA_ROUTES = [
    ("GET", "/api/status"),
    ("GET", "/api/positions"),
    ("GET", "/api/trades"),
    ("GET", "/api/decisions"),
    ("GET", "/api/memory"),
    ("PUT", "/api/memory/notes"),
    ("POST", "/api/trading/halt"),
    ("POST", "/api/trading/resume"),
]


async def test_every_data_route_needs_the_token_and_healthz_does_not(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        for method, path in DATA_ROUTES:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
                async with api.session.request(method, api.url + path, headers=headers) as r:
                    assert r.status == 401, (method, path, headers)
                    assert (await r.json())["detail"]
        async with api.session.get(api.url + "/healthz") as r:
            assert r.status == 200
            assert (await r.json())["ok"] is True
        # the published endpoint lets `vigil status` find the API; it goes when the server stops
        published = json.loads((state_dir / ENDPOINT_FILE_NAME).read_text())
        assert published == {"url": api.url, "pid": os.getpid()}
    assert not (state_dir / ENDPOINT_FILE_NAME).exists()


async def test_status_from_the_files_says_what_needs_a_daemon(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        code, body = await api.get("/api/status")
    assert code == 200 and isinstance(body, dict)
    assert body["source"] == "state_dir"
    assert body["loops"] is None and "daemon" in body["unavailable"]["loops"]
    # runner_state.json says it: vigil serve said "this build has no trading state" (null)
    assert body["trading"] == {"state": "active", "reason": "", "changed_at_ms": None}
    assert "trading" not in body["unavailable"]
    assert body["equity_usd"] == pytest.approx(9160.0 + 0.4 * 2200.0)
    assert body["open_positions"] == 1
    assert body["last_decision"]["decision_id"] == f"d{T0_MS + 4 * 60_000}-4"
    # a stopped run's "now" is its last decision, as vigil status has it: the wall clock's day
    # left a replay's or a simulated run's cost table empty ("days": [])
    assert body["now_ms"] == T0_MS + 4 * 60_000
    assert body["cost"]["today"]["total"]["decisions"] == 10  # its lines: 5 decisions, 5 reviews
    assert [day["day"] for day in body["cost"]["days"]] == ["2025-03-01"]


async def test_status_from_the_files_reads_a_halt_from_runner_state(state_dir: Path) -> None:
    """A stopped daemon's halt, or one ``vigil trading halt`` wrote, as ``vigil status`` shows it."""
    path = state_dir / "runner_state.json"
    state, _ = parse_state_bytes(path.read_bytes())
    halt = TradingState(mode=HALTED, reason="broker disagrees", since_ms=T0_MS, by="cli")
    path.write_bytes(render_state(state.model_copy(update={"trading": halt})))
    async with serve_api(state_dir) as api:
        _, halted = await api.get("/api/status")
        path.write_bytes(b"{not json")
        _, broken = await api.get("/api/status")
    assert isinstance(halted, dict) and isinstance(broken, dict)
    assert halted["trading"] == {
        "state": "halted",
        "reason": "broker disagrees",
        "changed_at_ms": T0_MS,
    }
    assert broken["trading"]["state"] is None
    assert "runner_state.json" in broken["unavailable"]["trading"]


async def test_positions_carry_unrealised_pnl(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        code, body = await api.get("/api/positions")
    assert code == 200 and isinstance(body, dict)
    (eth,) = body["positions"]
    assert eth["ticker"] == "ETH/USDT" and eth["entry_price"] == pytest.approx(2100.0)
    assert eth["unrealised_pnl_usd"] == pytest.approx(40.0)
    assert eth["unrealised_pnl_pct"] == pytest.approx(4.7619, abs=1e-3)
    assert body["starting_cash_usd"] == 10000.0


async def test_trades_are_the_journal_rows(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        code, body = await api.get("/api/trades")
        code_since, since = await api.get("/api/trades", since=T0_MS + 60_000)
    assert code == code_since == 200
    assert isinstance(body, dict) and isinstance(since, dict)
    assert [t["client_order_id"] for t in body["trades"]] == ["c1", "c2"]
    assert [t["client_order_id"] for t in since["trades"]] == ["c2"]


async def test_decisions_page_forward_and_newest(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        _, newest = await api.get("/api/decisions", limit=2)
        _, first = await api.get("/api/decisions", since=0, limit=3)
        assert isinstance(first, dict)
        _, rest = await api.get("/api/decisions", since=first["next_since"], limit=10)
    assert isinstance(newest, dict) and isinstance(rest, dict)
    assert [d["at_ms"] for d in newest["decisions"]] == [T0_MS + 180_000, T0_MS + 240_000]
    got = [d["at_ms"] for d in first["decisions"] + rest["decisions"]]
    assert got == [T0_MS + n * 60_000 for n in range(5)]  # review lines are not decisions
    assert first["decisions"][0]["decided_by"] == "fallback"


async def test_decisions_read_across_rotated_segments(state_dir: Path) -> None:
    import gzip

    logs = state_dir / "logs"
    old = b"".join(decision_line(100 + n, T0_MS - 86_400_000 + n) for n in range(3))
    (logs / "decisions.20250228T235959Z.jsonl.gz").write_bytes(gzip.compress(old))
    async with serve_api(state_dir) as api:
        _, page = await api.get("/api/decisions", since=0, limit=100)
    assert isinstance(page, dict)
    assert len(page["decisions"]) == 8 and page["segments_read"] == 2
    assert page["decisions"][0]["decision_id"].endswith("-100")


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/decisions", {"limit": "0"}),
        ("/api/decisions", {"limit": "100000"}),
        ("/api/decisions", {"since": "-5"}),
        ("/api/decisions", {"since": "yesterday"}),
        ("/api/trades", {"limit": "abc"}),
    ],
)
async def test_bad_query_is_a_422_with_the_reason(
    state_dir: Path, path: str, params: dict[str, str]
) -> None:
    async with (
        serve_api(state_dir) as api,
        api.session.get(api.url + path, headers=api.auth, params=params) as r,
    ):
        assert r.status == 422
        detail = (await r.json())["detail"]
    assert detail and detail[0]["loc"][0] == "query"


async def test_notes_edit_is_validated_like_a_file_edit(state_dir: Path) -> None:
    path = state_dir / "runner_state.json"
    before = path.read_bytes()
    async with serve_api(state_dir) as api:
        url = api.url + "/api/memory/notes"
        cases: list[tuple[object, str]] = [
            ({"agent_memory": "x" * 501}, "501 characters"),
            ({"notes": 5}, "string"),
            ({"mood": "happy"}, "mood"),
            ({}, "nothing to change"),
            ({"notes": "a\ud800b"}, "surrogate"),  # escaped in the body: was a 500
            ("not json", ""),
        ]
        for body, reason in cases:
            kwargs = {"data": body} if isinstance(body, str) else {"json": body}
            async with api.session.put(url, headers=api.auth, **kwargs) as r:
                assert r.status == 422, body
                assert reason in json.dumps(await r.json()), body
        assert path.read_bytes() == before  # a rejected edit leaves the file alone
        async with api.session.put(url, headers=api.auth, json={"notes": "flat until CPI"}) as r:
            assert r.status == 200
            result = await r.json()
        _, memory = await api.get("/api/memory")
    assert result["accepted"] and result["changed"] == ["notes"]
    assert not result["merged_by_daemon"]
    state, _ = parse_state_bytes(path.read_bytes())
    assert state.notes == "flat until CPI" and state.agent_memory == "Trend is up."
    assert isinstance(memory, dict) and memory["notes"] == "flat until CPI"
    # not "this build has no trading memory graph yet": memory.db is built, the API does not serve it
    assert memory["insights"] is None and "vigil memory list" in memory["unavailable"]["insights"]


async def test_a_notes_422_matches_its_documented_schema_in_both_shapes(state_dir: Path) -> None:
    """A body FastAPI refuses answers a list of errors, the edit's own check a reason: the
    schema documented only the reason, so the list violated it (found by schemathesis)."""
    async with serve_api(state_dir) as api:
        async with api.session.get(api.url + "/openapi.json") as r:
            schema = await r.json()
        answers: list[object] = []
        bodies: tuple[dict[str, str] | None, ...] = (None, {})  # no body at all; nothing to change
        for body in bodies:
            async with api.session.put(
                api.url + "/api/memory/notes", headers=api.auth, json=body
            ) as r:
                assert r.status == 422
                answers.append(await r.json())
    documented = schema["paths"]["/api/memory/notes"]["put"]["responses"]["422"]
    model = getattr(
        api_models, documented["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    )
    missing, nothing = (model.model_validate(answer).detail for answer in answers)
    assert isinstance(missing, list) and missing[0].loc == ["body"]
    assert isinstance(nothing, str) and "nothing to change" in nothing


async def test_unreadable_bodies_and_no_daemon_get_documented_statuses(state_dir: Path) -> None:
    """Bytes that are not JSON text are FastAPI's 400, a command without a daemon a 503: both
    answered a reason, neither was in the schema (found by schemathesis)."""
    path = state_dir / "runner_state.json"
    before = path.read_bytes()
    notes, halt = ("PUT", "/api/memory/notes"), ("POST", "/api/trading/halt")
    cases = [
        (notes, b'{"notes": "\xff"}', 400),  # not UTF-8
        (notes, b'{"notes": ' + b"9" * 5000 + b"}", 400),  # past int_max_str_digits
        (halt, b"[" * 100_000 + b"]" * 100_000, 400),  # past the recursion limit
        (halt, b'{"reason": "test"}', 503),  # no daemon
    ]
    async with serve_api(state_dir) as api:
        async with api.session.get(api.url + "/openapi.json") as r:
            schema = await r.json()
        for (method, route), body, expected in cases:
            async with api.session.request(
                method, api.url + route, data=body, headers=json_auth(api)
            ) as r:
                assert r.status == expected, (route, body[:20])
                assert (await r.json())["detail"]
            assert str(expected) in schema["paths"][route][method.lower()]["responses"], route
    assert path.read_bytes() == before


async def test_a_body_over_the_ceiling_is_a_413_and_changes_nothing(state_dir: Path) -> None:
    """Unbounded, 100 MB of notes were read whole and saved into runner_state.json."""
    path = state_dir / "runner_state.json"
    before = path.read_bytes()
    body = b'{"notes": "' + b"x" * MAX_BODY_BYTES + b'"}'

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for start in range(0, len(body), 65_536):
            yield body[start : start + 65_536]

    async with serve_api(state_dir) as api:
        url = api.url + "/api/memory/notes"
        for data in (body, streamed()):
            async with api.session.put(url, data=data, headers=json_auth(api)) as r:
                assert r.status == 413
                assert "over 1,048,576 bytes" in (await r.json())["detail"]
        async with api.session.put(url, json={"notes": "n" * 500_000}, headers=api.auth) as r:
            assert r.status == 200  # long notes under the ceiling are still taken
    state, _ = parse_state_bytes(path.read_bytes())
    assert state.notes == "n" * 500_000 and before != path.read_bytes()


async def test_the_longest_notes_a_body_can_carry_are_under_the_edit_cap(state_dir: Path) -> None:
    """The notes cap of a file edit (``NOTES_MAX_CHARS``) is what the body ceiling carries: the
    API, which judges its edit by the same rules, refuses no notes it refused none of before."""
    envelope = b'{"notes": ""}'
    notes = "n" * (MAX_BODY_BYTES - len(envelope))
    assert len(notes) <= NOTES_MAX_CHARS
    async with serve_api(state_dir) as api:
        body = json.dumps({"notes": notes}).encode()
        assert len(body) == MAX_BODY_BYTES
        url = api.url + "/api/memory/notes"
        async with api.session.put(url, data=body, headers=json_auth(api)) as r:
            assert r.status == 200, await r.text()
    state, _ = parse_state_bytes((state_dir / "runner_state.json").read_bytes())
    assert state.notes == notes


async def test_a_broken_state_file_is_a_409_naming_it(state_dir: Path) -> None:
    (state_dir / "runner_state.json").write_text("{ not json")
    async with serve_api(state_dir) as api:
        code, body = await api.get("/api/memory")
    assert code == 409 and "runner_state.json" in str(body)


async def test_trading_controls_need_a_daemon(state_dir: Path) -> None:
    async with (
        serve_api(state_dir) as api,
        api.session.post(api.url + "/api/trading/halt", headers=api.auth) as r,
    ):
        assert r.status == 503
        assert "no daemon" in (await r.json())["detail"]


async def test_an_invalid_body_echoing_half_a_surrogate_pair_is_a_422(state_dir: Path) -> None:
    """The reason's own check refuses it; FastAPI's error response then echoed it as UTF-8,
    which failed: a 500."""
    async with (
        serve_api(state_dir) as api,
        api.session.post(
            api.url + "/api/trading/halt", headers=api.auth, json={"reason": "a\udc80b"}
        ) as r,
    ):
        assert r.status == 422
        assert (await r.json())["detail"][0]["loc"] == ["body", "reason"]


@pytest.mark.parametrize("reason", ["audit\n12:00:00 INFO runner: resumed", "a\x00", "\x1b[2J"])
async def test_a_halt_reason_that_is_not_one_line_is_a_422_naming_the_character(
    state_dir: Path, reason: str
) -> None:
    """It is printed into one line of the log and the status line: a line break forged lines."""
    async with (
        serve_api(state_dir) as api,
        api.session.post(
            api.url + "/api/trading/halt", headers=api.auth, json={"reason": reason}
        ) as r,
    ):
        assert r.status == 422
        (issue,) = (await r.json())["detail"]
        assert issue["loc"] == ["body", "reason"] and "control character U+00" in issue["msg"]


async def test_a_halt_reason_may_be_as_long_as_the_cli_and_the_state_file_take(
    state_dir: Path,
) -> None:
    """The API capped a reason at 500 characters while the CLI and the state file take 2,000."""
    path = state_dir / "runner_state.json"
    store = RunnerStateStore(path, VirtualClock(T0_MS))
    store.load()
    switch = TradingSwitch(VirtualClock(T0_MS), store, lambda _line: None)
    url_of = "/api/trading/halt"
    control = SwitchControl(switch)
    async with serve_api(state_dir, daemon=IdleDaemon(), trading=control) as api:
        before = path.read_bytes()
        too_long = {"reason": "x" * (REASON_MAX_CHARS + 1)}
        async with api.session.post(api.url + url_of, headers=api.auth, json=too_long) as r:
            assert r.status == 422
            (issue,) = (await r.json())["detail"]
            assert issue["loc"] == ["body", "reason"] and "2000 characters" in issue["msg"]
        assert path.read_bytes() == before and not switch.halted
        longest = {"reason": "y" * REASON_MAX_CHARS}
        async with api.session.post(api.url + url_of, headers=api.auth, json=longest) as r:
            assert r.status == 200 and (await r.json())["reason"] == longest["reason"]
    state, _ = parse_state_bytes(path.read_bytes())
    assert (state.trading.mode, state.trading.reason) == ("halted", longest["reason"])


async def test_openapi_documents_the_routes(state_dir: Path) -> None:
    async with serve_api(state_dir) as api, api.session.get(api.url + "/openapi.json") as r:
        schema = await r.json()
    assert {"/api/status", "/api/decisions", "/api/memory/notes"} <= set(schema["paths"])
    assert "DecisionRecord" in schema["components"]["schemas"]


def test_no_token_off_loopback_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(RefuseToStartError, match="VIGIL_API_TOKEN"):
        resolve_token(None, "0.0.0.0", tmp_path)
    assert resolve_token("configured", "0.0.0.0", tmp_path) == "configured"
    made = resolve_token(None, "127.0.0.1", tmp_path)
    assert len(made) >= 32 and resolve_token(None, "127.0.0.1", tmp_path) == made
    assert (tmp_path / "api_token").stat().st_mode & 0o077 == 0


async def test_the_port_in_use_is_an_error_not_an_exit(state_dir: Path) -> None:
    from api.server import bind

    held = bind("127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            bind("127.0.0.1", held.getsockname()[1])
    finally:
        held.close()
    assert aiohttp  # the client library the tests use


async def test_metrics_and_stream_need_a_daemon(state_dir: Path) -> None:
    from api.stream import stream_routes

    async with serve_api(state_dir, extensions=[stream_routes(None)]) as api:
        for path in ("/metrics", "/api/decisions/stream"):
            async with api.session.get(api.url + path, headers=api.auth) as r:
                assert r.status == 503, path
                assert "no daemon" in (await r.json())["detail"]
            async with api.session.get(api.url + path) as r:
                assert r.status == 401, path


def json_auth(api: Served) -> dict[str, str]:
    return {**api.auth, "content-type": "application/json"}


@pytest.mark.parametrize("reason", ["", "   ", "\t", "\u200b"])
async def test_a_halt_reason_with_nothing_to_read_is_a_422_as_in_the_cli(
    state_dir: Path, reason: str
) -> None:
    """The API took a blank reason (only "" was refused, as too short) and halted with it."""
    path = state_dir / "runner_state.json"
    store = RunnerStateStore(path, VirtualClock(T0_MS))
    store.load()
    switch = TradingSwitch(VirtualClock(T0_MS), store, lambda _line: None)
    async with serve_api(state_dir, daemon=IdleDaemon(), trading=SwitchControl(switch)) as api:
        before = path.read_bytes()
        async with api.session.post(
            api.url + "/api/trading/halt", headers=api.auth, json={"reason": reason}
        ) as r:
            assert r.status == 422
            (issue,) = (await r.json())["detail"]
        assert issue["loc"] == ["body", "reason"]
        assert "is empty or only spaces: a halt needs a reason a person can read" in issue["msg"]
        assert path.read_bytes() == before and not switch.halted
