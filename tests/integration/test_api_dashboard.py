"""The dashboard's routes on loopback: the page and its vendored chart library without a token
(they hold no data), ``/`` redirecting to it, and ``GET /api/equity`` (token, across rotated and
gzipped segments, growing with the live file, bounded points, bad input a 422)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.api_support import T0_MS, decision_line, serve_api, write_state_dir

from api.dashboard import CSP

DAY_MS = 86_400_000


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    write_state_dir(tmp_path / "state", decisions=0)
    return tmp_path / "state"


async def test_the_page_and_its_files_need_no_token(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        async with api.session.get(api.url + "/dashboard") as r:
            assert r.status == 200 and r.content_type == "text/html"
            assert r.headers["content-security-policy"] == CSP
            page = await r.text()
        async with api.session.get(api.url + "/", allow_redirects=False) as r:
            assert r.status == 307 and r.headers["location"] == "/dashboard"
        for name in ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"):
            assert f"/static/{name}" in page
            async with api.session.get(api.url + f"/static/{name}") as r:
                assert r.status == 200, name
                assert len(await r.read()) > 500, name
        async with api.session.get(api.url + "/static/uPlot.LICENSE") as r:
            assert "MIT" in await r.text()
        async with api.session.get(api.url + "/static/../app.py") as r:
            assert r.status == 404
        async with api.session.get(api.url + "/api/equity") as r:
            assert r.status == 401


async def test_equity_reads_every_segment_and_follows_the_live_file(state_dir: Path) -> None:
    logs = state_dir / "logs"
    old = [decision_line(n, T0_MS - DAY_MS + n, 10_000.0 + n) for n in range(3)]
    (logs / "decisions.20250228T235959Z.jsonl.gz").write_bytes(gzip.compress(b"".join(old)))
    live = logs / "decisions.jsonl"
    live.write_bytes(
        decision_line(10, T0_MS, 9_000.0)  # a 10.2 % drawdown from the 10,002 peak
        + decision_line(11, T0_MS + 1, None)  # no portfolio value: not a point
        + b'{"type":"review","at_ms":1,"tickers":[],"decided_by":"fallback"}\n'
    )
    async with serve_api(state_dir) as api:
        status, body = await api.get("/api/equity")
        assert status == 200 and isinstance(body, dict)
        assert body["points"] == 4
        assert body["equity_usd"] == [10_000.0, 10_001.0, 10_002.0, 9_000.0]
        assert body["start_equity_usd"] == 10_000.0
        assert body["drawdown_pct"][-1] == pytest.approx(100 * (1 - 9_000 / 10_002), abs=1e-4)
        assert body["max_drawdown_pct"] == body["drawdown_pct"][-1]
        with live.open("ab") as out:
            out.write(decision_line(12, T0_MS + 2, 9_500.0) + b'{"type":"decis')  # + a torn tail
        status, grown = await api.get("/api/equity")
    assert isinstance(grown, dict)
    assert grown["points"] == 5 and grown["equity_usd"][-1] == 9_500.0


async def test_equity_is_thinned_keeping_the_extremes(state_dir: Path) -> None:
    values = [10_000.0 + (n % 50) for n in range(3_000)]
    values[1_234] = 7_000.0  # the trough must survive thinning
    (state_dir / "logs" / "decisions.jsonl").write_bytes(
        b"".join(decision_line(n, T0_MS + n, v) for n, v in enumerate(values))
    )
    async with serve_api(state_dir) as api:
        _, body = await api.get("/api/equity", max_points=100)
        status, bad = await api.get("/api/equity", max_points=5)
    assert isinstance(body, dict) and isinstance(bad, dict)
    assert body["points"] == 3_000 and len(body["equity_usd"]) <= 110
    assert min(body["equity_usd"]) == 7_000.0 and body["at_ms"][-1] == T0_MS + 2_999
    assert body["at_ms"] == sorted(body["at_ms"])
    assert status == 422 and bad["detail"][0]["loc"] == ["query", "max_points"]


async def test_equity_of_an_empty_journal_says_why(state_dir: Path) -> None:
    async with serve_api(state_dir) as api:
        _, body = await api.get("/api/equity")
    assert isinstance(body, dict)
    assert body["points"] == 0 and body["max_drawdown_pct"] is None
    assert "no decision" in body["unavailable"]["equity"]


async def test_equity_of_a_live_journal_ending_in_zeros_is_read_in_bounded_memory(
    state_dir: Path,
) -> None:
    """The equity reader iterated the live file's lines, so the zeros a crash can leave after
    the last whole line (512 MB here) were read as one line, whole, at each read."""
    live = state_dir / "logs" / "decisions.jsonl"
    os.truncate(live, live.stat().st_size + (512 << 20))
    async with serve_api(state_dir) as api:
        with allocation_peak() as allocated:
            code, body = await api.get("/api/equity")
    assert code == 200 and isinstance(body, dict)
    assert allocated.peak_bytes < 128 << 20
