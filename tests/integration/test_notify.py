"""The notifier against a webhook receiver on loopback: each hook gets its shape (generic JSON,
Telegram, Discord, Slack), a 503 / 429 is retried with backoff (Retry-After honoured), a 400 is
not, a full queue drops the oldest and says so, and the token bucket spaces a burst out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from fakes.webhook_receiver import Receiver, webhook_receiver
from pydantic import SecretStr

from api.notify.config import NotifyConfig, WebhookConfig
from api.notify.messages import Notification
from api.notify.notifier import Notifier
from core.backoff import Backoff
from core.clock import VirtualClock, WallClock
from core.events import OrderFilled

FAST_RETRY = Backoff(base_secs=0.01, cap_secs=0.05, max_attempts=3)
AT_MS = 1_740_787_200_000


def hook(receiver: Receiver, path: str, **extra: object) -> WebhookConfig:
    return WebhookConfig.model_validate({"url": SecretStr(receiver.url + path), **extra})


def fill() -> OrderFilled:
    return OrderFilled(at_ms=AT_MS, client_order_id="d1-BTC", ticker="BTC/USDT", side="buy",
                       quantity=0.01, price=84_000.0, fee=0.168)  # fmt: skip


@contextlib.asynccontextmanager
async def running(notifier: Notifier) -> AsyncIterator[Notifier]:
    task = asyncio.create_task(notifier.run())
    try:
        yield notifier
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_each_hook_gets_its_shape() -> None:
    async with webhook_receiver() as rx:
        config = NotifyConfig(
            webhooks=(
                hook(rx, "/generic"),
                hook(rx, "/bot123:abc/sendMessage", kind="telegram", chat_id="-100"),
                hook(rx, "/discord", kind="discord"),
                hook(rx, "/slack", kind="slack", events=["exit"]),  # fills not wanted
            ),
            retry=FAST_RETRY,
        )
        async with running(Notifier(config, WallClock())) as notifier:
            notifier.on_event(fill())
            await rx.wait_until(lambda: len(rx.received) == 3, 10)
    generic = rx.received["/generic"][0]
    assert generic["event"] == "fill" and generic["source"] == "vigil"
    assert generic["fields"]["ticker"] == "BTC/USDT" and generic["fields"]["price"] == 84_000.0
    assert generic["message"].startswith("vigil fill 2025-03-01 00:00:00Z: BUY 0.01 BTC/USDT")
    telegram = rx.received["/bot123:abc/sendMessage"][0]
    assert telegram["chat_id"] == "-100" and telegram["text"] == generic["message"]
    assert rx.received["/discord"][0]["content"] == generic["message"]
    assert "/slack" not in rx.received
    assert notifier.stats.sent == 3 and notifier.stats.failed == 0


async def test_text_from_elsewhere_cannot_ping_or_link_in_slack() -> None:
    """A halt's reason may quote an exchange's or a loop's error text; Slack reads <!channel>,
    <@user> and <url|label> in a message's text as commands, so it pinged everyone or showed a
    link the text had made up. Discord's mentions were already turned off."""
    reason = "decision d1: exchange said <!channel> <@U0123|ops> & <https://evil.example|docs>"
    async with webhook_receiver() as rx:
        config = NotifyConfig(webhooks=(hook(rx, "/slack", kind="slack"),), retry=FAST_RETRY)
        async with running(Notifier(config, WallClock())) as notifier:
            notifier.publish(Notification(event="trading_halted", at_ms=AT_MS, text=reason))
            await rx.wait_until(lambda: "/slack" in rx.received, 10)
    text = rx.received["/slack"][0]["text"]
    assert "<" not in text and ">" not in text
    assert text.endswith(
        "exchange said &lt;!channel&gt; &lt;@U0123|ops&gt; &amp; &lt;https://evil.example|docs&gt;"
    )


async def test_a_refusal_is_retried_and_a_bad_request_is_not() -> None:
    async with webhook_receiver() as rx:
        rx.script["/flaky"] = [(503, {}), (429, {"Retry-After": "0.05"})]
        rx.script["/broken"] = [(400, {})] * 5
        config = NotifyConfig(webhooks=(hook(rx, "/flaky"), hook(rx, "/broken")), retry=FAST_RETRY)
        async with running(Notifier(config, WallClock())) as notifier:
            notifier.on_event(fill())
            await rx.wait_until(lambda: bool(rx.received["/flaky"]), 10)
            while notifier.stats.failed + notifier.stats.sent < 2:
                await asyncio.sleep(0.01)
    assert rx.attempts["/flaky"] == 3 and len(rx.received["/flaky"]) == 1
    assert rx.attempts["/broken"] == 1  # a 400 will not get better by asking again
    assert (notifier.stats.sent, notifier.stats.failed, notifier.stats.retried) == (1, 1, 2)


