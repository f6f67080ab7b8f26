"""A finished run's summary, read from the ``report.json`` and ``replay.json`` its replay wrote.

The API does not import the report package (both are adapters): it reads the report's JSON, and
says the summary is unavailable, with why, when the file is missing or not the report's shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.runs_models import RunSummary
from core.jsonread import loads_json
from core.regular_file import read_regular_file

REPORT_FILE = "report.json"
REPLAY_FILE = "replay.json"
#: a run's JSON files are kilobytes: one past this is no file vigil wrote, and is not read whole
FILE_MAX_BYTES = 64 << 20


def _read(path: Path) -> dict[str, Any]:
    # a FIFO there waited for a writer (the API froze); a huge one was read whole
    body = loads_json(read_regular_file(path, max_bytes=FILE_MAX_BYTES)[1])
    if not isinstance(body, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return body


def read_summary(run_dir: Path) -> tuple[RunSummary | None, str]:
    """The summary, or None and the reason it is unavailable."""
    try:
        report = _read(run_dir / REPORT_FILE)
    except FileNotFoundError:
        return None, f"the run wrote no {REPORT_FILE} (see replay.log in its folder)"
    except (OSError, ValueError) as exc:
        return None, f"{REPORT_FILE} cannot be read: {exc}"
    try:
        replay: dict[str, Any] = _read(run_dir / REPLAY_FILE)
    except (OSError, ValueError):
        replay = {}
    try:
        return _summary(report, replay), ""
    # any shape but the report's: int('x'), inf's int, a list's .items() (which escaped the
    # runs worker's own handler and ended its loop); ValidationError is a ValueError
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        return None, f"{REPORT_FILE} is not a report vigil wrote: {exc!r}"


def _summary(report: dict[str, Any], replay: dict[str, Any]) -> RunSummary:
    metrics: dict[str, Any] = report["metrics"]
    deciders = {str(d["decided_by"]): int(d["decisions"]) for d in report["deciders"]}
    hold = report.get("buy_and_hold_figures") or {}
    unavailable = {str(k): str(v) for k, v in (report.get("unavailable") or {}).items()}
    if not replay:
        unavailable["finished"] = f"the run wrote no readable {REPLAY_FILE}"
    return RunSummary(
        finished=replay.get("finished"),
        decisions=sum(deciders.values()),
        fills=replay.get("fills"),
        start_equity_usd=metrics.get("start_equity_usd"),
        end_equity_usd=metrics.get("end_equity_usd"),
        total_return_pct=metrics.get("total_return_pct"),
        max_drawdown_pct=metrics.get("max_drawdown_pct"),
        sharpe=metrics.get("sharpe"),
        win_rate_pct=metrics.get("win_rate_pct"),
        round_trips=metrics.get("round_trips"),
        fees_usd=metrics.get("fees_usd"),
        buy_and_hold_return_pct={
            str(t): figures.get("total_return_pct") for t, figures in hold.items()
        },
        deciders=deciders,
        wall_secs=replay.get("wall_secs"),
        unavailable=unavailable,
    )


__all__ = ["FILE_MAX_BYTES", "read_summary"]
