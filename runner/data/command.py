"""``vigil data fetch | import | check``: the CLI side (arguments, output, exit codes).

Exit codes: 0 done (check: every file clean), 1 check found problems, 2 usage, 78 a refused input
(an unreadable or malformed file, named; a fetch the exchange refused).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from core.clock import Clock
from core.config_path import require_folder
from core.errors import EXIT_USAGE, RefuseToStartError
from core.utc_text import iso_utc
from market.datacheck import FileCheck, check_data_dir
from market.recorded import BASE_INTERVAL_MS, RECORDED_INTERVALS, MalformedDataError
from runner.cli_text import path_argument, pause_secs
from runner.config import is_usdt_perpetual
from runner.data.layout import StoredKlines, store_klines
from state.line_text import as_one_line

EXIT_PROBLEMS = 1


def run_data(
    args: argparse.Namespace, stream: TextIO | None = None, clock: Clock | None = None
) -> int:
    """``clock``: what ``fetch`` waits its retries on (the wall's by default)."""
    stream = stream or sys.stdout
    if args.data_command == "check":
        return _check(args.data_dir, as_json=args.json, stream=stream)
    if args.data_command == "import":
        return _import(args.files, args.out, stream)
    return _fetch(args, stream, clock)


def _check(data_dir: Path, *, as_json: bool, stream: TextIO) -> int:
    require_folder(data_dir, "data dir")
    checks = check_data_dir(data_dir)
    if as_json:
        print(json.dumps([c.to_json() for c in checks], indent=2), file=stream)
    else:
        for check in checks:
            # a file's header and name are anyone's text: escaped, never a terminal's command
            print(as_one_line(_check_line(check, data_dir)), file=stream)
        if not checks:
            print(
                f"{data_dir}: no recorded files (binance-usdm/<SYMBOL>-<interval>.csv.gz)",
                file=stream,
            )
    return 0 if checks and all(c.ok for c in checks) else EXIT_PROBLEMS


def _check_line(check: FileCheck, data_dir: Path) -> str:
    name = str(Path(check.path).relative_to(data_dir))
    if check.error is not None:
        return f"{name}: ERROR {check.error}"
    head = f"{name}: {check.kind}, {check.rows:,} rows, {check.first} .. {check.last} UTC"
    problems = []
    if check.gap_count:
        listed = "; ".join(f"{g.after} -> {g.before} ({g.missing} missing)" for g in check.gaps)
        problems.append(f"{check.gap_count} gap(s), {check.missing_bars} missing: {listed}")
    if check.duplicate_count:
        problems.append(f"{check.duplicate_count} duplicate(s): {', '.join(check.duplicates)}")
    if check.misaligned_count:
        problems.append(f"{check.misaligned_count} misaligned: {', '.join(check.misaligned)}")
    problems += [f"bad rows (replay refuses): {bad}" for bad in check.bad_rows]
    return head + (": " + " | ".join(problems) if problems else ": ok")


def _import(files: list[Path], out: Path, stream: TextIO) -> int:
    from market.archive import read_archive_file

    grouped: dict[tuple[str, str], list[pd.DataFrame]] = defaultdict(list)
    for path in files:
        if not path.is_file():
            why = (
                "no such file"
                if not path.exists()
                else "not a regular file (a directory, FIFO or device)"
            )
            raise RefuseToStartError(f"{path}: {why}")
        try:
            parsed = read_archive_file(path)
        except MalformedDataError as exc:
            raise RefuseToStartError(f"cannot import: {exc}") from None
        grouped[(parsed.ticker, parsed.interval)].append(parsed.frame)
    for (ticker, interval), frames in sorted(grouped.items()):
        try:
            stored = store_klines(pd.concat(frames), ticker, interval, out)
        except MalformedDataError as exc:
            raise RefuseToStartError(f"cannot import into it: {exc}") from None
        except OSError as exc:
            raise RefuseToStartError(f"cannot write into {out}: {exc}") from None
        rows = sum(len(f) for f in frames)
        print(
            f"{stored.path}: {stored.bars:,} bars ({rows:,} rows read from {len(frames)} file(s))"
            + _differing_note(stored),
            file=stream,
        )
    if not any(interval in BASE_INTERVAL_MS for _ticker, interval in grouped):
        print("note: replay needs 1m, 3m, 5m or 15m klines", file=stream)
    return 0


def _differing_note(stored: StoredKlines) -> str:
    """The bars given more than one value, which the newest row decided without a word: two
    archives that disagree, or a revised one over what was stored."""
    notes = []
    if stored.differing_ms:
        notes.append(
            f"{len(stored.differing_ms):,} bar(s) given different values, the row read last "
            f"kept, files in the order given (first at {iso_utc(stored.differing_ms[0])})"
        )
    if stored.replaced_ms:
        notes.append(
            f"{len(stored.replaced_ms):,} stored bar(s) replaced by different values "
            f"(first at {iso_utc(stored.replaced_ms[0])})"
        )
    return "".join(f"; {note}" for note in notes)


def _fetch(args: argparse.Namespace, stream: TextIO, clock: Clock | None) -> int:
    from core.clock import WallClock
    from market.ccxt_client import CcxtRequestRejectedError, CcxtRetryableError
    from runner.data.fetch import FetchRequest
    from runner.replay.args import parse_day

    try:
        # replay's days: a recording lies in them, and the day after --to is still a date
        first, last = parse_day(args.fetch_from, "--from"), parse_day(args.fetch_to, "--to")
    except ValueError as exc:
        print(f"vigil data fetch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if last < first:
        print(f"vigil data fetch: --to {last} is before --from {first}", file=sys.stderr)
        return EXIT_USAGE
    request = FetchRequest(
        tickers=tuple(args.tickers),
        interval=args.interval,
        start_ms=_day_ms(first),
        end_ms=_day_ms(last + timedelta(days=1)),
        out_dir=args.out,
        funding=not args.no_funding,
        min_interval_secs=args.min_interval_secs,
    )
    try:
        results = asyncio.run(fetch_into(request, args.exchange_url, clock or WallClock(), stream))
    except CcxtRequestRejectedError as exc:
        raise RefuseToStartError(f"the exchange refused: {exc}") from None
    except MalformedDataError as exc:
        raise RefuseToStartError(f"cannot fetch into it: {exc}") from None
    except OSError as exc:  # ccxt's own network errors are not OSErrors: this is --out's
        raise RefuseToStartError(f"cannot write into {args.out}: {exc}") from None
    except CcxtRetryableError as exc:
        again = "run the same command again to resume"
        print(f"vigil data fetch: {as_one_line(str(exc))}; {again}", file=sys.stderr)
        return EXIT_PROBLEMS
    for result in results:
        state = "already complete" if result.skipped else f"{result.rows:,} rows fetched"
        resumed = (
            f" (resumed after {result.resumed_from_rows:,})" if result.resumed_from_rows else ""
        )
        dropped = (
            f"; {result.dropped:,} garbled row(s) dropped (see the warnings; "
            "`vigil data check` shows the gaps they leave)"
            if result.dropped
            else ""
        )
        print(f"{args.out / 'binance-usdm' / result.name}: {state}{resumed}{dropped}", file=stream)
    return 0


async def fetch_into(
    request: Any, exchange_url: str | None, clock: Any, stream: TextIO
) -> list[Any]:
    """Build the ccxt client (``exchange_url``: the simulator), run the fetch, close the client."""
    from market.ccxt_client import make_binanceusdm
    from runner.data.fetch import Fetcher

    exchange = make_binanceusdm(exchange_url)
    try:
        fetcher = Fetcher(exchange, clock, progress=lambda line: print(line, file=stream))
        return await fetcher.run(request)
    finally:
        await exchange.close()


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


__all__ = ["EXIT_PROBLEMS", "fetch_into", "run_data"]
