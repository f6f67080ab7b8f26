"""Faults on demand for the simulator's websocket server, so tests can break the feed on purpose.

``WsFaults`` is the test's remote control. Faults that act at once (dropping connections, announcing
a shutdown) go through the ``FaultTarget`` the server attaches; faults that change what is sent
(stall, malformed and out-of-order frames) are left pending here and taken by the server's senders
on their next frame. Every injected fault is counted in ``counts``, so a test can check that what it
asked for actually happened before asserting how the client coped.
"""

from __future__ import annotations

import itertools
import logging
from enum import StrEnum
from typing import Any, Protocol

import orjson
from pydantic import BaseModel, ConfigDict

from core.clock import Clock

log = logging.getLogger(__name__)


class MalformedKind(StrEnum):
    """The kinds of bad frame ``send_malformed`` cycles through, in this order."""

    GARBAGE = "garbage"  # not JSON at all
    TRUNCATED = "truncated"  # a real frame cut in half
    NAN_PRICE = "nan_price"  # well-formed JSON, price "NaN"
    NEGATIVE_PRICE = "negative_price"  # well-formed JSON, price below zero


class FaultCounts(BaseModel):
    """How many of each fault has actually been injected so far."""

    model_config = ConfigDict(frozen=True)
    connections_dropped: int = 0
    stalls: int = 0
    malformed_sent: int = 0
    out_of_order_sent: int = 0
    shutdowns_announced: int = 0
    handshakes_rejected: int = 0


class FaultTarget(Protocol):
    """What the server offers the faults that act immediately."""

    def abort_connections(self) -> int:
        """Close every connection's TCP socket without a closing handshake; how many."""
        ...

    def announce_shutdown(self, grace_secs: float) -> int:
        """Send ``serverShutdown`` on every connection, close them after ``grace_secs``; how many."""
        ...


class WsFaults:
    """Inject websocket faults: drop, stall, malformed, out of order, shutdown, refused handshakes."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._target: FaultTarget | None = None
        self._stalled_until_ms = 0
        self._malformed_pending = 0
        self._malformed_kinds = itertools.cycle(MalformedKind)
        self._out_of_order_pending = 0
        self._reject_pending = 0
        self._counts: dict[str, int] = dict.fromkeys(FaultCounts.model_fields, 0)

    def attach(self, target: FaultTarget) -> None:
        self._target = target

    @property
    def counts(self) -> FaultCounts:
        return FaultCounts(**self._counts)

    # --- faults a test asks for ---

    def drop_connections(self) -> int:
        """Abruptly close every open connection (no close frame: the client sees code 1006)."""
        dropped = self._require_target().abort_connections()
        self._counts["connections_dropped"] += dropped
        log.warning("fault: dropped %d websocket connection(s)", dropped)
        return dropped

    def stall(self, secs_sim: float) -> None:
        """Send nothing for ``secs_sim`` simulated seconds, keeping connections open.

        Frames that fall due meanwhile are lost, as after a real outage; pings and pongs still
        flow, so the connection looks alive at the protocol level (the nasty kind of stall).
        """
        if secs_sim <= 0:
            raise ValueError(f"stall needs a positive duration, got {secs_sim}")
        until_ms = self._clock.now_ms() + round(secs_sim * 1000)
        self._stalled_until_ms = max(self._stalled_until_ms, until_ms)
        self._counts["stalls"] += 1
        log.warning("fault: websocket feed stalled until %d (sim ms)", self._stalled_until_ms)

    def send_malformed(self, n: int) -> None:
        """Put ``n`` bad frames before the next ``n`` data frames (kinds cycle: ``MalformedKind``)."""
        self._malformed_pending += _positive(n)

    def send_out_of_order(self, n: int) -> None:
        """After each of the next ``n`` kline frames, re-send an older kline frame of that stream."""
        self._out_of_order_pending += _positive(n)

    def server_shutdown(self, grace_secs_sim: float = 0.0) -> int:
        """Send ``{"e":"serverShutdown","E":...}`` on every connection, then close them (1001)."""
        announced = self._require_target().announce_shutdown(grace_secs_sim)
        self._counts["shutdowns_announced"] += announced
        log.warning("fault: serverShutdown announced on %d connection(s)", announced)
        return announced

    def reject_handshakes(self, n: int) -> None:
        """Refuse the next ``n`` websocket handshakes with HTTP 503."""
        self._reject_pending += _positive(n)

    # --- what the server takes from here ---

    def stalled_until_ms(self, now_ms: int) -> int | None:
        """End of the stall in force at ``now_ms``, or None."""
        return self._stalled_until_ms if now_ms < self._stalled_until_ms else None

    def take_malformed(self) -> MalformedKind | None:
        if self._malformed_pending <= 0:
            return None
        self._malformed_pending -= 1
        self._counts["malformed_sent"] += 1
        return next(self._malformed_kinds)

    def take_out_of_order(self) -> bool:
        if self._out_of_order_pending <= 0:
            return False
        self._out_of_order_pending -= 1
        self._counts["out_of_order_sent"] += 1
        return True

    def take_reject(self) -> bool:
        if self._reject_pending <= 0:
            return False
        self._reject_pending -= 1
        self._counts["handshakes_rejected"] += 1
        return True

    def _require_target(self) -> FaultTarget:
        if self._target is None:
            raise RuntimeError("WsFaults is not attached to a running server")
        return self._target


def malformed_frame(kind: MalformedKind, frame: dict[str, Any]) -> bytes:
    """A bad version of ``frame`` (a combined-stream or raw kline / markPrice frame)."""
    if kind is MalformedKind.GARBAGE:
        return b"<<simulated garbage: not JSON at all {"  # valid UTF-8: a text frame
    if kind is MalformedKind.TRUNCATED:
        whole = orjson.dumps(frame)
        return whole[: len(whole) // 2]
    bad = "NaN" if kind is MalformedKind.NAN_PRICE else "-1"
    data = dict(frame.get("data", frame))
    if isinstance(data.get("k"), dict):
        data["k"] = {**data["k"], "c": bad}
    else:
        data["p"] = bad
    return orjson.dumps({**frame, "data": data} if "data" in frame else data)


def _positive(n: int) -> int:
    if n <= 0:
        raise ValueError(f"expected a positive count, got {n}")
    return n


__all__ = ["FaultCounts", "FaultTarget", "MalformedKind", "WsFaults", "malformed_frame"]
