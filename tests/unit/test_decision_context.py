"""The routine with the decision context wired: prompt info in the journal line, write-back after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from analyst_support import DAY1_MS, HOUR_MS, sent
from fakes.log_records import tracebacks
from test_decision_routine import TICKERS, FakeBroker, FakeGate, FakeStore, _snapshot

from agent.decision import AgentDecision, TradeDecision
from agent.decision_context import DecisionContext
from agent.prompt_assembly import AssembledPrompt, PromptAssembler
from agent.risk import RiskConfig, RiskContext
from agent.routine import DecisionRoutine
from agent.snapshot import MarketSnapshot, TickerSnapshot
from broker.port import Action
from core.bus import EventBus
from core.clock import VirtualClock
from memory.analyst_model import utc_day
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler
from memory.session_store import SessionStore, session_key
from memory.tiers import ProjectTier, TierError


class PromptDecider:
    def __init__(self, answers: list[AgentDecision]) -> None:
        self.answers = answers
        self.prompts: list[AssembledPrompt | None] = []

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        self.prompts.append(prompt)
        return self.answers.pop(0)


def _answer(action: Action, pct: float = 0.0) -> AgentDecision:
    return AgentDecision(
        decisions=(
            TradeDecision(
                ticker="BTC/USDT",
                action=action,
                position_pct=pct,
                reasoning="Breakout with funding flat.",
            ),
        ),
        decided_by="claude",
    )


def _routine(
    clock: VirtualClock, decider: PromptDecider, context: Any, journal: list[Mapping[str, Any]]
) -> DecisionRoutine:
    async def build(reasons: Sequence[str], *, decision_id: str = "") -> MarketSnapshot:
        view = TickerSnapshot(
            price=90_000.0,
            change_1h_pct=None,
            return_4h_pct=None,
            return_24h_pct=None,
            volume_24h=None,
            volume_ratio=None,
            return_zscore=None,
        )
        return _snapshot(reasons, clock.now_ms()).model_copy(update={"tickers": {"BTC/USDT": view}})

    class _J:
        def append(self, record: Mapping[str, Any]) -> None:
            journal.append(record)

        async def append_async(self, record: Mapping[str, Any]) -> None:
            journal.append(record)

    return DecisionRoutine(
        clock,
        EventBus(),
        build_snapshot=build,
        decider=decider,
        risk_context=lambda _s: RiskContext(
            whitelist=TICKERS,
            portfolio_value_usd=10_000.0,
            cash_usd=10_000.0,
            prices={"BTC/USDT": 90_000.0},
        ),
        risk_config=RiskConfig(),
        broker=FakeBroker(),
        gate=FakeGate(),
        journal=_J(),
        store=FakeStore(),
        context=context,
    )


async def test_prompt_in_journal_and_write_back(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    session = SessionStore(tmp_path / "sessions", clock)
    project = ProjectTier(tmp_path)
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nKeep BTC small on Mondays.\n")
    context = DecisionContext(
        PromptAssembler(ContextAssembler(project=project, session=session)),
        session=session,
        project=project,
    )
    decider = PromptDecider([_answer(Action.BUY, 0.1), _answer(Action.SELL)])
    journal: list[Mapping[str, Any]] = []
    routine = _routine(clock, decider, context, journal)
    await routine.decide_once(["agent_timer"])
    line = journal[-1]
    assert line["prompt"]["hash"] == decider.prompts[0].info.hash  # type: ignore[union-attr]
    assert line["prompt"]["context_chars"] <= 6000
    assert line["prompt"]["tiers_loaded"] == ["project", "session"]
    assert "Keep BTC small" in decider.prompts[0].texts["memory"]  # type: ignore[union-attr]
    thesis = session_key("BTC/USDT", "analysis", "thesis")
    assert session.get(thesis) == "Breakout with funding flat."
    assert (
        "- [auto 2025-01-01 BTC/USDT] BUY 10% by claude: Breakout"
        in (tmp_path / "MEMORY.md").read_text()
    )
    await clock.advance(60)
    await routine.decide_once(["agent_timer"])
    assert "ticker:btc_usdt:analysis:thesis" in decider.prompts[1].texts["session"]  # type: ignore[union-attr]
    assert session.get(thesis) is None  # sold: the thesis is gone
    assert session.get(session_key("BTC/USDT", "decision"))["action"] == "SELL"


class _Failing:
    async def prepare(self, snapshot: MarketSnapshot) -> AssembledPrompt:
        raise OSError("disk gone")

    def after(self, decision: AgentDecision, at_ms: int) -> None:
        raise OSError("disk gone")


async def test_failing_context_never_fails_the_decision() -> None:
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    decider = PromptDecider([_answer(Action.HOLD)])
    journal: list[Mapping[str, Any]] = []
    await _routine(clock, decider, _Failing(), journal).decide_once(["agent_timer"])
    line = journal[-1]
    assert "error" not in line and line["decided_by"] == "claude"
    assert line["context_error"] == "OSError: disk gone" and "prompt" not in line
    assert decider.prompts == [None]


def test_a_memory_md_that_is_not_utf8_is_left_alone_and_every_ticker_is_still_written(
    tmp_path: Path,
) -> None:
    """The first ticker's MEMORY.md line fails: the second ticker's session entries are still
    written, the person's file stays byte for byte, and the failure is raised once, after."""
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    session = SessionStore(tmp_path / "sessions", clock)
    project = ProjectTier(tmp_path)
    person_bytes = b"# MEMORY\nLatin-1 from an old editor: caf\xe9\n"
    (tmp_path / "MEMORY.md").write_bytes(person_bytes)
    context = DecisionContext(PromptAssembler(None), session=session, project=project)
    decision = AgentDecision(
        decisions=(
            TradeDecision(
                ticker="BTC/USDT", action=Action.BUY, position_pct=0.1, reasoning="Breakout."
            ),
            TradeDecision(
                ticker="ETH/USDT", action=Action.BUY, position_pct=0.1, reasoning="Follows BTC."
            ),
        ),
        decided_by="claude",
    )
    with pytest.raises(TierError, match=r"MEMORY\.md: .*left as it is, its \[auto\] line"):
        context.after(decision, clock.now_ms())
    assert (tmp_path / "MEMORY.md").read_bytes() == person_bytes
    for ticker, reasoning in (("BTC/USDT", "Breakout."), ("ETH/USDT", "Follows BTC.")):
        assert session.get(session_key(ticker, "analysis", "thesis")) == reasoning


