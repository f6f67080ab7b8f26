"""The run ``test_replay_two_weeks`` checks: the two weeks replayed in process (report written as
``vigil replay`` writes it) while ``vigil replay`` of the first day runs as a subprocess, then the
recomputation from ``logs/trades.csv`` and the recording (``replay_support``). Run once per module.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from fakes.daemon import REPO, daemon_env
from replay_support import (
    TICKERS,
    DecisionLine,
    RecomputedPoint,
    TradeRow,
    default_settings,
    equity_at_decisions,
    equity_usd,
    holdings_after,
    read_decisions,
    read_json,
    read_trades,
    replay_in_process,
    replay_options,
)

from report.html import write_report
from runner.config import Settings
from runner.replay.build import ReplayOptions
from runner.replay.command import ReplayOutcome
from sim.feed import SimFeed

FIRST_DAY = "2025-03-01"
DAYS = 14
CLI_TIMEOUT_SECS = 300.0


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stderr: str
    run_dir: Path


@dataclass(frozen=True)
class TwoWeeks:
    settings: Settings
    options: ReplayOptions
    outcome: ReplayOutcome
    run_dir: Path
    report: dict[str, Any]  # report.json as written
    trades: list[TradeRow]
    decisions: list[DecisionLine]
    recomputed: list[RecomputedPoint]  # one per decision line
    final: RecomputedPoint  # the paper ledger as saved at shutdown (the report's last point)
    feed: SimFeed
    cli: CliRun

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.report["metrics"])

    @property
    def values(self) -> list[float]:
        return [p.equity_usd for p in self.series]

    @property
    def series(self) -> list[RecomputedPoint]:
        """The report's equity series: every decision, then the final ledger value."""
        return [*self.recomputed, self.final]


def run_two_weeks(root: Path) -> TwoWeeks:
    """The two weeks in ``root / "run"``, the CLI's first day in ``root / "cli"``."""
    settings = default_settings(root)
    cli_dir, cli_log = root / "cli", root / "cli.log"
    with cli_log.open("wb") as log_file:
        cli = _start_cli(root, cli_dir, log_file)
        try:
            options = replay_options(root / "run", FIRST_DAY, DAYS)
            outcome = replay_in_process(settings, options)
            write_report(options.out_dir)
            cli.wait(timeout=CLI_TIMEOUT_SECS)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    feed = SimFeed(TICKERS, data_dir=settings.data_dir, update_interval_ms=options.update_ms())
    trades = read_trades(options.out_dir)
    decisions = read_decisions(options.out_dir)
    cash = settings.broker.starting_cash_usd
    recomputed = equity_at_decisions(decisions, trades, feed, cash)
    saved_ms = int(read_json(options.out_dir / "paper_broker.json")["saved_at_ms"])
    at_end = holdings_after(cash, trades, until_ms=saved_ms, skip=frozenset())
    final = RecomputedPoint(saved_ms, equity_usd(at_end, feed, saved_ms), bool(at_end.quantities))
    return TwoWeeks(
        settings,
        options,
        outcome,
        options.out_dir,
        read_json(options.out_dir / "report.json"),
        trades,
        decisions,
        recomputed,
        final,
        feed,
        CliRun(cli.returncode, cli_log.read_text(), cli_dir),
    )


def _start_cli(root: Path, run_dir: Path, log_file: BinaryIO) -> subprocess.Popen[bytes]:
    """``vigil replay`` of the first day, its stderr (progress, summary, warnings) to a file."""
    empty_config = root / "cli.toml"
    empty_config.write_text("# empty: the defaults\n")
    env = daemon_env(root / "unused_state", VIGIL_CONFIG_FILE=str(empty_config))
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "replay", "--from", FIRST_DAY, "--to", FIRST_DAY,
         "--out", str(run_dir)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log_file,
    )  # fmt: skip
