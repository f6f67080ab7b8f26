"""``GET /api/equity``: the equity line and its drawdown, sampled at decisions (the portfolio value
each decision's snapshot saw), across every journal segment, for the dashboard's charts.

A journal grows all day and a dashboard polls it, so the series is read incrementally: closed
segments once each (they never change), the live file from where the last read stopped (a
rotation makes it a new file, told by its inode). Only the ``portfolio_value`` of a line is kept;
the series is downsampled per bucket keeping each bucket's low and high, so a drawdown trough
or an equity peak survives the thinning.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict

from state.segments import open_live, open_segment, segments, whole_lines

Point = tuple[int, float]


class EquityBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    points: int  # equity points in the full series (every decision with a portfolio value)
    at_ms: list[int]  # the (downsampled) sample instants
    equity_usd: list[float]
    drawdown_pct: list[float]  # 0 at a running peak, positive below it
    start_equity_usd: float | None  # the first point: the chart's baseline
    max_drawdown_pct: float | None  # on the full series
    unavailable: dict[str, str] = {}


def equity_of(line: bytes) -> Point | None:
    """(at_ms, portfolio_value) of a decision line; None for any other or torn line."""
    if not line.endswith(b"\n") or b'"portfolio_value"' not in line:
        return None
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(raw, dict) or raw.get("type", "decision") != "decision":
        return None
    snapshot = raw.get("snapshot")
    value = snapshot.get("portfolio_value") if isinstance(snapshot, dict) else None
    at_ms = raw.get("at_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(at_ms, int):
        return None
    return (at_ms, float(value)) if math.isfinite(value) else None


def drawdown_pct(series: list[Point]) -> list[float]:
    peak = -math.inf
    out = []
    for _, value in series:
        peak = max(peak, value)
        out.append(round((1 - value / peak) * 100, 4) if peak > 0 else 0.0)
    return out


def downsample(series: list[Point], max_points: int) -> list[int]:
    """Indices of at most about ``max_points`` points: per bucket its first, low and high."""
    if len(series) <= max_points:
        return list(range(len(series)))
    per_bucket = max(1, math.ceil(len(series) * 3 / max_points))
    kept: list[int] = []
    for start in range(0, len(series), per_bucket):
        stop = min(start + per_bucket, len(series))
        span = range(start, stop)
        low = min(span, key=lambda i: series[i][1])
        high = max(span, key=lambda i: series[i][1])
        kept.extend(sorted({start, low, high}))
    if kept[-1] != len(series) - 1:
        kept.append(len(series) - 1)
    return kept


@dataclass
class EquityReader:
    """The full equity series of one journal, kept up to date by ``read`` (thread-safe)."""

    live: Path
    _closed: dict[str, list[Point]] = field(default_factory=dict)
    _live_inode: int | None = None
    _live_offset: int = 0
    _live_points: list[Point] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> list[Point]:
        with self._lock:
            series: list[Point] = []
            paths = segments(self.live)
            closed = [p for p in paths if p != self.live]
            for path in closed:
                if path.name not in self._closed:
                    self._closed[path.name] = [
                        p for p in map(equity_of, open_segment(path)) if p is not None
                    ]
                series.extend(self._closed[path.name])
            known = {p.name for p in closed}
            for name in [n for n in self._closed if n not in known]:
                del self._closed[name]  # removed by retention
            series.extend(self._read_live())
            return series

    def _read_live(self) -> list[Point]:
        handle = open_live(self.live)
        if handle is None:
            self._live_inode, self._live_offset, self._live_points = None, 0, []
            return []
        with handle:
            inode = self._inode(handle.fileno())
            size = handle.seek(0, 2)
            if inode != self._live_inode or size < self._live_offset:
                self._live_inode, self._live_offset, self._live_points = inode, 0, []
            start = handle.seek(self._live_offset)
            # whole lines only (a line being written is read next time), in blocks: iterated
            # lines, a crash's zeros after the last one were read as one line, whole
            for line, end in whole_lines(handle):
                self._live_offset = start + end
                point = equity_of(line)
                if point is not None:
                    self._live_points.append(point)
        return list(self._live_points)

    @staticmethod
    def _inode(fd: int) -> int:
        return os.fstat(fd).st_ino


def equity_body(series: list[Point], max_points: int) -> EquityBody:
    if not series:
        return EquityBody(
            points=0,
            at_ms=[],
            equity_usd=[],
            drawdown_pct=[],
            start_equity_usd=None,
            max_drawdown_pct=None,
            unavailable={"equity": "no decision with a portfolio value in the journal yet"},
        )
    drawdown = drawdown_pct(series)
    shown = downsample(series, max_points)
    return EquityBody(
        points=len(series),
        at_ms=[series[i][0] for i in shown],
        equity_usd=[round(series[i][1], 2) for i in shown],
        drawdown_pct=[drawdown[i] for i in shown],
        start_equity_usd=round(series[0][1], 2),
        max_drawdown_pct=max(drawdown),
    )


__all__ = ["EquityBody", "EquityReader", "downsample", "drawdown_pct", "equity_body", "equity_of"]