async def test_a_session_file_that_cannot_be_written_is_kept_and_written_when_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A session file that cannot be written (a folder in its place, as a full disk): the entry
    is kept in memory for the next prompts and written once the path frees, the decision's
    other entries and its MEMORY.md line are still written, and the log says so once, not
    with a traceback per decision."""
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    session = SessionStore(tmp_path / "sessions", clock)
    project = ProjectTier(tmp_path)
    context = DecisionContext(
        PromptAssembler(ContextAssembler(project=project, session=session)),
        session=session,
        project=project,
    )
    blocked = tmp_path / "sessions" / "ticker__btc_usdt__decision.json"
    blocked.mkdir(parents=True)
    answers = [_answer(Action.BUY, 0.1), _answer(Action.HOLD), _answer(Action.HOLD)]
    journal: list[Mapping[str, Any]] = []
    routine = _routine(clock, PromptDecider(answers), context, journal)
    for _ in range(3):
        await routine.decide_once(["agent_timer"])
        await clock.advance(60)

    thesis = session_key("BTC/USDT", "analysis", "thesis")
    assert session.get(thesis) == "Breakout with funding flat."
    assert session.get(session_key("BTC/USDT", "decision"))["action"] == "HOLD"
    assert "[auto 2025-01-01 BTC/USDT] BUY 10%" in (tmp_path / "MEMORY.md").read_text()
    assert not tracebacks(caplog)
    (said,) = [r for r in caplog.records if "kept in memory" in r.getMessage()]
    assert "decision.json" in said.getMessage()

    blocked.rmdir()
    session.set(thesis, "Still a breakout.")
    assert b'"HOLD"' in blocked.read_bytes() and "written again" in caplog.records[-1].getMessage()


def test_a_sell_whose_thesis_file_is_a_folder_still_writes_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder where the sold ticker's thesis file should be: the thesis is dropped all the
    same, said once, and the decision's other tickers and MEMORY.md lines are written. Its
    IsADirectoryError ended the write-back with a traceback at each sell of that ticker."""
    clock = VirtualClock(epoch_ms=1_735_689_600_000)
    session = SessionStore(tmp_path / "sessions", clock)
    project = ProjectTier(tmp_path)
    context = DecisionContext(PromptAssembler(None), session=session, project=project)
    (tmp_path / "sessions" / "ticker__btc_usdt__analysis__thesis.json" / "inner").mkdir(
        parents=True
    )
    decision = AgentDecision(
        decisions=(
            TradeDecision(
                ticker="BTC/USDT", action=Action.SELL, position_pct=0.0, reasoning="Out."
            ),
            TradeDecision(ticker="ETH/USDT", action=Action.BUY, position_pct=0.1, reasoning="In."),
        ),
        decided_by="claude",
    )
    context.after(decision, clock.now_ms())
    (said,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "thesis" in said.getMessage() and not said.exc_info
    assert session.get(session_key("BTC/USDT", "analysis", "thesis")) is None
    assert session.get(session_key("ETH/USDT", "analysis", "thesis")) == "In."
    memory_md = (tmp_path / "MEMORY.md").read_text()
    assert "BTC/USDT] SELL" in memory_md and "ETH/USDT] BUY" in memory_md


class _Sent:
    """A snapshot as the context reads it: its time and its JSON."""

    def __init__(self, at_ms: int, price: float) -> None:
        self.at_ms = at_ms
        self._sent = sent(price)

    def as_sent(self) -> dict[str, Any]:
        return self._sent

    def to_json_bytes(self) -> bytes:
        return orjson.dumps(self._sent)


class _Prompts:
    def __init__(self) -> None:
        self.assembled = 0

    async def assemble(self, snapshot: Any, sent: Any) -> Any:
        self.assembled += 1
        return None


async def test_an_analysts_db_that_is_full_is_said_once_and_written_again_when_it_frees(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """analysts.db full (SQLite's max_page_count reached: "database or disk is full", as on a
    full disk): each decision goes on without the analysts, the first failure is logged with
    its traceback and the repeats are not (a decision every few minutes logged one each), and
    the reports are written again once the database can grow."""
    store = AnalystStore(tmp_path / "analysts.db")
    desk = AnalystDesk(store, ["BTC/USDT"])
    prompts = _Prompts()
    context = DecisionContext(prompts, analysts=desk)  # type: ignore[arg-type]
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    hours = iter(range(100))
    for _ in range(12):  # the pages' free room takes a few reports, then it is full
        await context.prepare(_Sent(DAY1_MS + next(hours) * HOUR_MS, 86_000.0))  # type: ignore[arg-type]

    assert prompts.assembled == 12
    assert len(tracebacks(caplog)) == 1
    assert "database or disk is full" in caplog.text
    day = utc_day(DAY1_MS)
    kept = len(store.reports("market", "BTC/USDT", day, day))
    assert kept < 12

    store._db.execute("PRAGMA max_page_count = 1073741823")
    await context.prepare(_Sent(DAY1_MS + next(hours) * HOUR_MS, 87_000.0))  # type: ignore[arg-type]
    assert len(store.reports("market", "BTC/USDT", day, day)) == kept + 1
    assert "again" in caplog.records[-1].getMessage()
