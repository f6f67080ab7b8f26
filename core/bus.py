"""In-process event bus.

Two kinds of subscriber:

- **inline** (``subscribe``): a plain function called synchronously inside ``publish``. For cheap work
  on the hot path (the aggregator, counters). Handlers of a topic run in subscription order, events in
  publish order; an event published from inside a handler is queued behind the one being delivered
  (trampolined), so no handler ever sees events out of publish order.
- **queued** (``subscribe_queued``): an async handler fed through a bounded queue by its own consumer
  task. A slow consumer never grows memory without bound: when its queue is full the overflow policy
  applies, and every dropped or coalesced event is counted.

A handler that raises is logged with its traceback and counted; other handlers still run.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import OrderedDict, defaultdict, deque
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field

from core.events import Event

log = logging.getLogger(__name__)

InlineHandler = Callable[[Event], None]
AsyncHandler = Callable[[Event], Awaitable[None]]
KeyFn = Callable[[Event], Hashable]


class Overflow(enum.StrEnum):
    """What a full queue does with one more event."""

    DROP_OLDEST = "drop_oldest"  # evict the oldest pending event
    COALESCE = "coalesce"  # a pending event with the same key is replaced by the newer one


@dataclass
class SubscriberStats:
    delivered: int = 0
    failed: int = 0
    dropped: int = 0
    coalesced: int = 0


@dataclass(slots=True)
class _Inline:
    name: str
    handler: InlineHandler
    stats: SubscriberStats = field(default_factory=SubscriberStats)


class QueuedSubscriber:
    """A bounded mailbox and the consumer that drains it."""

    def __init__(
        self, name: str, handler: AsyncHandler, maxsize: int, overflow: Overflow, key: KeyFn
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.name = name
        self.maxsize = maxsize
        self.overflow = overflow
        self.stats = SubscriberStats()
        self._handler = handler
        self._key = key
        self._pending: OrderedDict[Hashable, Event] = OrderedDict()
        self._fifo: deque[Event] = deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._pending) if self.overflow is Overflow.COALESCE else len(self._fifo)

    @property
    def idle(self) -> bool:
        """Nothing queued and no handler running."""
        return self._idle.is_set()

    def offer(self, event: Event) -> None:
        if self.overflow is Overflow.COALESCE:
            self._offer_coalescing(event)
        else:
            if len(self._fifo) >= self.maxsize:
                self._fifo.popleft()
                self.stats.dropped += 1
            self._fifo.append(event)
        self._idle.clear()
        self._wakeup.set()

    def _offer_coalescing(self, event: Event) -> None:
        key = self._key(event)
        if key in self._pending:
            self._pending[key] = event  # keeps its place in line, carries the newest value
            self.stats.coalesced += 1
            return
        if len(self._pending) >= self.maxsize:
            self._pending.popitem(last=False)
            self.stats.dropped += 1
        self._pending[key] = event

    def _take(self) -> Event | None:
        if self.overflow is Overflow.COALESCE:
            return self._pending.popitem(last=False)[1] if self._pending else None
        return self._fifo.popleft() if self._fifo else None

    async def run(self) -> None:
        while True:
            event = self._take()
            if event is None:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                await self._handler(event)
                self.stats.delivered += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                self.stats.failed += 1
                log.exception("bus: queued handler %r failed on %s", self.name, event.topic)

    async def wait_idle(self) -> None:
        await self._idle.wait()


class EventBus:
    def __init__(self) -> None:
        self._inline: dict[str, list[_Inline]] = defaultdict(list)
        self._queued: dict[str, list[QueuedSubscriber]] = defaultdict(list)
        self._backlog: deque[Event] = deque()
        self._dispatching = False
        self._consumers: asyncio.TaskGroup | None = None  # set while run() runs
        self.published: dict[str, int] = defaultdict(int)
        #: per topic, its inline and queued subscribers as tuples: what ``_deliver`` walks,
        #: one lookup per event (a replay delivers millions of ticks); remade on subscribing
        self._routes: dict[str, tuple[tuple[_Inline, ...], tuple[QueuedSubscriber, ...]]] = {}

    def subscribe(self, topic: str, handler: InlineHandler, *, name: str | None = None) -> None:
        unique = self._unique_name(topic, name or _name_of(handler))
        self._inline[topic].append(_Inline(unique, handler))
        self._route(topic)

    def subscribe_queued(
        self,
        topic: str,
        handler: AsyncHandler,
        *,
        name: str | None = None,
        maxsize: int = 1024,
        overflow: Overflow = Overflow.DROP_OLDEST,
        key: KeyFn | None = None,
    ) -> QueuedSubscriber:
        unique = self._unique_name(topic, name or _name_of(handler))
        sub = QueuedSubscriber(unique, handler, maxsize, overflow, key or _topic_key)
        self._queued[topic].append(sub)
        self._route(topic)
        if self._consumers is not None:  # subscribed after run() started: consume it too
            self._consumers.create_task(sub.run(), name=f"bus:{sub.name}")
        return sub

    def _route(self, topic: str) -> None:
        # .get: a lookup must not add an empty entry to the other table (the defaultdicts keep
        # topics in the order they were first subscribed: stats and the consumers follow it)
        self._routes[topic] = (
            tuple(self._inline.get(topic, ())),
            tuple(self._queued.get(topic, ())),
        )

    def _unique_name(self, topic: str, name: str) -> str:
        """Stats are keyed ``topic:name``; a second ``<lambda>`` must not hide the first one."""
        taken = {s.name for s in self._inline.get(topic, ())}
        taken |= {q.name for q in self._queued.get(topic, ())}
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}#{n}"
        return unique

    def publish(self, event: Event) -> None:
        backlog = self._backlog
        if self._dispatching:
            backlog.append(event)
            return  # the outer publish delivers it after the current event: publish order holds
        if backlog:  # left behind by a delivery a BaseException cut short: those go first
            backlog.append(event)
            event = backlog.popleft()
        self._dispatching = True
        try:
            # the event itself is delivered without a trip through the backlog (most events
            # publish nothing while delivered); the ones they do publish follow in order
            self._deliver(event)
            while backlog:
                self._deliver(backlog.popleft())
        finally:
            self._dispatching = False

    def publish_each(self, events: Iterable[Event]) -> None:
        """``publish`` each event in turn, in one dispatch: the same deliveries in the same order
        (each event's own publications still come before the next event), without a dispatch
        per event (a replay's tick source publishes every stream's update of an instant at once)."""
        if self._dispatching or self._backlog:
            for event in events:
                self.publish(event)
            return
        backlog = self._backlog
        self._dispatching = True
        try:
            for event in events:
                self._deliver(event)
                while backlog:
                    self._deliver(backlog.popleft())
        finally:
            self._dispatching = False

    def _deliver(self, event: Event) -> None:
        topic = event.topic
        self.published[topic] += 1
        inline, queued_subs = self._routes.get(topic, _NO_ROUTE)
        for sub in inline:
            try:
                sub.handler(event)
                sub.stats.delivered += 1
            except Exception:
                sub.stats.failed += 1
                log.exception("bus: handler %r failed on %s", sub.name, topic)
        for queued in queued_subs:
            try:
                queued.offer(event)
            except Exception:  # a coalescing key function that raised: isolate it like a handler
                queued.stats.failed += 1
                log.exception("bus: key function of %r failed on %s", queued.name, topic)

    async def run(self) -> None:
        """Run every queued subscriber's consumer (also those subscribed later) until cancelled."""
        if self._consumers is not None:
            raise RuntimeError("EventBus.run() is already running")
        async with asyncio.TaskGroup() as group:
            self._consumers = group
            try:
                for sub in self._all_queued():
                    group.create_task(sub.run(), name=f"bus:{sub.name}")
                await asyncio.Event().wait()  # park; consumers run until cancelled
            finally:
                self._consumers = None

    async def drain(self) -> None:
        """Wait until every queued subscriber is idle at the same time.

        Events that queued handlers publish while draining are followed too, so after ``drain``
        nothing is queued anywhere. Needs ``run()`` to be running when anything is pending.
        """
        while busy := [sub for sub in self._all_queued() if not sub.idle]:
            for sub in busy:
                await sub.wait_idle()

    def _all_queued(self) -> list[QueuedSubscriber]:
        return [sub for subs in self._queued.values() for sub in subs]

    def stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for topic, inline in self._inline.items():
            for s in inline:
                out[f"{topic}:{s.name}"] = vars(s.stats).copy()
        for topic, queued in self._queued.items():
            for q in queued:
                out[f"{topic}:{q.name}"] = {**vars(q.stats), "queued": len(q)}
        return out


_NO_ROUTE: tuple[tuple[_Inline, ...], tuple[QueuedSubscriber, ...]] = ((), ())


def _topic_key(event: Event) -> Hashable:
    return event.topic


def _name_of(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)
