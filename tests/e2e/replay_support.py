"""Helpers for the replay e2e tests: run a replay in process, and recompute its figures
independently from ``logs/trades.csv`` and the recording (never from the daemon's snapshots).

The recomputation follows the paper broker's documented rules (broker/paper.py, broker/book.py):

- equity = free cash + reserved cash + each open quantity x its last market price. Cash changes
  only on fills: a BUY fill costs ``quantity x price + fee``, a SELL brings ``quantity x price -
  fee``; an open (unfilled) BUY only moves cash to ``reserved``, so cash + reserved is untouched;
- the last market price of a ticker at instant T is what the kline stream showed at T
  (``SimFeed.last_price``): the replay publishes every stream's update of an instant at once,
  before the decision that instant triggers or wakes builds its snapshot;
- a fill stamped at a decision's own instant counts before that decision's snapshot unless the
  decision placed it (its own SELLs fill right after its snapshot, at the same virtual instant);
  everything else at that instant (a BUY limit the instant's tick filled, a tracker exit) came
  first. The decision line's ``orders`` only say *which* fills are its own; every amount comes
  from trades.csv.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import math
import os
import statistics
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
from fakes.claude_support import EVERY_PASS_ONE_MODEL
from pydantic import SecretStr

from agent.config import AgentConfig
from runner.config import Settings
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import ReplayOutcome, run_replay
from sim.feed import SimFeed

TICKERS: Final = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
DAY_MS: Final = 86_400_000
#: everything a replay writes that must not depend on anything but its inputs and seed
DETERMINISTIC_FILES: Final = (
    "logs/decisions.jsonl",
    "logs/trades.csv",
    "runner_state.json",
    "paper_broker.json",
    "models/online_learner.json",
)
#: a position smaller than this is closed (the broker's quantity step is 1e-6)
DUST_QUANTITY: Final = 1e-9


def day_start_ms(day: str) -> int:
    """Midnight UTC of an ISO day, in epoch milliseconds."""
    parsed = date.fromisoformat(day)
    return int(datetime(parsed.year, parsed.month, parsed.day, tzinfo=UTC).timestamp() * 1000)


def iso_day(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d")


@contextmanager
def isolated_environment(config_dir: Path) -> Iterator[None]:
    """No VIGIL_* variable or API key from the caller's shell, and an empty config file, so
    ``Settings()`` gives the documented defaults wherever the tests run."""
    config_file = config_dir / "vigil.toml"
    config_file.write_text("# empty: the defaults\n")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("VIGIL_") or name == "ANTHROPIC_API_KEY":
                patch.delenv(name)
        patch.setenv("VIGIL_CONFIG_FILE", str(config_file))
        yield


def default_settings(config_dir: Path) -> Settings:
    with isolated_environment(config_dir):
        return Settings()


def claude_settings(config_dir: Path, base_url: str) -> Settings:
    """``default_settings`` with Claude deciding against ``base_url`` (the fake Messages API): one
    model for every pass, two tries a call, a $5 day."""
    return default_settings(config_dir).model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test-replay-0123456789"),
            "agent": AgentConfig(
                base_url=base_url, max_attempts=2, daily_budget_usd=5.0, **EVERY_PASS_ONE_MODEL
            ),
        }
    )


def replay_options(
    out_dir: Path, first_day: str, days: int, *, tickers: Sequence[str] = TICKERS, **overrides: Any
) -> ReplayOptions:
    """A replay of ``days`` whole UTC days from ``first_day`` (as ``--from``/``--to`` give it)."""
    start_ms = day_start_ms(first_day)
    return ReplayOptions(
        start_ms=start_ms,
        end_ms=start_ms + days * DAY_MS,
        out_dir=out_dir,
        tickers=tuple(tickers),
        **overrides,
    )


def replay_in_process(settings: Settings, options: ReplayOptions) -> ReplayOutcome:
    """``build_replay`` + ``run_replay`` exactly as ``vigil replay`` runs them, on a fresh loop."""

    async def run() -> ReplayOutcome:
        replay = build_replay(replay_settings(settings, options), options)
        return await run_replay(replay)

    return asyncio.run(run())


# --- reading a run folder ----------------------------------------------------------------------


@dataclass(frozen=True)
class TradeRow:
    at_ms: int
    client_order_id: str
    ticker: str
    side: str
    quantity: float
    price: float
    fee_usd: float

    @property
    def notional_usd(self) -> float:
        return self.quantity * self.price


@dataclass(frozen=True)
class DecisionLine:
    at_ms: int
    own_order_ids: frozenset[str]  # orders this decision placed (they fill after its snapshot)
    portfolio_value: float | None  # the daemon's own figure: only ever compared against


def read_trades(run_dir: Path) -> list[TradeRow]:
    with (run_dir / "logs" / "trades.csv").open(newline="") as handle:
        rows = [
            TradeRow(
                at_ms=int(row["at_ms"]),
                client_order_id=row["client_order_id"],
                ticker=row["ticker"],
                side=row["side"],
                quantity=float(row["quantity"]),
                price=float(row["price"]),
                fee_usd=float(row["fee_usd"]),
            )
            for row in csv.DictReader(handle)
        ]
    return sorted(rows, key=lambda r: r.at_ms)


def read_decisions(run_dir: Path) -> list[DecisionLine]:
    lines = []
    for raw in (run_dir / "logs" / "decisions.jsonl").read_bytes().splitlines():
        record = orjson.loads(raw)
        if record.get("type", "decision") != "decision":
            continue
        value = (record.get("snapshot") or {}).get("portfolio_value")
        lines.append(
            DecisionLine(
                at_ms=int(record["at_ms"]),
                own_order_ids=frozenset(
                    str(o["client_order_id"]) for o in record.get("orders") or []
                ),
                portfolio_value=float(value) if isinstance(value, (int, float)) else None,
            )
        )
    return sorted(lines, key=lambda d: d.at_ms)


def read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


# --- the independent recomputation -------------------------------------------------------------


@dataclass(frozen=True)
class Holdings:
    cash_usd: float  # free + reserved: what fills left of the starting cash
    quantities: dict[str, float]  # open positions (dust dropped)


def holdings_after(
    starting_cash_usd: float, trades: Iterable[TradeRow], *, until_ms: int, skip: frozenset[str]
) -> Holdings:
    """Cash and positions after every fill at or before ``until_ms`` except those in ``skip``."""
    cash = starting_cash_usd
    quantities: dict[str, float] = defaultdict(float)
    for trade in trades:
        if trade.at_ms > until_ms or trade.client_order_id in skip:
            continue
        if trade.side == "buy":
            cash -= trade.notional_usd + trade.fee_usd
            quantities[trade.ticker] += trade.quantity
        elif trade.side == "sell":
            cash += trade.notional_usd - trade.fee_usd
            quantities[trade.ticker] -= trade.quantity
        else:
            raise AssertionError(f"trades.csv: unknown side {trade.side!r}")
    open_positions = {t: q for t, q in quantities.items() if abs(q) > DUST_QUANTITY}
    return Holdings(cash, open_positions)


def equity_usd(holdings: Holdings, feed: SimFeed, at_ms: int) -> float:
    """Cash plus every open quantity at the price the kline stream showed at ``at_ms``."""
    value = holdings.cash_usd
    for ticker, quantity in holdings.quantities.items():
        price = feed.last_price(ticker, at_ms)
        assert price is not None, f"no recorded price for {ticker} at {at_ms}"
        value += quantity * price
    return value


@dataclass(frozen=True)
class RecomputedPoint:
    at_ms: int
    equity_usd: float
    exposed: bool  # a position was open at this decision's snapshot


def equity_at_decisions(
    decisions: Sequence[DecisionLine],
    trades: Sequence[TradeRow],
    feed: SimFeed,
    starting_cash_usd: float,
) -> list[RecomputedPoint]:
    points = []
    for decision in decisions:
        holdings = holdings_after(
            starting_cash_usd, trades, until_ms=decision.at_ms, skip=decision.own_order_ids
        )
        points.append(
            RecomputedPoint(
                decision.at_ms,
                equity_usd(holdings, feed, decision.at_ms),
                bool(holdings.quantities),
            )
        )
    return points


def total_return_pct(values: Sequence[float]) -> float:
    return (values[-1] / values[0] - 1.0) * 100.0


def max_drawdown_pct(values: Sequence[float]) -> float:
    worst, peak = 0.0, values[0]
    for value in values:
        peak = max(peak, value)
        worst = max(worst, (1.0 - value / peak) * 100.0)
    return worst


def daily_sharpe(points: Sequence[tuple[int, float]]) -> float:
    """Last value per UTC day, the first day's against the starting equity (the first point);
    mean / sample stdev of daily returns x sqrt(365)."""
    last_of_day: dict[int, float] = {}
    for at_ms, value in points:
        last_of_day[at_ms // DAY_MS] = value
    closes = [points[0][1], *(last_of_day[day] for day in sorted(last_of_day))]
    returns = [b / a - 1.0 for a, b in itertools.pairwise(closes)]
    return statistics.fmean(returns) / statistics.stdev(returns) * math.sqrt(365)


def exposure_pct(points: Sequence[RecomputedPoint]) -> float:
    """Share of the time between the first and last decision with a position open."""
    exposed_ms = sum(b.at_ms - a.at_ms for a, b in itertools.pairwise(points) if a.exposed)
    return exposed_ms / (points[-1].at_ms - points[0].at_ms) * 100.0


def round_trip_pnls(trades: Sequence[TradeRow]) -> list[float]:
    """Net PnL of each SELL matched first-in-first-out against the buys of its ticker, the sell
    fee and the matched share of the buy fees taken off."""
    lots: dict[str, deque[tuple[float, float, float]]] = defaultdict(deque)  # qty, price, fee/unit
    pnls = []
    for trade in trades:
        if trade.side == "buy":
            lots[trade.ticker].append((trade.quantity, trade.price, trade.fee_usd / trade.quantity))
            continue
        left, pnl = trade.quantity, -trade.fee_usd
        queue = lots[trade.ticker]
        while left > DUST_QUANTITY and queue:
            quantity, price, unit_fee = queue.popleft()
            taken = min(left, quantity)
            pnl += taken * (trade.price - price - unit_fee)
            left -= taken
            if quantity - taken > DUST_QUANTITY:
                queue.appendleft((quantity - taken, price, unit_fee))
        assert left <= DUST_QUANTITY, f"a sell of {trade.ticker} exceeds what was bought"
        pnls.append(pnl)
    return pnls


def relative_gap(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)
