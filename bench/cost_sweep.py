"""``python -m bench cost --sweep``: the delta-gating and tier settings swept over a short window,
each point a real replay with ``--decider claude`` against the fake Messages API (as the cost
bench), so every figure is measured, not modelled.

Each point prints dollars and model calls per simulated day, the decisions delta gating made
without a call and, of those, the ones whose answer would have differed (the skipped snapshot
re-asked offline through the same request rendering and the fake's deterministic answerer: an
answer with a BUY or SELL where the daemon placed nothing), and the same for position reviews
(a kept HOLD re-asked: EXIT or ADD). The default grid moves one setting at a time around the
configured defaults (``--full``: every combination), plus a point with delta gating off.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_cost import compare_skipped, compare_skipped_reviews, run_cost_replay
from report.cost import cost_summary
from runner.config import Settings
from runner.replay.build import ReplayOptions


@dataclass(frozen=True)
class Point:
    """One grid point; ``None`` fields keep the configured value."""

    name: str
    gating: bool = True
    price_move_sigmas: float | None = None
    max_unchanged_hours: float | None = None
    review_min_move_pct: float | None = None
    review_at_risk_move_pct: float | None = None
    loud_zscore: float | None = None

    def apply(self, settings: Settings) -> Settings:
        agent = settings.agent
        delta: dict[str, Any] = {"enabled": self.gating}
        for key in (
            "price_move_sigmas",
            "max_unchanged_hours",
            "review_min_move_pct",
            "review_at_risk_move_pct",
        ):
            if getattr(self, key) is not None:
                delta[key] = getattr(self, key)
        tiers = agent.tiers
        if self.loud_zscore is not None:
            tiers = tiers.model_copy(update={"loud_zscore": self.loud_zscore})
        agent = agent.model_copy(update={"delta": agent.delta.model_copy(update=delta)})
        agent = agent.model_copy(update={"tiers": tiers})
        return settings.model_copy(update={"agent": agent})


@dataclass(frozen=True)
class Axes:
    sigmas: tuple[float, ...]
    max_hours: tuple[float, ...]
    review_move: tuple[float, ...]
    review_at_risk: tuple[float, ...]
    loud_z: tuple[float, ...]


def grid(axes: Axes, full: bool) -> list[Point]:
    """The gating-off point, the defaults, then one axis at a time (or every combination)."""
    points = [Point("gating off", gating=False), Point("defaults")]
    if full:
        points += [
            Point(
                f"s={s:g} h={h:g} r={r:g} a={a:g} z={z:g}",
                price_move_sigmas=s,
                max_unchanged_hours=h,
                review_min_move_pct=r,
                review_at_risk_move_pct=a,
                loud_zscore=z,
            )
            for s in axes.sigmas
            for h in axes.max_hours
            for r in axes.review_move
            for a in axes.review_at_risk
            for z in axes.loud_z
        ]
        return points
    points += [Point(f"sigmas={v:g}", price_move_sigmas=v) for v in axes.sigmas]
    points += [Point(f"max_hours={v:g}", max_unchanged_hours=v) for v in axes.max_hours]
    points += [Point(f"review_move={v:g}%", review_min_move_pct=v) for v in axes.review_move]
    points += [
        Point(f"review_at_risk={v:g}%", review_at_risk_move_pct=v) for v in axes.review_at_risk
    ]
    points += [Point(f"loud_z={v:g}", loud_zscore=v) for v in axes.loud_z]
    return points


@dataclass(frozen=True)
class Measured:
    usd_per_day: float
    calls_per_day: float
    review_calls_per_day: float
    skipped: int
    skipped_differing: int
    reviews_kept: int
    reviews_differing: int


async def measure(point: Point, settings: Settings, options: ReplayOptions) -> Measured:
    configured = point.apply(settings)
    records = await run_cost_replay(options, configured)
    summary = cost_summary(records, options.days)
    reviews = next((r for r in summary.by_layer if r.name == "review"), None)
    skipped, differing = compare_skipped(records, configured)
    kept, exits = compare_skipped_reviews(records, configured)
    return Measured(
        usd_per_day=summary.per_day(summary.total.cost_usd),
        calls_per_day=summary.per_day(summary.total.calls),
        review_calls_per_day=summary.per_day(reviews.calls if reviews else 0),
        skipped=skipped,
        skipped_differing=differing,
        reviews_kept=kept,
        reviews_differing=exits,
    )


HEADER = (
    f"  {'point':<22} {'$/day':>7} {'calls/d':>8} {'rev c/d':>8} {'skipped':>8} "
    f"{'differ':>7} {'rev kept':>9} {'differ':>7}"
)


def row(point: Point, m: Measured) -> str:
    return (
        f"  {point.name:<22} {m.usd_per_day:7.3f} {m.calls_per_day:8.1f} "
        f"{m.review_calls_per_day:8.1f} {m.skipped:8d} {m.skipped_differing:7d} "
        f"{m.reviews_kept:9d} {m.reviews_differing:7d}"
    )


async def sweep(
    points: Sequence[Point], settings: Settings, options: ReplayOptions
) -> list[tuple[Point, Measured]]:
    agent = settings.agent
    print(
        f"  defaults: delta price_move_sigmas={agent.delta.price_move_sigmas:g} "
        f"max_unchanged_hours={agent.delta.max_unchanged_hours:g} "
        f"review_min_move_pct={agent.delta.review_min_move_pct:g} "
        f"review_at_risk_move_pct={agent.delta.review_at_risk_move_pct:g} "
        f"tiers loud_zscore={agent.tiers.loud_zscore:g}; models {agent.model} / "
        f"{agent.tiers.routine_model}; prices as of {agent.prices.as_of}"
    )
    print("  differ: skipped passes whose re-asked answer had an order (reviews: EXIT or ADD)")
    print(HEADER, flush=True)
    results = []
    for point in points:
        with tempfile.TemporaryDirectory(prefix="bench_cost_sweep_") as tmp:
            run = ReplayOptions(
                start_ms=options.start_ms,
                end_ms=options.end_ms,
                out_dir=Path(tmp) / "run",
                tickers=options.tickers,
                decider="claude",
            )
            measured = await measure(point, settings, run)
        results.append((point, measured))
        print(row(point, measured), flush=True)
    return results


def run_sweep(points: Sequence[Point], settings: Settings, options: ReplayOptions) -> None:
    asyncio.run(sweep(points, settings, options))