async def test_a_hook_that_stays_down_costs_its_notifications_only() -> None:
    async with webhook_receiver() as rx:
        rx.script["/down"] = [(500, {})] * 100
        config = NotifyConfig(webhooks=(hook(rx, "/down"),), retry=FAST_RETRY)
        async with running(Notifier(config, WallClock())) as notifier:
            for _ in range(2):
                notifier.on_event(fill())
            while notifier.stats.failed < 2:
                await asyncio.sleep(0.01)
    assert rx.attempts["/down"] == 2 * FAST_RETRY.max_attempts


async def test_a_hook_that_asks_to_wait_does_not_hold_back_the_others() -> None:
    """The hooks were posted to one after the other from one queue: a receiver answering 429
    with Retry-After: 300 held every other hook's notifications for up to 15 minutes each (and
    the queue, full meanwhile, dropped them)."""
    async with webhook_receiver() as rx:
        rx.script["/busy"] = [(429, {"Retry-After": "300"})] * 100
        config = NotifyConfig(
            webhooks=(hook(rx, "/busy"), hook(rx, "/generic")),
            retry=Backoff(base_secs=0.01, cap_secs=0.05, max_attempts=4),
        )
        async with running(Notifier(config, WallClock())) as notifier:
            for n in range(3):
                notifier.publish(Notification(event="health", at_ms=AT_MS + n, text=f"n{n}"))
            await rx.wait_until(lambda: len(rx.received["/generic"]) == 3, 10)
            assert rx.attempts["/busy"] == 1  # still waiting as asked
    assert [body["text"] for body in rx.received["/generic"]] == ["n0", "n1", "n2"]


async def test_a_full_queue_drops_the_oldest_and_says_so() -> None:
    async with webhook_receiver() as rx:
        config = NotifyConfig(webhooks=(hook(rx, "/generic"),), queue_size=2, retry=FAST_RETRY)
        notifier = Notifier(config, WallClock())
        for n in range(5):  # not running yet: nothing drains the queue
            notifier.publish(Notification(event="health", at_ms=AT_MS + n, text=f"n{n}"))
        assert notifier.stats.dropped == 3 and notifier.queued == 2
        async with running(notifier):
            await rx.wait_until(lambda: len(rx.received["/generic"]) == 2, 10)
    first, second = rx.received["/generic"]
    assert (first["text"], first["dropped_before"]) == ("n3", 3)
    assert "3 earlier notifications dropped" in first["message"]
    assert second["dropped_before"] == 0


async def test_the_token_bucket_spaces_a_burst_out() -> None:
    """On a virtual clock the test moves only while the notifier waits on it: on the wall clock a
    stall of the process between two sends refilled the bucket, and the third went unthrottled."""
    async with webhook_receiver() as rx:
        config = NotifyConfig(
            webhooks=(hook(rx, "/generic"),), max_per_minute=600, burst=2, retry=FAST_RETRY
        )
        clock = VirtualClock()
        async with running(Notifier(config, clock)) as notifier:
            for n in range(4):
                notifier.publish(Notification(event="health", at_ms=AT_MS + n, text=f"n{n}"))
            async with asyncio.timeout(10):  # a hang guard only
                while len(rx.received["/generic"]) < 4:
                    if not await clock.step():  # nothing waits on the clock: a POST in flight
                        await asyncio.sleep(0.001)
    # 2 at once, then one per 0.1 s: 0.2 s for the other two
    assert clock.monotonic_secs() == pytest.approx(0.2)
    assert [body["text"] for body in rx.received["/generic"]] == ["n0", "n1", "n2", "n3"]
    assert notifier.stats.rate_limited == 2


def test_config_refuses_a_telegram_hook_without_a_chat_and_a_non_http_url() -> None:
    with pytest.raises(ValueError, match="chat_id"):
        WebhookConfig.model_validate({"url": "https://x/bot1/sendMessage", "kind": "telegram"})
    with pytest.raises(ValueError, match="http"):
        WebhookConfig.model_validate({"url": "file:///etc/passwd"})
