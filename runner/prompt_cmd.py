"""``vigil prompt``: exactly what would be sent to Claude for the latest snapshot, as JSON.

The latest snapshot is the one in the last complete decision line of ``logs/decisions.jsonl``.
Before the daemon has decided anything, a snapshot is built offline from the bundled recorded data
at ``sim.start`` by the real composition root: the replay ports (``runner.replay.ports``) on a
VirtualClock, the daemon's own warm-up (candles seeded, 4h history, regimes fitted), one poll of the
recorded context, the open 15m candle as the first tick, a fresh paper account and no runner state
(in a throw-away state dir). Nothing is fetched over the network.

stdout carries only the JSON (so it pipes into ``jq``); where the snapshot came from goes to stderr.
No secret can appear: a request body never holds the API key (the SDK sends it as a header).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from pydantic import ValidationError

from agent.claude_prompt import render_request
from agent.debate_config import Role
from agent.debate_prompt import context_block, role_request, snapshot_block
from agent.prompt_assembly import PromptAssembler, describe_parts
from agent.snapshot import MarketSnapshot
from core.bus import EventBus
from core.clock import VirtualClock
from core.errors import RefuseToStartError
from core.events import MarketTick
from core.regular_file import read_regular_file
from market.recorded import DataUnavailableError, MalformedDataError, load_klines
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler
from memory.port import StoreUnavailableError
from memory.session_store import SessionStore
from memory.tiers import OrganisationTier, ProjectTier
from runner.agent_wiring import wake_rules
from runner.config import Settings
from runner.journals import open_journals
from runner.market_wiring import build_market_path
from runner.replay.ports import replay_ports
from runner.warm_paths import warm_up_paths
from runner.warmup import look_back_window
from runner.wiring import DecisionPath, build_decision_path
from sim.feed import SimFeed
from state.line_text import terminal_safe_json, terminal_safe_lines
from state.records import DecisionRecord, parse_record
from state.segments import UnreadableSegmentError, open_segment, segments
from state.state_file import STATE_FILE_MAX_BYTES

#: what the offline snapshot says triggered it
OFFLINE_WAKE_REASON = "vigil_prompt: offline snapshot from the bundled data"
_FIVE_MIN_MS = TIMEFRAME_MS["5m"]
#: decision lines of a segment kept while it is read (a line is a few KB, at most LINE_MAX_BYTES)
_NEWEST_KEPT = 8


@dataclass(frozen=True)
class JournalSnapshot:
    snapshot: MarketSnapshot
    decision_id: str
    path: Path


def render_prompt(
    settings: Settings,
    *,
    note: Callable[[str], None] | None = None,
    parts: bool = False,
    role: Role | None = None,
) -> str:
    """The ``messages.create`` kwargs for the latest snapshot as pretty JSON (sorted keys), with
    the context tiers of the configured state dir assembled as the daemon would; ``parts``: the
    parts with their sizes, tiers loaded and trims instead (``vigil prompt --parts``).

    ``note`` receives one line saying where the snapshot came from (default: stderr).
    ``role``: what that debate role would be sent instead (``vigil prompt --role bull``).
    """
    say = note or _to_stderr
    if not settings.state_dir.is_dir():  # a mistyped --state-dir would pass for a fresh start
        say(
            f"vigil prompt: no state dir at {settings.state_dir}: nothing is remembered there, "
            "so this is the prompt of a fresh start"
        )
    try:
        found = latest_journal_snapshot(settings.logs_dir / "decisions.jsonl")
    except UnreadableSegmentError as exc:  # was a traceback (a FIFO: a hang)
        raise SystemExit(f"vigil prompt: {exc}; move it aside to see an older snapshot") from None
    if found is not None:
        snapshot = found.snapshot
        say(
            f"vigil prompt: snapshot of decision {found.decision_id} at "
            f"{_iso(snapshot.at_ms)} from {found.path}"
        )
    else:
        try:
            snapshot = asyncio.run(build_offline_snapshot(settings))
        except (DataUnavailableError, MalformedDataError) as exc:  # was a traceback
            raise RefuseToStartError(
                f"vigil prompt: no decision journaled yet, and no offline snapshot at "
                f"{_iso(settings.sim.start_ms)} from the data dir: {exc}"
            ) from None
        say(
            f"vigil prompt: no decision journaled yet; snapshot built from the bundled data at "
            f"{_iso(snapshot.at_ms)} (sim.start)"
        )
    if role is not None:
        return request_json(_role_request(settings, snapshot, role, say))
    if not settings.context.enabled:
        if parts:
            raise SystemExit("vigil prompt --parts: context.enabled is false (no parts to show)")
        return request_json(render_request(settings.agent, snapshot, wake=wake_rules(settings)))
    prompt = asyncio.run(offline_prompt_assembler(settings, snapshot.at_ms).assemble(snapshot))
    # the tiers' texts are a person's and a model's words: ESC or CSI in them drove the terminal
    return (
        terminal_safe_lines(describe_parts(prompt))
        if parts
        else request_json(prompt.request(settings.agent))
    )


def _role_request(
    settings: Settings, snapshot: MarketSnapshot, role: Role, say: Callable[[str], None]
) -> dict[str, Any]:
    """A debate role's request for ``snapshot``, with the assembled context; its memories,
    working memory and arguments are filled at decision time (the journal's debate shows them)."""
    assembled = None
    if settings.context.enabled:
        assembler = offline_prompt_assembler(settings, snapshot.at_ms)
        assembled = asyncio.run(assembler.assemble(snapshot))
    say(
        f"vigil prompt: the {role} role's request; <memories>, <working_memory> and "
        "<arguments> are empty here and filled at decision time"
    )
    return role_request(
        settings.agent,
        role,
        context=snapshot_block(snapshot) + context_block(assembled),
        memories=(),
        working=(),
        arguments={},
        wake=wake_rules(settings),
    )


def offline_prompt_assembler(settings: Settings, at_ms: int) -> PromptAssembler:
    """The daemon's prompt assembly over the state dir's tiers, read only: no analyst reports are
    written and no database is created; freshness is measured at the snapshot's instant."""
    state_dir = settings.state_dir
    clock = VirtualClock(epoch_ms=at_ms)
    db = state_dir / "analysts.db"
    desk = None
    if settings.context.analysts and db.is_file():
        try:
            desk = AnalystDesk(AnalystStore(db), settings.market.tickers)
        except StoreUnavailableError as exc:  # the daemon decides without them too
            print(f"vigil: analysts unavailable: {exc}", file=sys.stderr)
    assembler = ContextAssembler(
        organisation=OrganisationTier(settings.context.organisation_path),
        project=ProjectTier(state_dir),
        # its instant is the snapshot's: reading evicted, and deleted the files of the daemon's
        # entries expired by then
        session=SessionStore(state_dir / "sessions", clock, remove_files=False),
        analysts=desk,
        person_notes=lambda: _person_notes(settings.runner_state_path),
        insights_per_ticker=settings.context.insights_per_ticker,
    )
    return PromptAssembler(
        assembler,
        settings.prompt,
        compact_snapshot=settings.agent.compact_snapshot,
        wake=wake_rules(settings),
    )


def _person_notes(path: Path) -> str:
    # a FIFO there blocked read_bytes until someone wrote to it: the command hung; a sparse file
    # of gigabytes was read and parsed whole
    try:
        _, data = read_regular_file(path, max_bytes=STATE_FILE_MAX_BYTES)
        notes = orjson.loads(data).get("notes", "")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return ""
    return notes if isinstance(notes, str) else ""


def request_json(request: Mapping[str, Any]) -> str:
    text = orjson.dumps(dict(request), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    return terminal_safe_json(text.decode())  # orjson writes U+009B (CSI) raw


def latest_journal_snapshot(path: Path) -> JournalSnapshot | None:
    """The snapshot of the last complete decision line in ``path`` or, when a rotation just left
    it without one, in its newest rotated segment that has one; None if there is none.

    ``agent_failure`` lines, decisions that failed before their snapshot, and a torn last line
    (the daemon may be writing it right now) are skipped.
    """
    for segment in reversed(segments(path)):
        found = _latest_snapshot_in(segment)
        if found is not None:
            return JournalSnapshot(found[0], found[1], segment)
    return None


def _latest_snapshot_in(segment: Path) -> tuple[MarketSnapshot, str] | None:
    """Read one line at a time: the whole segment was read and split (two copies of a journal
    that, with rotation off, grows for months). The newest decision lines are kept; when none of
    them is of this schema, the segment is read again for an older one that is."""
    newest: deque[bytes] = deque(maxlen=_NEWEST_KEPT)
    for line in open_segment(segment):
        if line.endswith(b"\n") and b'"decision"' in line:  # a torn last line is not one yet
            newest.append(line)
    found = next(_snapshots(reversed(newest)), None)
    if found is None and len(newest) == _NEWEST_KEPT:
        whole = (line for line in open_segment(segment) if line.endswith(b"\n"))
        last = deque(_snapshots(whole), maxlen=1)  # the newest of this schema
        found = last[0] if last else None
    return found


def _snapshots(lines: Iterable[bytes]) -> Iterator[tuple[MarketSnapshot, str]]:
    """The snapshots of ``lines``' decisions that have one of this schema, in their order."""
    for line in lines:
        record = _decision(line)
        if record is None or record.snapshot is None:
            continue
        try:
            snapshot = MarketSnapshot.model_validate(record.snapshot)
        except ValidationError:
            continue  # written by another schema version: an older line may still fit
        yield snapshot, record.decision_id


def _decision(line: bytes) -> DecisionRecord | None:
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(raw, dict) or raw.get("type") != "decision":
        return None
    try:
        record = parse_record(raw)
    except ValidationError:
        return None
    return record if isinstance(record, DecisionRecord) else None


async def build_offline_snapshot(settings: Settings) -> MarketSnapshot:
    """The snapshot a fresh daemon would build at ``settings.sim.start`` from the bundled data."""
    async with offline_decision_path(settings) as decision:
        return await decision.snapshots.build([OFFLINE_WAKE_REASON])


@asynccontextmanager
async def offline_decision_path(settings: Settings) -> AsyncIterator[DecisionPath]:
    """A fresh daemon's decision path at ``settings.sim.start``, built by the real root on replay's
    ports in a throw-away state dir: warmed up, the recorded context polled once, and the open 15m
    candle of each ticker as its first tick."""
    at_ms = settings.sim.start_ms
    with tempfile.TemporaryDirectory(prefix="vigil-prompt-") as scratch:
        fresh = settings.model_copy(
            update={"state_dir": Path(scratch), "anthropic_api_key": None, "fred_api_key": None}
        )
        tickers = fresh.market.tickers
        clock = VirtualClock(epoch_ms=at_ms)
        bus = EventBus()
        # its look-back only: a stray bar years away (a 2099 row) made the dense arrays span them
        window = look_back_window(fresh.market.history_days, at_ms, at_ms + 1)
        feed = SimFeed(tickers, data_dir=fresh.data_dir, window=window)
        ports = replay_ports(fresh, clock, bus, feed, end_ms=at_ms + 1)
        journals = open_journals(fresh, clock, bus)
        market = build_market_path(fresh, clock, bus, ports)
        decision = build_decision_path(
            fresh, clock, bus, market, journals.store, journals.decisions, ports
        )
        try:
            await warm_up_paths(fresh, clock, market, decision)
            await decision.derivatives.poll_once()  # the monitor's first poll, as on start
            for ticker in tickers:
                five = _before(load_klines(ticker, "5m", fresh.data_dir), 0, at_ms)
                market.aggregator.update(_current_15m_tick(ticker, five, at_ms))
            yield decision
        finally:
            journals.decisions.close()
            journals.trades.close()


def _before(frame: pd.DataFrame, start_ms: int, end_ms: int) -> pd.DataFrame:
    """5m candles that opened in [start_ms, end_ms) and closed by ``end_ms``. The step is not read
    off the first two bars: a hole between them made it weeks long, and the open candle stale."""
    return frame[(frame.index >= start_ms) & (frame.index + _FIVE_MIN_MS <= end_ms)]


def _current_15m_tick(ticker: str, five: pd.DataFrame, at_ms: int) -> MarketTick:
    """The open 15m candle at ``at_ms``, made of its closed 5m candles; price = the last close."""
    if five.empty:
        raise DataUnavailableError(f"no recorded 5m candles for {ticker} before {_iso(at_ms)}")
    open_ms = candle_open_ms(at_ms, "15m")
    inside = five[five.index >= open_ms]
    last_close = float(five["close"].iloc[-1])
    if inside.empty:
        o = h = lo = last_close
        volume = 0.0
    else:
        o = float(inside["open"].iloc[0])
        h = float(inside["high"].max())
        lo = float(inside["low"].min())
        volume = float(inside["volume"].sum())
    return MarketTick(
        ticker=ticker,
        timeframe="15m",
        open_time_ms=open_ms,
        close_time_ms=open_ms + TIMEFRAME_MS["15m"] - 1,
        open=o,
        high=h,
        low=lo,
        close=last_close,
        volume=volume,
        closed=False,
        event_time_ms=at_ms,
    )


def _iso(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):  # a journaled time past year 9999: a traceback
        return f"{ms} ms (no calendar date)"


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


__all__: Sequence[str] = (
    "JournalSnapshot",
    "build_offline_snapshot",
    "latest_journal_snapshot",
    "offline_decision_path",
    "render_prompt",
    "request_json",
)
