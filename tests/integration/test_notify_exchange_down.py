"""The notifier's watcher while the exchange cannot answer: a sim daemon trading through ccxt on
the simulator's endpoints, with the simulator stopped. The account is then unknown, not the end
of the notify loop, and a halt meanwhile is still told."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from fakes.webhook_receiver import webhook_receiver
from pydantic import SecretStr

from api.notify.config import NotifyConfig, WebhookConfig
from runner.app import build_daemon
from runner.config import BrokerConfig, MarketConfig, Settings


async def test_an_exchange_that_cannot_answer_leaves_the_notify_loop_running(
    tmp_path: Path,
) -> None:
    """The watcher's look at the daemon asked the broker for the equity and let its typed error
    out: the notify loop restarted at every look, and no halt was told while the exchange was
    down (when a halt is most likely)."""
    async with webhook_receiver() as rx:
        hook = WebhookConfig(url=SecretStr(rx.url + "/hook"))
        settings = Settings(
            state_dir=tmp_path / "state",
            market=MarketConfig(source="sim"),
            broker=BrokerConfig(kind="ccxt"),
            notify=NotifyConfig(webhooks=(hook,), watch_interval_secs=1.0),
        )
        daemon = await build_daemon(settings)
        assert daemon.operator is not None and daemon.operator.notify is not None
        try:
            await daemon.sim.stop()  # the exchange is down from here
            task = asyncio.create_task(daemon.operator.notify.run())
            try:
                trading = daemon.decision.trading
                async with asyncio.timeout(60):  # a hang guard only
                    # a halt is news only after the watcher's first look: toggled until told
                    while "trading_halted" not in rx.events("/hook") and not task.done():
                        if trading.halted:
                            trading.resume(by="test")
                        else:
                            trading.halt("exchange down", by="test")
                        await asyncio.sleep(0.5)
                assert not task.done(), task.exception()
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            await daemon.market.exchange.close()
            close = daemon.decision.broker_parts.close
            if close is not None:
                await close()
