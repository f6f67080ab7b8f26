"""``vigil replay``'s argument parser (kept free of heavy imports: the CLI builds it at start)."""

from __future__ import annotations

from typing import Any

from runner.cli_text import path_argument, usdt_ticker


def add_replay_parser(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="the daemon over recorded history on the virtual clock, with a report"
    )
    replay.add_argument(
        "--from", dest="replay_from", help="first day, ISO 8601 (UTC), e.g. 2025-03-01"
    )
    replay.add_argument("--to", dest="replay_to", help="last day, inclusive, e.g. 2025-03-14")
    replay.add_argument(
        "--out", type=path_argument, help="the run folder to create, e.g. runs/march"
    )
    replay.add_argument(
        "--tickers", nargs="+", type=usdt_ticker, help="a subset of the configured tickers"
    )
    replay.add_argument(
        "--speed", dest="replay_speed", default="max", help="max (default) or N x real time"
    )
    replay.add_argument("--decider", choices=("fallback", "claude", "debate"), default="fallback")
    replay.add_argument(
        "--no-memory",
        action="store_true",
        help="keep the agent's notes and the learner out of the snapshots",
    )
    replay.add_argument(
        "--seed",
        type=int,
        default=42,
        help="the regime models' EM seed and every retry's jitter",
    )
    replay.add_argument(
        "--update-secs",
        type=float,
        help="kline update interval per stream, simulated seconds (divides the base bar; "
        "default a quarter of it: 75 on 5m bars)",
    )
    replay.add_argument(
        "--data-dir",
        type=path_argument,
        help="recorded data folder (vigil data fetch/import; default the bundled data/)",
    )
    replay.add_argument(
        "--base-interval",
        choices=("1m", "3m", "5m", "15m"),
        help="base bar to replay on (default: the finest recorded for every ticker)",
    )
    replay.add_argument("--verbose", action="store_true", help="log at the configured level")
    replay.add_argument(
        "--compare", nargs=2, type=path_argument, metavar=("RUN_A", "RUN_B"), help="side by side"
    )


__all__ = ["add_replay_parser"]
