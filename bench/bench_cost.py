"""What a day of Claude costs: a week replayed with ``--decider claude`` against the fake Messages
API on loopback (the real SDK through ``base_url``).

The fake answers deterministically from the snapshot it is sent (``tests/fakes/snapshot_answerer``)
and reports usage as the real API would (``tests/fakes/usage_model``: input tokens counted from the
request the SDK sent at ~3.5 characters per token, prompt-cache reads and writes with their TTLs
on the replay's clock, output tokens from the answer). Prices: the configured price table (dated).

Prints calls per day by gate layer, input / cache-write / cache-read / output tokens per call, the
cached share of input tokens, dollars per day per layer, per model and per decider, tracker
reviews per day and their cost, and what the same tokens would cost at each model's list price.
With delta gating on it also re-asks every skipped snapshot offline and counts the ones whose
answer would have placed or closed an order (``--no-compare`` skips that).

Run: ``python -m bench cost [--days 7] [--from 2025-09-01] [--out DIR]``; settings come from
``vigil.toml`` / ``VIGIL_*`` as for ``vigil replay`` (``VIGIL_AGENT__DELTA__ENABLED=false`` etc.).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from pydantic import SecretStr

from report.cost import CostRow, CostSummary, cost_summary
from runner.config import Settings, load_settings
from runner.logging_setup import configure_logging
from runner.replay.build import ReplayOptions, build_replay, replay_settings
from runner.replay.command import run_replay

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
DEFAULT_FROM = date(2025, 9, 1)  # a steady-state week (as bench replay's short form)
DEFAULT_DAYS = 7
#: the bench measures: no budget may cut calls short
UNLIMITED_BUDGET_USD = 1_000_000.0


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def _fakes() -> Any:
    """The fake Messages API and the answerer are test fakes: the bench runs them as tests do."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fakes import messages_api, snapshot_answerer

    return messages_api, snapshot_answerer


def bench_settings(settings: Settings, base_url: str) -> Settings:
    agent = settings.agent.model_copy(
        update={"base_url": base_url, "daily_budget_usd": UNLIMITED_BUDGET_USD}
    )
    return settings.model_copy(
        update={"anthropic_api_key": SecretStr("sk-ant-bench-cost-0000"), "agent": agent}
    )


async def run_cost_replay(options: ReplayOptions, settings: Settings) -> list[dict[str, Any]]:
    """Replay with Claude against the fake; the journal's lines."""
    messages_api, answerer = _fakes()
    async with messages_api.FakeMessagesApi(
        answerer=answerer.answer_request, realistic_usage=True
    ) as api:
        configured = replay_settings(bench_settings(settings, api.base_url), options)
        replay = build_replay(configured, options)
        api.now_ms = replay.clock.now_ms  # cache TTLs on the replay's clock
        outcome = await run_replay(replay)
    if not outcome.finished:
        raise SystemExit("the cost replay did not finish")
    journal = options.out_dir / "logs" / "decisions.jsonl"
    return [orjson.loads(line) for line in journal.read_bytes().splitlines()]


def _row(row: CostRow, summary: CostSummary) -> str:
    calls = max(row.calls, 1)
    share = "n/a" if row.cache_share is None else f"{row.cache_share:5.1%}"
    return (
        f"  {row.name:<22} {summary.per_day(row.decisions):8.1f} {summary.per_day(row.calls):8.1f} "
        f"{row.input_tokens / calls:8.0f} {row.cache_write_tokens / calls:7.0f} "
        f"{row.cache_read_tokens / calls:7.0f} {row.output_tokens / calls:6.0f} {share:>6} "
        f"{summary.per_day(row.cost_usd):8.3f}"
    )


HEADER = (
    f"  {'':<22} {'lines/d':>8} {'calls/d':>8} {'in/call':>8} {'wr/call':>7} {'rd/call':>7} "
    f"{'out/c':>6} {'cached':>6} {'$/day':>8}"
)


def print_summary(summary: CostSummary, settings: Settings) -> None:
    agent = settings.agent
    print(HEADER)
    print("  by gate layer (a line = a decision or a review; calls = the ones that asked a model)")
    for row in summary.by_layer:
        print(_row(row, summary))
    print("  by decider")
    for row in summary.by_decider:
        print(_row(row, summary))
    print("  by model (calls = billed tries)")
    for row in summary.by_model:
        print(_row(row, summary))
    print(_row(summary.total, summary))
    print(
        f"  prices (USD per MTok, as of {agent.prices.as_of}; in / out / 5m write / 1h write / read):"
    )
    for name, price in sorted(agent.prices.models.items()):
        t = summary.total
        repriced = price.cost_usd(
            t.input_tokens, t.output_tokens, t.cache_write_tokens, t.cache_read_tokens
        )
        print(
            f"    {name:<20} {price.input_per_mtok_usd:g} / {price.output_per_mtok_usd:g} / "
            f"{price.cache_write_per_mtok_usd:g} / {price.cache_write_1h_per_mtok_usd:g} / "
            f"{price.cache_read_per_mtok_usd:g}; every token of the run at this price: "
            f"${summary.per_day(repriced):.3f}/day"
        )
    print(f"  dollars per simulated day: ${summary.per_day(summary.total.cost_usd):.3f}")


def compare_skipped(records: Sequence[dict[str, Any]], settings: Settings) -> tuple[int, int]:
    """Re-ask every snapshot delta gating decided without a call, offline, through the same
    request rendering and the same deterministic answerer: (skipped, answers with an order)."""
    from agent.claude_prompt import render_request
    from agent.snapshot import MarketSnapshot

    _, answerer = _fakes()
    skipped = [
        r for r in records if r.get("type") == "decision" and r.get("decided_by") == "unchanged"
    ]
    with_orders = 0
    for record in skipped:
        snapshot = MarketSnapshot.model_validate(record["snapshot"])
        body = orjson.loads(orjson.dumps(render_request(settings.agent, snapshot)))
        answer = answerer.answer_request(body)
        with_orders += any(d["action"] != "HOLD" for d in answer["decisions"])
    return len(skipped), with_orders


async def _main(options: ReplayOptions, compare: bool) -> list[dict[str, Any]]:
    settings = load_settings()
    records = await run_cost_replay(options, settings)
    print_summary(cost_summary(records, options.days), settings)
    if compare:
        skipped, with_orders = compare_skipped(records, settings)
        print(
            f"  delta gating: {skipped} decisions without a call; re-asked offline, "
            f"{with_orders} of them would have placed or closed an order"
        )
    return records


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench cost", description=__doc__)
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS)
    parser.add_argument("--from", dest="start", type=date.fromisoformat, default=DEFAULT_FROM)
    parser.add_argument("--out", type=Path, help="keep the run folder here (default: a temp dir)")
    parser.add_argument("--no-compare", action="store_true", help="skip re-asking skipped passes")
    args = parser.parse_args(list(argv))
    configure_logging("ERROR")  # the recording lacks most context: expected warnings
    print(
        f"cost: {len(TICKERS)} tickers, {args.days} days from {args.start}, --decider claude "
        "against the fake Messages API (tokens ~3.5 chars each, prompt cache as the API reports it)",
        flush=True,
    )
    with ExitStack() as cleanup:
        out_dir = (
            args.out
            or Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bench_cost_")))
            / "run"
        )
        options = ReplayOptions(
            start_ms=_day_ms(args.start),
            end_ms=_day_ms(args.start + timedelta(days=args.days)),
            out_dir=out_dir,
            tickers=TICKERS,
            decider="claude",
        )
        asyncio.run(_main(options, compare=not args.no_compare))


if __name__ == "__main__":
    main(sys.argv[1:])
