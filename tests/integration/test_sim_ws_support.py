"""Helpers for the simulator websocket tests (no tests here): a frame recorder and a clock driver."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from core.clock import VirtualClock

#: a safety net for waits on conditions; never reached when the code works
WAIT_SECS = 20.0


class Recorder:
    """Reads a client connection in the background, keeping every message in arrival order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.raw: list[str] = []
        self.frames: list[Any] = []  # parsed JSON, or None for a message that is not JSON
        self.done = False
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for message in self.ws:
                text = message if isinstance(message, str) else message.decode()
                self.raw.append(text)
                try:
                    self.frames.append(orjson.loads(text))
                except orjson.JSONDecodeError:
                    self.frames.append(None)
                async with self._changed:
                    self._changed.notify_all()
        except ConnectionClosed:
            pass
        finally:
            self.done = True
            async with self._changed:
                self._changed.notify_all()

    async def wait(self, condition: Callable[[], bool], timeout: float = WAIT_SECS) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)

    async def wait_count(self, n: int) -> None:
        await self.wait(lambda: len(self.frames) >= n or self.done)
        assert len(self.frames) >= n, f"connection ended after {len(self.frames)} of {n} frames"

    async def wait_closed(self) -> None:
        await self.wait(lambda: self.done)

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    @property
    def close_reason(self) -> str | None:
        return self.ws.close_reason

    async def aclose(self) -> None:
        await self.ws.close()
        await self._task


async def eventually(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (for state with no event to wait on, e.g. server stats)."""
    async with asyncio.timeout(WAIT_SECS):
        while not condition():
            await asyncio.sleep(0.001)


async def open_recorder(url: str) -> Recorder:
    ws = await connect(url, compression=None, open_timeout=WAIT_SECS, max_queue=1024)
    return Recorder(ws)


async def step_and_collect(
    clock: VirtualClock, recorder: Recorder, secs: float, expected_new_frames: int
) -> None:
    """Advance simulated time by ``secs`` and wait for the frames that became due."""
    target = len(recorder.frames) + expected_new_frames
    await clock.advance(secs)
    await recorder.wait_count(target)


def data_of(frame: dict[str, Any]) -> dict[str, Any]:
    inner: dict[str, Any] = frame.get("data", frame)
    return inner
