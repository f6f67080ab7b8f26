"""WsFaults: what a test asks for is handed to the server exactly once and counted."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from core.clock import VirtualClock
from sim.faults import MalformedKind, WsFaults, malformed_frame

KLINE_FRAME: dict[str, Any] = {
    "stream": "btcusdt@kline_5m",
    "data": {"e": "kline", "E": 1, "s": "BTCUSDT", "k": {"o": "1.0", "c": "2.0", "x": False}},
}


class _Target:
    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.aborted = 0
        self.graces: list[float] = []

    def abort_connections(self) -> int:
        self.aborted += 1
        return self.connections

    def announce_shutdown(self, grace_secs: float) -> int:
        self.graces.append(grace_secs)
        return self.connections


def test_immediate_faults_go_to_the_target_and_are_counted() -> None:
    faults = WsFaults(VirtualClock())
    target = _Target(connections=3)
    faults.attach(target)
    assert faults.drop_connections() == 3
    assert faults.server_shutdown(grace_secs_sim=5.0) == 3
    assert target.aborted == 1 and target.graces == [5.0]
    assert faults.counts.connections_dropped == 3
    assert faults.counts.shutdowns_announced == 3


def test_immediate_faults_need_a_server() -> None:
    with pytest.raises(RuntimeError, match="not attached"):
        WsFaults(VirtualClock()).drop_connections()


async def test_stall_lasts_its_simulated_duration() -> None:
    clock = VirtualClock(epoch_ms=1_000_000)
    faults = WsFaults(clock)
    faults.stall(30)
    assert faults.stalled_until_ms(clock.now_ms()) == 1_030_000
    await clock.advance(29.999)
    assert faults.stalled_until_ms(clock.now_ms()) == 1_030_000
    await clock.advance(0.001)
    assert faults.stalled_until_ms(clock.now_ms()) is None
    assert faults.counts.stalls == 1
    with pytest.raises(ValueError):
        faults.stall(0)


def test_pending_faults_are_taken_once_each() -> None:
    faults = WsFaults(VirtualClock())
    faults.send_malformed(5)
    kinds = [faults.take_malformed() for _ in range(6)]
    assert kinds == [*MalformedKind, MalformedKind.GARBAGE, None]
    faults.send_out_of_order(2)
    assert [faults.take_out_of_order() for _ in range(3)] == [True, True, False]
    faults.reject_handshakes(1)
    assert [faults.take_reject(), faults.take_reject()] == [True, False]
    counts = faults.counts
    assert (counts.malformed_sent, counts.out_of_order_sent, counts.handshakes_rejected) == (
        5,
        2,
        1,
    )
    with pytest.raises(ValueError):
        faults.send_malformed(0)


def test_malformed_frames_are_bad_in_the_way_they_say() -> None:
    garbage = malformed_frame(MalformedKind.GARBAGE, KLINE_FRAME)
    truncated = malformed_frame(MalformedKind.TRUNCATED, KLINE_FRAME)
    for bad in (garbage, truncated):
        bad.decode("utf-8")  # still a valid text frame
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(bad)
    assert orjson.dumps(KLINE_FRAME).startswith(truncated)
    nan = orjson.loads(malformed_frame(MalformedKind.NAN_PRICE, KLINE_FRAME))
    assert math.isnan(float(nan["data"]["k"]["c"])) and nan["stream"] == KLINE_FRAME["stream"]
    negative = orjson.loads(malformed_frame(MalformedKind.NEGATIVE_PRICE, KLINE_FRAME))
    assert float(negative["data"]["k"]["c"]) < 0
    assert negative["data"]["k"]["o"] == "1.0"  # only the price was spoiled


def test_malformed_mark_price_and_raw_frames() -> None:
    mark: dict[str, Any] = {"e": "markPriceUpdate", "E": 1, "s": "BTCUSDT", "p": "5.0"}
    assert orjson.loads(malformed_frame(MalformedKind.NEGATIVE_PRICE, mark))["p"] == "-1"
    raw_kline = KLINE_FRAME["data"]
    assert orjson.loads(malformed_frame(MalformedKind.NAN_PRICE, raw_kline))["k"]["c"] == "NaN"
