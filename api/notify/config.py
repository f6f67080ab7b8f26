"""``[notify]``: where notifications go and how hard vigil tries.

``VIGIL_NOTIFY__WEBHOOKS='[{"url": "https://...", "kind": "slack"}]'`` or in vigil.toml::

    [[notify.webhooks]]
    url = "https://api.telegram.org/bot<token>/sendMessage"
    kind = "telegram"
    chat_id = "-1001234"

A webhook URL usually carries its secret (a bot token, a Discord/Slack webhook key), so it is a
secret string: never logged, shown as ``**********`` by ``vigil config show``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from yarl import URL

from core.backoff import Backoff

HookKind = Literal["generic", "telegram", "discord", "slack"]
EventKind = Literal[
    "fill", "exit", "trading_halted", "trading_resumed", "breaker_opened", "breaker_closed",
    "health", "daily_summary",
]  # fmt: skip
ALL_EVENTS: tuple[EventKind, ...] = (
    "fill", "exit", "trading_halted", "trading_resumed", "breaker_opened", "breaker_closed",
    "health", "daily_summary",
)  # fmt: skip


class WebhookConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: SecretStr
    kind: HookKind = "generic"
    chat_id: str | None = None  # telegram: the chat the bot posts to
    events: tuple[EventKind, ...] = ALL_EVENTS  # which notifications this hook gets

    @model_validator(mode="after")
    def _telegram_needs_a_chat(self) -> WebhookConfig:
        if self.kind == "telegram" and not self.chat_id:
            raise ValueError("a telegram webhook needs chat_id")
        _check_url(self.url.get_secret_value())
        return self


def _check_url(url: str) -> None:
    """Refuse a url no POST can reach: each notification to it was retried as if the hook were
    down. The url is never quoted (it holds the hook's secret; with no ``://`` the whole of it
    was quoted as its scheme)."""
    try:
        parsed = URL(url)
        host, port = parsed.host, parsed.port
    except ValueError:  # a port that is not a number or past 65535, an unclosed [
        raise ValueError("a webhook url that cannot be read (its port, host or brackets)") from None
    if parsed.scheme not in {"http", "https"}:
        raise ValueError("a webhook url must be http(s)://host/...")
    if not host:
        raise ValueError("a webhook url with no host")
    if not port:
        raise ValueError("a webhook url with port 0")


class NotifyConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    webhooks: tuple[WebhookConfig, ...] = ()  # none: no notifications, no notify loop
    queue_size: int = Field(256, ge=1)  # waiting notifications per hook; beyond, the oldest go
    max_per_minute: float = Field(20.0, gt=0)  # per hook, on the daemon's clock (a token bucket)
    burst: int = Field(5, ge=1)
    timeout_secs: float = Field(10.0, gt=0)  # one POST
    retry: Backoff = Backoff(base_secs=2.0, cap_secs=60.0, max_attempts=4)
    watch_interval_secs: float = Field(30.0, gt=0)  # trading/breaker/health looks, daemon clock
    daily_summary: bool = True  # at each UTC midnight of the daemon's clock

    def secret_values(self) -> list[str]:
        """Each hook's url, and the parts of it that carry its secret on their own: a receiver's
        error answer quotes its path (n8n: 'The requested webhook "POST <uuid>" is not
        registered'), and the whole url alone was redacted, so the uuid reached vigil.log."""
        values = []
        for hook in self.webhooks:
            url = hook.url.get_secret_value()
            values += [url, *_secret_parts(url)]
        return values


def _secret_parts(url: str) -> list[str]:
    """The user, password, path segments and query values that look like a token: with a digit
    (a uuid, a bot's id, 'SEKRETTOKEN9'), or 20 characters and more. Words such as 'webhooks'
    or 'sendMessage' are no secret, and redacting them would cut every log line naming them."""
    try:
        parsed = URL(url)
    except ValueError:
        return []
    parts = [parsed.user or "", parsed.password or "", *parsed.raw_parts, *parsed.parts]
    parts += [value for _, value in parsed.query.items()]
    return [p for p in dict.fromkeys(parts) if any(c.isdigit() for c in p) or len(p) >= 20]


__all__ = ["ALL_EVENTS", "EventKind", "HookKind", "NotifyConfig", "WebhookConfig"]
