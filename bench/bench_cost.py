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
#: the sweep's short window (a replay per point): two days with open positions and reviews
SWEEP_FROM = date(2025, 9, 3)
SWEEP_DAYS = 2
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
    if not outcome.passed:
        raise SystemExit(f"the cost replay did not pass: {outcome.failure}")
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


def compare_skipped_reviews(
    records: Sequence[dict[str, Any]], settings: Settings
) -> tuple[int, int]:
    """Re-ask every position review delta gating kept without a call, offline: the request the
    reviewer would have sent (``render_review_request`` on the journaled positions and context)
    answered by the same deterministic answerer; (positions kept, answers of EXIT or ADD)."""
    from agent.claude_prompt import render_review_request
    from tracker.ports import PositionReview

    _, answerer = _fakes()
    kept, with_orders = 0, 0
    for record in records:
        if record.get("type") != "review" or record.get("decided_by") != "unchanged":
            continue
        positions = [PositionReview.model_validate(p) for p in record.get("positions") or []]
        request = render_review_request(settings.agent, positions, record.get("context") or {})
        answer = answerer.answer_request(orjson.loads(orjson.dumps(request)))
        kept += len(positions)
        with_orders += sum(r["action"] != "HOLD" for r in answer["reviews"])
    return kept, with_orders


def print_compare(records: Sequence[dict[str, Any]], settings: Settings) -> None:
    skipped, with_orders = compare_skipped(records, settings)
    print(
        f"  delta gating: {skipped} decisions without a call; re-asked offline, "
        f"{with_orders} of them would have placed or closed an order"
    )
    kept, exits = compare_skipped_reviews(records, settings)
    print(
        f"  review delta gating: {kept} position reviews kept HOLD without a call; re-asked "
        f"offline, {exits} of them would have been an EXIT or ADD order"
    )


async def _main(options: ReplayOptions, compare: bool) -> list[dict[str, Any]]:
    settings = load_settings()
    records = await run_cost_replay(options, settings)
    print_summary(cost_summary(records, options.days), settings)
    if compare:
        print_compare(records, settings)
    return records


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    sweep = parser.add_argument_group("--sweep: delta-gating and tier settings, a replay each")
    sweep.add_argument("--sweep", action="store_true", help="sweep instead of one run")
    sweep.add_argument("--full", action="store_true", help="every combination, not one at a time")
    sweep.add_argument("--sigmas", type=_floats, default=(0.5, 2.0), help="price_move_sigmas")
    sweep.add_argument("--max-hours", type=_floats, default=(2.0, 8.0), help="max_unchanged_hours")
    sweep.add_argument("--review-move", type=_floats, default=(0.25, 1.0), help="review %% move")
    sweep.add_argument(
        "--review-at-risk", type=_floats, default=(0.1, 0.5), help="review at-risk %% move"
    )
    sweep.add_argument("--loud-z", type=_floats, default=(1.0, 2.5), help="tiers loud_zscore")


def _sweep(args: argparse.Namespace, days: int, start: date) -> None:
    from bench.cost_sweep import Axes, grid, run_sweep

    axes = Axes(args.sigmas, args.max_hours, args.review_move, args.review_at_risk, args.loud_z)
    options = ReplayOptions(
        start_ms=_day_ms(start),
        end_ms=_day_ms(start + timedelta(days=days)),
        out_dir=Path("unused"),  # each point replays into its own temporary folder
        tickers=TICKERS,
        decider="claude",
    )
    run_sweep(grid(axes, args.full), load_settings(), options)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench cost", description=__doc__)
    parser.add_argument(
        "--days", type=int, help=f"default {DEFAULT_DAYS} ({SWEEP_DAYS} with --sweep)"
    )
    parser.add_argument(
        "--from", dest="start", type=date.fromisoformat, help=f"default {DEFAULT_FROM}"
    )
    parser.add_argument("--out", type=Path, help="keep the run folder here (default: a temp dir)")
    parser.add_argument("--no-compare", action="store_true", help="skip re-asking skipped passes")
    _sweep_arguments(parser)
    args = parser.parse_args(list(argv))
    configure_logging("ERROR")  # the recording lacks most context: expected warnings
    days = args.days or (SWEEP_DAYS if args.sweep else DEFAULT_DAYS)
    start = args.start or (SWEEP_FROM if args.sweep else DEFAULT_FROM)
    print(
        f"cost{' sweep' if args.sweep else ''}: {len(TICKERS)} tickers, {days} days from {start}, "
        "--decider claude against the fake Messages API (tokens ~3.5 chars each, prompt cache "
        "as the API reports it)",
        flush=True,
    )
    if args.sweep:
        _sweep(args, days, start)
        return
    with ExitStack() as cleanup:
        out_dir = (
            args.out
            or Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bench_cost_")))
            / "run"
        )
        options = ReplayOptions(
            start_ms=_day_ms(start),
            end_ms=_day_ms(start + timedelta(days=days)),
            out_dir=out_dir,
            tickers=TICKERS,
            decider="claude",
        )
        asyncio.run(_main(options, compare=not args.no_compare))


if __name__ == "__main__":
    main(sys.argv[1:])
