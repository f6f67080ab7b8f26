"""A notification and its shapes on the wire: generic JSON, Telegram ``sendMessage``, Discord and
Slack incoming webhooks. The text is one short line a phone shows whole."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.notify.config import EventKind, WebhookConfig
from core.events import OrderFilled, PositionExit

DISCORD_MAX_CHARS = 2000
#: a link in the text is not unfurled into a preview of the page (Telegram's
#: disable_web_page_preview)
DISCORD_SUPPRESS_EMBEDS = 1 << 2
#: what Discord reads as markdown or a mention; a backslash before each shows it as written
_DISCORD_MARKUP = re.compile(r"([\\*_~`|\[\]<>@])")
TELEGRAM_MAX_CHARS = 4096

Scalar = str | int | float | bool | None


class Notification(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event: EventKind
    at_ms: int  # the daemon's clock (simulated time against the simulator)
    text: str
    fields: dict[str, Scalar] = Field(default_factory=dict)
    dropped_before: int = 0  # notifications lost to a full queue just before this one


def utc(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def fill_notification(event: OrderFilled) -> Notification:
    notional = event.quantity * event.price
    return Notification(
        event="fill",
        at_ms=event.at_ms,
        text=(
            f"{event.side.upper()} {event.quantity:g} {event.ticker} at {event.price:,.2f} "
            f"({notional:,.2f} USD, fee {event.fee:,.4f})"
        ),
        fields={
            "ticker": event.ticker,
            "side": event.side,
            "quantity": event.quantity,
            "price": event.price,
            "fee_usd": event.fee,
            "client_order_id": event.client_order_id,
        },
    )


def exit_notification(event: PositionExit) -> Notification:
    hours = event.holding_secs / 3600
    return Notification(
        event="exit",
        at_ms=event.at_ms,
        text=f"EXIT {event.ticker} ({event.reason}): {event.pnl_pct:+.2f} % after {hours:.1f} h",
        fields={
            "ticker": event.ticker,
            "reason": event.reason,
            "pnl_pct": event.pnl_pct,
            "holding_secs": event.holding_secs,
            "regime": event.regime,
        },
    )


def line(n: Notification) -> str:
    text = f"vigil {n.event.replace('_', ' ')} {utc(n.at_ms)}: {n.text}"
    if n.dropped_before:
        text += f" ({n.dropped_before} earlier notifications dropped: queue full)"
    return text


def payload(hook: WebhookConfig, n: Notification) -> dict[str, Any]:
    """The JSON body the hook's kind expects."""
    text = line(n)
    if hook.kind == "telegram":
        return {
            "chat_id": hook.chat_id,
            "text": text[:TELEGRAM_MAX_CHARS],
            "disable_web_page_preview": True,
        }
    if hook.kind == "discord":
        return {
            "content": _discord_escaped(text)[:DISCORD_MAX_CHARS],
            "allowed_mentions": {"parse": []},
            "flags": DISCORD_SUPPRESS_EMBEDS,
        }
    if hook.kind == "slack":
        # Slack reads <!channel>, <@user> and <url|label> as commands: the text may quote an
        # exchange's or a loop's error, so its three control characters are escaped
        return {"text": text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")}
    return {"source": "vigil", "message": text, **n.model_dump(mode="json")}


def _discord_escaped(text: str) -> str:
    """``text`` as Discord shows it written: the text may quote an exchange's, a loop's or a
    person's words, and ``[label](url)`` showed a link as its label only (``@everyone`` and
    ``<@id>`` a mention, though pinging no one)."""
    return _DISCORD_MARKUP.sub(r"\\\1", text)


__all__ = [
    "Notification",
    "exit_notification",
    "fill_notification",
    "line",
    "payload",
    "utc",
]
