"""The notifier: ``publish`` never waits (a bounded queue per hook; when full the oldest
notification goes, counted and told in the next one), and ``run`` (a supervised loop) posts each
notification to every webhook that wants it, each hook on its own under its own token bucket,
retrying a refused or failed POST with the one retry policy (``core.backoff``) on the daemon's
clock. A hook that stays down costs its notifications, never the daemon nor the other hooks: the
failure is logged (without the URL, which holds a secret) and counted."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import aiohttp

from api.notify.config import NotifyConfig, WebhookConfig
from api.notify.messages import Notification, exit_notification, fill_notification, payload
from core.backoff import retrying
from core.clock import Clock
from core.events import Event, OrderFilled, PositionExit
from state.line_text import as_one_line

log = logging.getLogger(__name__)

RETRY_AFTER_CAP_SECS = 300.0
ERROR_TEXT_BYTES = 200  # of an error answer, quoted in the log line


class SendError(Exception):
    """A POST the hook refused or failed; ``retryable`` for 429, 5xx and transport errors (not
    for a url aiohttp refuses, nor a host name the resolver cannot encode)."""

    def __init__(self, message: str, *, retryable: bool, retry_after_secs: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_secs = retry_after_secs


@dataclass
class NotifyStats:
    published: int = 0
    sent: int = 0  # POSTs a hook accepted
    failed: int = 0  # notifications a hook never accepted (after the retries)
    retried: int = 0
    dropped: int = 0  # lost to a full queue
    rate_limited: int = 0  # waits for the token bucket


class TokenBucket:
    def __init__(self, per_minute: float, burst: int, now_secs: float) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._tokens = float(burst)
        self._at = now_secs

    def take(self, now_secs: float) -> float:
        """Take a token: 0 if one was there, else the seconds to wait for it (then taken)."""
        self._tokens = min(self._burst, self._tokens + (now_secs - self._at) * self._rate)
        self._at = now_secs
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate


@dataclass
class _Lane:
    """One hook's own queue and bucket: a hook that asks to wait (Retry-After) or never answers
    holds back its own notifications only."""

    hook: WebhookConfig
    queue: asyncio.Queue[Notification]
    bucket: TokenBucket
    dropped_since_sent: int = 0


class Notifier:
    def __init__(self, config: NotifyConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        now = clock.monotonic_secs()
        self._lanes = [
            _Lane(hook, asyncio.Queue(config.queue_size),
                  TokenBucket(config.max_per_minute, config.burst, now))
            for hook in config.webhooks
        ]  # fmt: skip
        self.stats = NotifyStats()

    @property
    def enabled(self) -> bool:
        return bool(self._config.webhooks)

    @property
    def queued(self) -> int:
        return sum(lane.queue.qsize() for lane in self._lanes)

    def publish(self, notification: Notification) -> None:
        """Queue a notification for each hook that wants it, without waiting (safe on the
        decision and tick paths)."""
        if not self.enabled:
            return
        self.stats.published += 1
        for lane in self._lanes:
            if notification.event not in lane.hook.events:
                continue
            if lane.queue.full():
                lane.queue.get_nowait()
                self.stats.dropped += 1
                lane.dropped_since_sent += 1
            lane.queue.put_nowait(notification)

    def on_event(self, event: Event) -> None:
        """A bus subscriber: fills and exits."""
        if isinstance(event, OrderFilled):
            self.publish(fill_notification(event))
        elif isinstance(event, PositionExit):
            self.publish(exit_notification(event))

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self._config.timeout_secs)
        async with aiohttp.ClientSession(timeout=timeout) as http, asyncio.TaskGroup() as lanes:
            for lane in self._lanes:
                lanes.create_task(self._drain(http, lane))

    async def _drain(self, http: aiohttp.ClientSession, lane: _Lane) -> None:
        while True:
            notification = await lane.queue.get()
            if lane.dropped_since_sent:
                notification = notification.model_copy(
                    update={"dropped_before": lane.dropped_since_sent}
                )
                lane.dropped_since_sent = 0
            await self._send(http, lane.hook, lane.bucket, notification)

    async def _send(
        self,
        http: aiohttp.ClientSession,
        hook: WebhookConfig,
        bucket: TokenBucket,
        notification: Notification,
    ) -> None:
        wait = bucket.take(self._clock.monotonic_secs())
        if wait > 0:
            self.stats.rate_limited += 1
            await self._clock.sleep(wait)
        body = payload(hook, notification)

        def worth_retrying(exc: BaseException) -> bool:
            if isinstance(exc, SendError) and exc.retryable:
                self.stats.retried += 1
                return True
            return False

        try:
            async for attempt in retrying(
                self._config.retry,
                self._clock,
                retry_on=worth_retrying,
                wait_hint=lambda e: e.retry_after_secs if isinstance(e, SendError) else None,
            ):
                with attempt:
                    await _post(http, hook, body)
        except asyncio.CancelledError:
            raise
        except SendError as exc:
            self.stats.failed += 1
            log.warning(
                "%s notification to a %s webhook not sent: %s", notification.event, hook.kind, exc
            )
        else:
            self.stats.sent += 1


async def _post(http: aiohttp.ClientSession, hook: WebhookConfig, body: object) -> None:
    try:
        # a redirect is not followed: a 301/302 was followed as a GET without the body, and its
        # 200 counted a notification the hook never got as sent
        url = hook.url.get_secret_value()
        async with http.post(url, json=body, allow_redirects=False) as response:
            if 200 <= response.status < 300:
                return
            # the head of the answer is enough to say why; text() read it whole and raised
            # UnicodeDecodeError (ending the loop) on an error page that was not UTF-8
            head = await response.content.read(ERROR_TEXT_BYTES)
            retry_after = _retry_after(response.headers.get("Retry-After"))
    except aiohttp.InvalidURL:
        # a host that reads as an IPv4 address but is none (256.1.1.1) passes the config's check
        # and is refused here, before any connection: asking again gets the same answer
        raise SendError("the url cannot be requested", retryable=False) from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        # the exception's text may hold the URL; its type is enough to say what happened
        raise SendError(f"{type(exc).__name__}", retryable=True) from None
    except UnicodeError:
        # the resolver's idna encoding refuses the host (an empty or over-long label): the url
        # is the person's to fix, and asking again gets the same answer
        raise SendError("the url's host name cannot be looked up", retryable=False) from None
    # the peer's words go into one log line: its CR/LF wrote lines that read as vigil's own
    text = as_one_line(head.decode("utf-8", errors="replace"))
    if response.status < 200:
        text = "not an answer to a POST (the receiver switched protocols)"
    elif response.status < 400:
        text = "a redirect, not followed (set the webhook's url to where it leads)"
    retryable = response.status == 429 or response.status >= 500
    raise SendError(
        f"HTTP {response.status}: {text}", retryable=retryable, retry_after_secs=retry_after
    )


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else min(RETRY_AFTER_CAP_SECS, max(0.0, float(value)))
    except ValueError:
        return None


__all__ = ["Notifier", "NotifyStats", "SendError", "TokenBucket"]
