"""The state store and the two journals every daemon (live, simulator, replay) opens first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.bus import EventBus
from core.clock import Clock
from core.errors import RefuseToStartError
from core.failpoints import Failpoints
from core.redact import Redactor
from core.regular_file import refuse_unless_regular
from runner.config import Settings
from state.csv_widen import widen_csv_columns
from state.journal import CsvJournal, JsonlJournal
from state.journal_health import FAULT_FILE_NAME, JournalHealth
from state.records import TRADE_COLUMNS, TRADE_COLUMNS_V1
from state.state_dir import refuse_package_dir
from state.state_file import STATE_DIR_SETTING
from state.store import RunnerStateStore


def _prepare_logs_dir(logs_dir: Path) -> None:
    """The store has created and probed the state dir; its logs/ may still be unusable."""
    try:
        logs_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise RefuseToStartError(
            f"{logs_dir} cannot be created ({exc.strerror or exc}); fix the state dir's "
            f"ownership/permissions or point {STATE_DIR_SETTING} elsewhere"
        ) from None


@dataclass
class Journals:
    """The state store and the two journals every daemon (live, simulator, replay) writes."""

    store: RunnerStateStore
    decisions: JsonlJournal
    trades: CsvJournal


def open_journals(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    *,
    state_edits: bool = True,
    state_durable: bool = True,
) -> Journals:
    """``state_edits=False``: nobody edits ``runner_state.json`` while this runs (replay).
    ``state_durable=False``: its saves skip fsync (replay: rerun, never recovered)."""
    refuse_package_dir(settings.state_dir)
    store = RunnerStateStore(
        settings.runner_state_path,
        clock,
        Redactor(settings.secret_values()),
        edits=state_edits,
        durable=state_durable,
    )
    store.load()  # creates the state dir and refuses to start if it is not writable
    _prepare_logs_dir(settings.logs_dir)
    fsync = settings.state.fsync_journals
    health = JournalHealth(settings.state_dir / FAULT_FILE_NAME)  # read by people and `health`
    decisions_path = settings.logs_dir / "decisions.jsonl"
    trades_path = settings.logs_dir / "trades.csv"
    refuse_unless_regular(decisions_path)
    refuse_unless_regular(trades_path)  # before either opens: a refusal would leave one open
    decisions = JsonlJournal(
        decisions_path,
        fsync=fsync,
        clock=clock,
        health=health,
        rotation=settings.journal,  # by day / size, gzipped, pruned (state.rotation)
        failpoint=Failpoints(settings.failpoints).hit,
    )
    widen_csv_columns(trades_path, TRADE_COLUMNS_V1, TRADE_COLUMNS)  # a state dir from before
    trades = CsvJournal(trades_path, TRADE_COLUMNS, fsync=fsync, clock=clock, health=health)
    return Journals(store, decisions, trades)
