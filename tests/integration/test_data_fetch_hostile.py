"""``vigil data fetch`` against a simulator that pages oddly, and over a partial file a killed
fetch or a person left: the span asked for is stored whole, or the fetch is refused naming the
file (exit 78); never a traceback, never a row stored other than the exchange sent it."""

from __future__ import annotations

import asyncio
import io
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_sim_rest_support import running_server, utc_ms

from core.errors import EXIT_REFUSE_TO_START
from core.scaled_clock import ScaledClock
from market.recorded import MalformedDataError, load_klines
from runner.cli import main
from runner.data.command import fetch_into
from runner.data.fetch import FetchRequest

FIRST_MS = utc_ms(2025, 3, 1)
END_MS = utc_ms(2025, 3, 6)  # 1,440 5m bars
KLINES = "/fapi/v1/klines"


def request(out: Path) -> FetchRequest:
    return FetchRequest(
        tickers=("BTC/USDT",),
        interval="5m",
        start_ms=FIRST_MS,
        end_ms=END_MS,
        out_dir=out,
        funding=False,
    )


def recorded() -> pd.DataFrame:
    return load_klines("BTC/USDT", "5m").loc[FIRST_MS : END_MS - 1]


def at_most_500(body: Any) -> Any:
    return body[:500]


async def test_an_exchange_that_pages_shorter_than_asked_is_read_to_the_end(
    tmp_path: Path,
) -> None:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    out = tmp_path / "data"
    async with running_server(clock) as server:
        server.faults.rewrite_next(at_most_500, 100, path=KLINES)  # of the 1,000 asked
        [klines] = await fetch_into(request(out), server.url, clock, io.StringIO())
    assert klines.rows == 1440
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), recorded())


PARTIAL_HEADER = "open_time_ms,open,high,low,close,volume\r\n"


def partial_lines(rows: pd.DataFrame) -> str:
    """Rows as ``runner.data.fetch`` appends them (csv's \\r\\n line breaks)."""
    return "".join(
        ",".join([str(t), *map(str, values)]) + "\r\n"
        for t, values in zip(rows.index, rows.to_numpy().tolist(), strict=True)
    )


async def fetch_over(out: Path) -> list[Any]:
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    async with running_server(clock) as server:
        return await fetch_into(request(out), server.url, clock, io.StringIO())


async def test_a_row_a_kill_cut_short_is_fetched_again_not_stored_cut(tmp_path: Path) -> None:
    out = tmp_path / "data"
    partial = out / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True)
    bars = recorded()
    cut = partial_lines(bars.iloc[3:4]).removesuffix("\r\n")
    assert cut.endswith("469.195")
    # the kill came after "46" of the volume 469.195: a row of six numbers, but not the one sent
    partial.write_bytes((PARTIAL_HEADER + partial_lines(bars.iloc[:3]) + cut[:-5]).encode())
    [klines] = await fetch_over(out)
    assert (klines.resumed_from_rows, klines.rows) == (3, 1437)
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), bars)
    assert not partial.exists()


async def test_a_partial_file_of_a_later_span_is_not_resumed_over_the_days_before_it(
    tmp_path: Path,
) -> None:
    out = tmp_path / "data"
    partial = out / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True)
    bars = recorded()
    # a fetch --from 2025-03-03 killed after its first rows; then --from 2025-03-01 is asked
    partial.write_bytes((PARTIAL_HEADER + partial_lines(bars.iloc[576:580])).encode())
    await fetch_over(out)
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), bars)


@contextmanager
def sim_in_a_thread() -> Iterator[str]:
    """The simulator's REST on loopback in its own thread and loop, for the CLI's asyncio.run."""
    urls: queue.Queue[str] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        async with running_server(ScaledClock(utc_ms(2025, 3, 10), speed=600.0)) as server:
            urls.put(server.url)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    try:
        yield urls.get(timeout=60)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=60)
        loop.close()


def test_an_out_that_cannot_be_written_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_text("mine\n")
    with sim_in_a_thread() as url:
        code = main(
            [
                *("--state-dir", str(tmp_path / "state"), "data", "fetch"),
                *("--tickers", "BTC/USDT", "--from", "2025-03-01", "--to", "2025-03-01"),
                *("--out", str(out), "--exchange-url", url, "--no-funding"),
            ]
        )
    assert code == EXIT_REFUSE_TO_START
    assert f"cannot write into {out}" in capsys.readouterr().err
    assert out.read_text() == "mine\n"


async def test_a_link_in_place_of_the_partial_file_is_refused_not_written_through(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.csv"
    victim.write_bytes(b"")
    out = tmp_path / "data"
    partial = out / ".partial" / "BTCUSDT-5m.csv"
    partial.parent.mkdir(parents=True)
    partial.symlink_to(victim)
    with pytest.raises(MalformedDataError, match="not a regular file"):
        await fetch_over(out)
    assert victim.read_bytes() == b""
    assert partial.is_symlink()


async def test_a_stored_file_with_a_hole_in_the_span_is_not_taken_as_complete(
    tmp_path: Path,
) -> None:
    out = tmp_path / "data"
    clock = ScaledClock(utc_ms(2025, 3, 10), speed=600.0)
    async with running_server(clock) as server:
        for first, end in ((FIRST_MS, utc_ms(2025, 3, 3)), (utc_ms(2025, 3, 4), END_MS)):
            part = FetchRequest(("BTC/USDT",), "5m", first, end, out, funding=False)
            await fetch_into(part, server.url, clock, io.StringIO())
        [klines] = await fetch_into(request(out), server.url, clock, io.StringIO())
    assert not klines.skipped  # the stored file spans the request, the 3rd of March missing
    pd.testing.assert_frame_equal(load_klines("BTC/USDT", "5m", out), recorded())
