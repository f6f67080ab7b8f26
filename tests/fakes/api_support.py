"""A state dir with a few decisions, fills, notes and a paper account, and the API served on it
on loopback (a real uvicorn server on a free port), for the API's integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import aiohttp
import pytest

from api.app import ApiContext, Extension, create_app
from api.config import ApiConfig
from api.files import StateDirFiles
from api.metrics import DaemonCounts, DaemonMetrics
from api.models import AccountBody, AgentBody, GateBody, LoopBody, StreamBody
from api.ports import LiveDaemon, TradingControl
from api.server import ApiServer
from broker.ledger import Ledger, Position
from broker.orders import Mark
from broker.paper_store import PaperBookDocument, write_document
from runner.config import Settings
from state.edits import StateEditReport
from state.journal import encode_jsonl_record
from state.models import RunnerState, render_state
from state.records import TRADE_COLUMNS, DecisionRecord

TOKEN = "test-token-0123456789"
T0_MS = 1_740_787_200_000  # 2025-03-01T00:00:00Z


def decision_line(n: int, at_ms: int, equity_usd: float | None = None) -> bytes:
    record = DecisionRecord(
        snapshot=None if equity_usd is None else {"portfolio_value": equity_usd},
        decision_id=f"d{at_ms}-{n}",
        at_ms=at_ms,
        trigger=["agent_timer"],
        decided_by="fallback",
        decider_reason="no_api_key",
        raw_decision={"decisions": [{"ticker": "BTC/USDT", "action": "HOLD"}]},
    )
    return encode_jsonl_record(record.as_line())


@contextlib.contextmanager
def default_settings(tmp_path: Path) -> Iterator[Settings]:
    """The defaults over a written state dir, whatever the caller's shell says; a child process
    (a replay run through the API) inherits this environment."""
    config_file = tmp_path / "vigil.toml"
    config_file.write_text("# empty: the defaults\n")
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("VIGIL_") or name == "ANTHROPIC_API_KEY":
                patch.delenv(name)
        patch.setenv("VIGIL_CONFIG_FILE", str(config_file))
        patch.setenv("VIGIL_STATE_DIR", str(state_dir))
        yield Settings()


def write_state_dir(state_dir: Path, decisions: int = 5) -> None:
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "decisions.jsonl").open("wb") as out:
        for n in range(decisions):
            out.write(decision_line(n, T0_MS + n * 60_000))
            out.write(encode_jsonl_record({"type": "review", "at_ms": T0_MS + n * 60_000 + 1,
                                           "tickers": [], "decided_by": "fallback"}))  # fmt: skip
    (logs / "trades.csv").write_text(
        ",".join(TRADE_COLUMNS) + "\n"
        f"{T0_MS + 60_000},c1,BTC/USDT,buy,0.01,84000.0,0.168\n"
        f"{T0_MS + 120_000},c2,BTC/USDT,sell,0.01,85000.0,0.425\n"
    )
    (state_dir / "runner_state.json").write_bytes(
        render_state(RunnerState(agent_memory="Trend is up.", notes="watch SOL"))
    )
    ledger = Ledger(
        starting_cash_usd=Decimal("10000.00"),
        cash_usd=Decimal("9160.00"),
        reserved_usd=Decimal("0.00"),
        positions={
            "ETH/USDT": Position(
                ticker="ETH/USDT",
                quantity=Decimal("0.4"),
                cost_basis_usd=Decimal("840.00"),
                opened_at_ms=T0_MS,
            )
        },
    )
    document = PaperBookDocument(
        saved_at_ms=T0_MS, ledger=ledger, marks={"ETH/USDT": Mark(2200.0, T0_MS)}
    )
    write_document(state_dir / "paper_broker.json", document)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """``write_state_dir``'s state dir at ``tmp_path / "state"``, for the API tests (a plugin of
    the suite, ``tests/conftest.py``); a module that needs another defines its own, which wins."""
    state = tmp_path / "state"
    write_state_dir(state)
    return state


@dataclass
class Served:
    url: str
    token: str
    session: aiohttp.ClientSession

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def get(self, path: str, **params: str | int) -> tuple[int, object]:
        async with self.session.get(self.url + path, headers=self.auth, params=params) as r:
            return r.status, await r.json()


@contextlib.asynccontextmanager
async def serve_api(
    state_dir: Path,
    *,
    daemon: LiveDaemon | None = None,
    trading: TradingControl | None = None,
    extensions: list[Extension] | None = None,
    config: ApiConfig | None = None,
    metrics: DaemonMetrics | None = None,
) -> AsyncIterator[Served]:
    ctx = ApiContext(
        files=StateDirFiles(state_dir),
        config=config or ApiConfig(port=0),
        token=TOKEN,
        daemon=daemon,
        trading=trading,
        extensions=extensions or [],
        metrics=metrics,
    )
    server = ApiServer(create_app(ctx), "127.0.0.1", 0, state_dir)
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        assert server.url is not None
        async with aiohttp.ClientSession() as session:
            yield Served(server.url, TOKEN, session)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class IdleDaemon:
    """``api.ports.LiveDaemon`` with nothing going on: no loops, streams, calls or gate passes;
    subclasses set the clock."""

    agent_enabled = False

    def now_ms(self) -> int:
        return T0_MS

    def loops(self) -> list[LoopBody]:
        return []

    def streams(self) -> list[StreamBody]:
        return []

    def agent(self) -> AgentBody:
        return AgentBody(
            enabled=self.agent_enabled,
            breaker="closed",
            budget_limit_usd=None,
            budget_left_today_usd=None,
            budget_exhausted=False,
            calls=0,
            failed_calls=0,
            input_tokens=0,
            output_tokens=0,
            cost_total_usd=0.0,
            cost_today_usd=0.0,
        )

    def gate(self) -> GateBody:
        return GateBody(
            evaluations=0, passes=0, passes_by_layer={}, last_pass_at_ms=None, last_wake_reasons=[]
        )

    async def account(self) -> AccountBody:
        return AccountBody(equity_usd=1.0, cash_usd=1.0, starting_cash_usd=1.0, positions=[])

    def counts(self) -> DaemonCounts:
        raise NotImplementedError("not scraped here")

    def poll_state(self) -> StateEditReport | None:
        return None
