"""What the API reads from a state dir: the decisions journal (across rotated segments), fills,
runner_state.json, the paper account and the heartbeat. Used with and without a daemon."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from api.models import AccountBody, DecisionsPage, LastDecisionBody, PositionBody, TradingBody
from broker.ledger import LedgerError
from broker.orders import Mark
from broker.paper_store import InvalidPaperStateError, read_document
from core.regular_file import read_bytes_or_none
from market.guard import is_price
from state.heartbeat_age import FutureHeartbeatError, heartbeat_age_secs
from state.models import InvalidStateFileError, RunnerState, parse_state_bytes
from state.records import DecisionRecord, TradeRow, TradesFileError, parse_record, read_trades
from state.segments import UnreadableSegmentError, iter_lines, segments, tail_lines
from state.state_file import STATE_FILE_MAX_BYTES


class StateFileError(ValueError):
    """A state-dir file the API cannot read; the message names it and says why."""


@dataclass(frozen=True)
class StateDirFiles:
    state_dir: Path

    @property
    def decisions_path(self) -> Path:
        return self.state_dir / "logs" / "decisions.jsonl"

    @property
    def trades_path(self) -> Path:
        return self.state_dir / "logs" / "trades.csv"

    @property
    def runner_state_path(self) -> Path:
        return self.state_dir / "runner_state.json"

    def heartbeat(self) -> tuple[float | None, str | None]:
        """The heartbeat's age in real seconds (None: no file, or one dated in the future), and
        why it has none when it is dated in the future."""
        try:
            mtime_secs = (self.state_dir / "heartbeat").stat().st_mtime
        except OSError:
            return None, None
        try:
            return heartbeat_age_secs(mtime_secs, time.time()), None
        except FutureHeartbeatError as exc:
            return None, str(exc)

    def decisions(self, since_ms: int | None, limit: int) -> DecisionsPage:
        """Decisions after ``since_ms`` (oldest first, at most ``limit``); without ``since_ms``
        the newest ``limit``."""
        try:
            if since_ms is None:
                found = self._latest(limit)
                read = 1
            else:
                found, read = self._after(since_ms, limit)
        except OSError as exc:
            raise journal_error(exc) from None
        next_since = found[-1].at_ms if found else since_ms
        return DecisionsPage(decisions=found, next_since=next_since, segments_read=read)

    def last_decision(self) -> LastDecisionBody | None:
        try:
            latest = self._latest(1)
        except OSError as exc:
            raise journal_error(exc) from None
        if not latest:
            return None
        d = latest[0]
        return LastDecisionBody(
            decision_id=d.decision_id,
            at_ms=d.at_ms,
            decided_by=d.decided_by,
            decider_reason=d.decider_reason,
            trigger=d.trigger,
            error=d.error,
        )

    def _latest(self, limit: int) -> list[DecisionRecord]:
        # the newest lines of the live file; older segments only when it holds too few
        wanted: list[DecisionRecord] = []
        window = limit * 4 + 16  # reviews and failures are lines too
        for line in reversed(tail_lines(self.decisions_path, window)):
            record = _decision(line)
            if record is not None:
                wanted.append(record)
                if len(wanted) == limit:
                    break
        if len(wanted) < limit and len(segments(self.decisions_path)) > 1:
            everything = [r for r in map(_decision, iter_lines(self.decisions_path)) if r]
            return everything[-limit:]
        return list(reversed(wanted))

    def _after(self, since_ms: int, limit: int) -> tuple[list[DecisionRecord], int]:
        found: list[DecisionRecord] = []
        paths = segments(self.decisions_path)
        for path in paths:
            from state.segments import open_segment

            for line in open_segment(path):
                record = _decision(line)
                if record is not None and record.at_ms > since_ms:
                    found.append(record)
                    if len(found) == limit:
                        return found, len(paths)
        return found, len(paths)

    def trades(self, since_ms: int | None, limit: int) -> list[TradeRow]:
        try:
            rows = read_trades(self.trades_path) if self.trades_path.exists() else []
        except TradesFileError as exc:
            raise StateFileError(str(exc)) from None
        except OSError as exc:  # a folder in its place, no permission: was a 500
            why = exc.strerror or str(exc)  # "None" for an error raised with a message only
            raise StateFileError(f"{self.trades_path} cannot be read: {why}") from None
        if since_ms is not None:
            return [r for r in rows if r.at_ms > since_ms][:limit]
        return rows[-limit:]

    def runner_state(self) -> RunnerState:
        """The file as it is now; a missing file is a fresh state. ``StateFileError`` when it
        cannot be read: not a regular file (a FIFO would block the read), a state dir that is a
        file, no permission."""
        try:
            data = read_bytes_or_none(self.runner_state_path, max_bytes=STATE_FILE_MAX_BYTES)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise StateFileError(f"{self.runner_state_path} cannot be read: {why}") from None
        if data is None:
            return RunnerState()
        try:
            return parse_state_bytes(data)[0]
        except InvalidStateFileError as exc:
            raise StateFileError(f"{self.runner_state_path}: {exc.problem}") from None

    def trading(self) -> TradingBody:
        """The trading switch as ``runner_state.json`` holds it (``StateFileError`` as
        ``runner_state``): what a stopped daemon left, or ``vigil trading halt`` wrote."""
        switch = self.runner_state().trading
        return TradingBody(
            state=switch.mode, reason=switch.reason, changed_at_ms=switch.since_ms or None
        )

    def paper_account(self) -> AccountBody:
        """The paper account as last saved, marked at the last prices it saw."""
        path = self.state_dir / "paper_broker.json"
        try:
            document = read_document(path)
        except (InvalidPaperStateError, OSError) as exc:
            return no_account(f"{path} cannot be read: {exc}")
        if document is None:
            return no_account(f"no paper account at {path} (the ccxt broker keeps none)")
        ledger = document.ledger
        try:
            ledger.check_consistent()  # what the daemon refuses to load is not shown as true
        except LedgerError as exc:
            return no_account(f"{path} cannot be trusted: {exc}")
        except ArithmeticError:  # decimal's InvalidOperation: 1E+400 has no cents to round to
            return no_account(f"{path} cannot be trusted: an amount too large to be money")
        positions: list[PositionBody] = []
        marked_value = 0.0
        unmarked: list[str] = []
        for ticker, pos in sorted(ledger.positions.items()):
            mark, problem = _mark_price(ticker, document.marks.get(ticker))
            quantity = float(pos.quantity)
            entry = float(pos.average_entry_price)
            if not (quantity > 0 and math.isfinite(quantity) and math.isfinite(entry)):
                return no_account(f"{path}: {ticker} holds {pos.quantity}, not a quantity")
            body = position_body(ticker, quantity, entry, mark, pos.opened_at_ms)
            positions.append(body)
            marked_value += body.notional_usd
            if problem is not None:
                unmarked.append(problem)
        cash = float(ledger.cash_usd + ledger.reserved_usd)
        unavailable = {}
        if unmarked:
            unavailable["equity_usd"] = "; ".join(unmarked)
        return AccountBody(
            equity_usd=None if unmarked else round(cash + marked_value, 2),
            cash_usd=float(ledger.cash_usd),
            starting_cash_usd=float(ledger.starting_cash_usd),
            positions=positions,
            unavailable=unavailable,
        )


def _mark_price(ticker: str, mark: Mark | None) -> tuple[float | None, str | None]:
    """The saved price to mark ``ticker`` at, or None and why not. json reads NaN and Infinity
    as floats: a hand-damaged mark was a NaN equity served as null with no reason."""
    if mark is None:
        return None, f"no saved price for {ticker}"
    if not is_price(mark.price):
        return None, f"the saved price of {ticker} is {mark.price!r}, not a price"
    return mark.price, None


def position_body(
    ticker: str, quantity: float, entry_price: float, mark: float | None, opened_at_ms: int
) -> PositionBody:
    pnl = None if mark is None else (mark - entry_price) * quantity
    return PositionBody(
        ticker=ticker,
        quantity=quantity,
        entry_price=entry_price,
        mark_price=mark,
        notional_usd=quantity * (mark if mark is not None else entry_price),
        unrealised_pnl_usd=None if pnl is None else round(pnl, 2),
        # an entry price of 0 (a position of no cost basis) has no percentage: it was a 500
        unrealised_pnl_pct=(
            None if mark is None or entry_price <= 0 else round((mark / entry_price - 1) * 100, 4)
        ),
        opened_at_ms=opened_at_ms,
    )


def journal_error(exc: OSError) -> StateFileError:
    """A journal read's OSError (a torn segment, a folder in the live file's place) as the
    API's error naming the file: they were 500s."""
    if isinstance(exc, UnreadableSegmentError):
        return StateFileError(str(exc))
    return StateFileError(f"{exc.filename} cannot be read: {exc.strerror or exc}")


def no_account(reason: str) -> AccountBody:
    return AccountBody(
        equity_usd=None,
        cash_usd=None,
        starting_cash_usd=None,
        positions=[],
        unavailable={"account": reason},
    )


def _decision(line: bytes) -> DecisionRecord | None:
    """A decision line as its record; other line types, torn and unreadable lines: None."""
    if not line.endswith(b"\n") or b'"decision"' not in line:
        return None
    try:
        record = parse_record(orjson.loads(line))
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return None
    return record if isinstance(record, DecisionRecord) else None


__all__ = ["StateDirFiles", "StateFileError", "journal_error", "no_account", "position_body"]
