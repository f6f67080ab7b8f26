"""``vigil prompt``: exactly what would be sent to Claude for the latest snapshot, as JSON.

The latest snapshot is the one in the last complete decision line of ``logs/decisions.jsonl``.
Before the daemon has decided anything, a snapshot is built offline from the bundled recorded data
at ``sim.start``: aggregator and features seeded with the recorded candles, regimes fitted on the
4h history, a fresh paper account, no runner state. Nothing is fetched over the network.

stdout carries only the JSON (so it pipes into ``jq``); where the snapshot came from goes to stderr.
No secret can appear: a request body never holds the API key (the SDK sends it as a header).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from pydantic import ValidationError

from agent.claude_prompt import render_request
from agent.snapshot import MarketSnapshot
from agent.snapshot_builder import SnapshotBuilder
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import MarketTick
from derivatives.fields import CONTEXT_FIELDS
from learner.online import OnlineLearner
from market.aggregator import MultiTFAggregator
from market.features import FeatureTracker
from market.recorded import load_klines, resample, to_candles
from market.timeframes import TIMEFRAME_MS, candle_open_ms
from regime.crypto_hmm import CryptoRegimeModel
from regime.fred import build_macro_source
from regime.tracker import CryptoRegimeTracker
from regime.view import RegimeView
from runner.broker_wiring import make_paper_broker
from runner.config import Settings
from runner.warmup import SEED_SECS
from state.records import DecisionRecord, parse_record

#: what the offline snapshot says triggered it
OFFLINE_WAKE_REASON = "vigil_prompt: offline snapshot from the bundled data"
OFFLINE_CONTEXT_REASON = (
    "not queried: `vigil prompt` builds this snapshot offline from the bundled data "
    "(outside sources are read only by the running daemon)"
)
_FIVE_MIN_MS = TIMEFRAME_MS["5m"]
_DAY_MS = 86_400_000


@dataclass(frozen=True)
class JournalSnapshot:
    snapshot: MarketSnapshot
    decision_id: str
    path: Path


def render_prompt(settings: Settings, *, note: Callable[[str], None] | None = None) -> str:
    """The ``messages.create`` kwargs for the latest snapshot as pretty JSON (sorted keys).

    ``note`` receives one line saying where the snapshot came from (default: stderr).
    """
    say = note or _to_stderr
    found = latest_journal_snapshot(settings.logs_dir / "decisions.jsonl")
    if found is not None:
        snapshot = found.snapshot
        say(
            f"vigil prompt: snapshot of decision {found.decision_id} at "
            f"{_iso(snapshot.at_ms)} from {found.path}"
        )
    else:
        snapshot = asyncio.run(build_offline_snapshot(settings))
        say(
            f"vigil prompt: no decision journaled yet; snapshot built from the bundled data at "
            f"{_iso(snapshot.at_ms)} (sim.start)"
        )
    return request_json(render_request(settings.agent, snapshot))


def request_json(request: Mapping[str, Any]) -> str:
    return orjson.dumps(dict(request), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def latest_journal_snapshot(path: Path) -> JournalSnapshot | None:
    """The snapshot of the last complete decision line in ``path``; None if there is none.

    ``agent_failure`` lines, decisions that failed before their snapshot, and a torn last line
    (the daemon may be writing it right now) are skipped.
    """
    if not path.is_file():
        return None
    for record in _decisions_newest_first(path.read_bytes()):
        if record.snapshot is None:
            continue
        try:
            snapshot = MarketSnapshot.model_validate(record.snapshot)
        except ValidationError:
            continue  # written by another schema version: an older line may still fit
        return JournalSnapshot(snapshot, record.decision_id, path)
    return None


def _decisions_newest_first(data: bytes) -> Iterator[DecisionRecord]:
    complete = data[: data.rfind(b"\n") + 1]
    for line in reversed(complete.splitlines()):
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(raw, dict) or raw.get("type") != "decision":
            continue
        try:
            record = parse_record(raw)
        except ValidationError:
            continue
        if isinstance(record, DecisionRecord):
            yield record


async def build_offline_snapshot(settings: Settings) -> MarketSnapshot:
    """A snapshot at ``settings.sim.start`` from the bundled data, as a fresh daemon would see it."""
    builder = await build_offline_builder(settings)
    return await builder.build([OFFLINE_WAKE_REASON])


async def build_offline_builder(settings: Settings) -> SnapshotBuilder:
    """The snapshot builder a fresh daemon would have at ``settings.sim.start``, from bundled data:
    warm-up candles seeded, regimes fitted, a fresh paper account, no state, nothing queried."""
    at_ms = settings.sim.start_ms
    clock = VirtualClock(epoch_ms=at_ms)
    tickers = tuple(settings.market.tickers)
    features = FeatureTracker()
    aggregator = MultiTFAggregator(EventBus(), observers=[features])
    tracker = CryptoRegimeTracker(clock, lambda: CryptoRegimeModel(settings.regime.hmm))
    for ticker in tickers:
        # the same closed candles a fresh daemon's warm-up seeds (runner.warmup)
        seed_from_ms = candle_open_ms(at_ms - SEED_SECS * 1000, "4h")
        five = _before(load_klines(ticker, "5m", settings.data_dir), seed_from_ms, at_ms)
        for timeframe in ("15m", "1h", "4h"):
            since_ms = candle_open_ms(at_ms - SEED_SECS * 1000, timeframe)
            closed = resample(five, "5m", timeframe)
            aggregator.seed(ticker, timeframe, to_candles(closed[closed.index >= since_ms]))
        aggregator.update(_current_15m_tick(ticker, five, at_ms))
        hourly = load_klines(ticker, "1h", settings.data_dir)
        history_start_ms = at_ms - settings.market.history_days * _DAY_MS
        await tracker.on_4h_close(
            ticker, resample(_before(hourly, history_start_ms, at_ms), "1h", "4h")
        )
    regimes = RegimeView(
        tracker,
        build_macro_source(clock, settings.regime, None),  # offline: a FRED key is never used
        _FourHourHistory(),  # type: ignore[arg-type]  # snapshot() reads no history
        tickers,
    )
    return SnapshotBuilder(
        clock,
        tickers=tickers,
        market=aggregator,
        features=features,
        broker=make_paper_broker(settings, clock),
        agent_memory=str,  # no state: an empty note
        peak_prices=dict,
        regime=regimes.snapshot,
        context_sources=[_OfflineContext()],
        learner=OnlineLearner(None),  # no state: the priors a fresh daemon starts from
    )


class _FourHourHistory:
    timeframe = "4h"


@dataclass
class _Reading:
    values: Mapping[str, Any]
    unavailable: Mapping[str, str]


class _OfflineContext:
    """Says, for every outside field, that the offline snapshot does not query it."""

    name = "offline"

    async def read(self) -> _Reading:
        return _Reading(
            values={}, unavailable=dict.fromkeys(CONTEXT_FIELDS, OFFLINE_CONTEXT_REASON)
        )


def _before(frame: pd.DataFrame, start_ms: int, end_ms: int) -> pd.DataFrame:
    """Candles that opened in [start_ms, end_ms) and closed by ``end_ms``."""
    step = _FIVE_MIN_MS if len(frame) < 2 else int(frame.index[1] - frame.index[0])
    return frame[(frame.index >= start_ms) & (frame.index + step <= end_ms)]


def _current_15m_tick(ticker: str, five: pd.DataFrame, at_ms: int) -> MarketTick:
    """The open 15m candle at ``at_ms``, made of its closed 5m candles; price = the last close."""
    if five.empty:
        raise LookupError(f"no recorded 5m candles for {ticker} before {_iso(at_ms)}")
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
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


__all__: Sequence[str] = (
    "JournalSnapshot",
    "build_offline_snapshot",
    "latest_journal_snapshot",
    "render_prompt",
    "request_json",
)
