"""Discord renders a message's content as markdown: text from elsewhere (a halt's reason quoting
an exchange's or a loop's error, a person's reason) made a masked link ``[resume here](https://
evil.example)`` that showed only its label, a mention pill, or formatting; and a link in it was
unfurled into a preview of a page the text chose. Pings were already off (``allowed_mentions``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fakes.webhook_receiver import webhook_receiver
from pydantic import SecretStr

from api.notify.config import NotifyConfig, WebhookConfig
from api.notify.messages import Notification
from api.notify.notifier import Notifier
from core.backoff import Backoff
from core.clock import WallClock

AT_MS = 1_740_787_200_000
REASON = (
    "exchange said [resume here](https://evil.example/x) @everyone <@123456> <#42> "
    "**urgent** `code` ||hidden|| ~~old~~ __under__ \\[x](y) https://evil.example/preview"
)
SUPPRESS_EMBEDS = 1 << 2


@contextlib.asynccontextmanager
async def running(notifier: Notifier) -> AsyncIterator[Notifier]:
    task = asyncio.create_task(notifier.run())
    try:
        yield notifier
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_text_from_elsewhere_is_shown_as_written_in_discord() -> None:
    async with webhook_receiver() as rx:
        hook = WebhookConfig(url=SecretStr(rx.url + "/discord"), kind="discord")
        config = NotifyConfig(
            webhooks=(hook,), retry=Backoff(base_secs=0.01, cap_secs=0.05, max_attempts=2)
        )
        async with running(Notifier(config, WallClock())) as notifier:
            notifier.publish(Notification(event="trading_halted", at_ms=AT_MS, text=REASON))
            await rx.wait_until(lambda: "/discord" in rx.received, 10)
    body = rx.received["/discord"][0]
    assert body["allowed_mentions"] == {"parse": []}
    assert body["flags"] == SUPPRESS_EMBEDS  # no preview of a page the text links to
    content = body["content"]
    # each character Discord reads as markdown or a mention is escaped: shown as written
    assert content.endswith(
        r"exchange said \[resume here\](https://evil.example/x) \@everyone \<\@123456\> \<#42\> "
        r"\*\*urgent\*\* \`code\` \|\|hidden\|\| \~\~old\~\~ \_\_under\_\_ \\\[x\](y) "
        "https://evil.example/preview"
    )
