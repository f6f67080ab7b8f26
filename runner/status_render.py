"""``vigil status``'s screen: one line a figure, positions indented, what is unknown and why."""

from __future__ import annotations

from datetime import UTC, datetime

from core.clock import utc_minute
from runner.status_cmd import StatusView
from state.line_text import as_one_line

TRIGGERS_SHOWN = 2


def render(view: StatusView) -> str:
    """The screen, each line with its control characters escaped: a halt reason, a decider's
    reason or an unavailable's why may come from a file a person or a model wrote."""
    source = "the daemon's API at" if view.source == "api" else "the state dir"
    lines = [f"vigil status from {source} {view.where} (as of {utc_minute(view.now_ms)})"]
    verdict = "healthy" if view.healthy else "UNHEALTHY"
    lines.append(f"health      {verdict}: {view.health[0]}")
    lines += [f"            {reason}" for reason in view.health[1:]]
    lines.append(f"trading     {_trading(view)}")
    lines.append(f"equity      {_equity(view)}")
    lines.append(f"PnL today   {_pnl_today(view)}")
    lines.append(f"breaker     {view.breaker or 'n/a'}    budget left today {_budget(view)}")
    positions = view.account.positions
    lines.append(f"positions   {len(positions)}")
    for p in positions:
        pnl = "n/a" if p.unrealised_pnl_usd is None else _signed_usd(p.unrealised_pnl_usd)
        pct = "" if p.unrealised_pnl_pct is None else f" ({p.unrealised_pnl_pct:+.2f} %)"
        mark = "n/a" if p.mark_price is None else f"{p.mark_price:,.2f}"
        lines.append(
            f"  {p.ticker:<10} qty {p.quantity:g}  entry {p.entry_price:,.2f}  mark {mark}  "
            f"PnL {pnl}{pct}"
        )
    lines.append(f"last        {_last(view)}")
    if view.unavailable:
        lines.append("unavailable")
        lines += [f"  {name}: {reason}" for name, reason in sorted(view.unavailable.items())]
    return "\n".join(as_one_line(line) for line in lines)


def _trading(view: StatusView) -> str:
    state = view.trading.state or "n/a"
    return f"{state} ({view.trading.reason})" if view.trading.reason else state


def _equity(view: StatusView) -> str:
    account = view.account
    if account.equity_usd is None:
        return "n/a"
    cash = "" if account.cash_usd is None else f"  (cash {_usd(account.cash_usd)})"
    return _usd(account.equity_usd) + cash


def _pnl_today(view: StatusView) -> str:
    if view.pnl_today_usd is None or view.pnl_today_since_ms is None:
        return "n/a"
    equity = view.account.equity_usd or 0.0
    base = equity - view.pnl_today_usd
    pct = f" ({view.pnl_today_usd / base * 100:+.2f} %)" if base else ""
    since = datetime.fromtimestamp(view.pnl_today_since_ms / 1000, tz=UTC).strftime("%H:%M")
    return f"{_signed_usd(view.pnl_today_usd)}{pct} since {since} UTC"


def _budget(view: StatusView) -> str:
    if view.budget_left_today_usd is None:
        return "n/a"
    limit = "" if view.budget_limit_usd is None else f" of {_usd(view.budget_limit_usd)}"
    return _usd(view.budget_left_today_usd) + limit


def _last(view: StatusView) -> str:
    d = view.last_decision
    if d is None:
        return "no decision yet"
    why = f" ({d.decider_reason})" if d.decider_reason else ""
    error = f"  error: {d.error}" if d.error else ""
    shown = ", ".join(d.trigger[:TRIGGERS_SHOWN])  # a candle close of every stream is 9 of them
    trigger = shown + (
        f" +{len(d.trigger) - TRIGGERS_SHOWN} more" if len(d.trigger) > TRIGGERS_SHOWN else ""
    )
    return f"{utc_minute(d.at_ms)} by {d.decided_by or 'n/a'}{why} on {trigger}{error}"


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _signed_usd(value: float) -> str:
    return ("+" if value >= 0 else "-") + _usd(abs(value))
