"""analysts.db rows as a person or a bad write may leave them (a ``figures`` that is not JSON, a
NULL, a confidence of text, a time that is no instant, a day that is not the report's): the row is
left out of every read with one warning naming it, kept in the file, and the other rows and the
four analysts work on. Driven as a decision drives them (``DecisionContext.prepare``: roll, then
observe, then the context's summaries)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from analyst_support import DAY1_MS, HOUR_MS, sent
from fakes.log_records import tracebacks

from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from agent.snapshot import MarketSnapshot
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler

DAY = 24 * HOUR_MS


TICKER = "BTC/USDT"


async def _three_days(path: Path) -> None:
    """Reports of days 1 to 3 and the summaries day 3's first decision made."""
    desk = AnalystDesk(AnalystStore(path), [TICKER])
    for hour in range(0, 68, 4):
        at_ms = DAY1_MS + hour * HOUR_MS
        await desk.roll(at_ms)
        desk.observe(sent(86_000 + hour * 50, regime="low" if hour % 8 else "high"), at_ms)
    desk.store.close()


def _snapshot(at_ms: int) -> MarketSnapshot:
    fields = sent(87_000 + at_ms % 1000)
    fields["tickers"][TICKER] |= {"volume_24h": None, "volume_ratio": None}
    fields["regime"]["macro_exposure"] = 1.0
    return MarketSnapshot.model_validate(
        {**fields, "at_ms": at_ms, "btc_price": 87_000.0, "btc_change_1h_pct": None,
         "btc_change_24h_pct": None, "exposure_scale": 0.8, "open_positions": [],
         "portfolio_value": 10_000.0, "cash": 10_000.0, "gate_wake_reasons": ["agent_timer"]}
    )  # fmt: skip


def _edit(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.executescript(sql)
    db.close()


#: the newest: every decision's observe reads it, and day 4's summaries
ONE_MARKET_REPORT = (
    "WHERE report_id = (SELECT report_id FROM analyst_reports WHERE analyst = 'market' "
    "ORDER BY at_ms DESC LIMIT 1)"
)
#: a daily analyst's newest report: whether today's is written yet
ONE_DAILY_REPORT = ONE_MARKET_REPORT.replace("'market'", "'derivatives'")
#: what day 3's decisions read (and the roll of a restarted daemon asks for)
ONE_PRE_OPEN = "WHERE analyst = 'market' AND day = '2025-03-03' AND session = 'pre_open'"
BROKEN = {
    "figures not JSON": f"UPDATE analyst_reports SET figures = 'not json' {ONE_MARKET_REPORT}",
    "figures a list": f"UPDATE analyst_reports SET figures = '[1]' {ONE_MARKET_REPORT}",
    "figure of text": f"""UPDATE analyst_reports SET figures = '{{"rsi_1h": "x"}}' {ONE_MARKET_REPORT}""",
    "labels NULL": f"UPDATE analyst_reports SET labels = 'null' {ONE_MARKET_REPORT}",
    "confidence text": f"UPDATE analyst_reports SET confidence = 'high' {ONE_MARKET_REPORT}",
    "at_ms 1.5": f"UPDATE analyst_reports SET at_ms = 1.5 {ONE_MARKET_REPORT}",
    "at_ms text digits": f"UPDATE analyst_reports SET at_ms = '1740787200000x' {ONE_MARKET_REPORT}",
    "content a blob": f"UPDATE analyst_reports SET content = x'00ff' {ONE_MARKET_REPORT}",
    "day not its time's": f"UPDATE analyst_reports SET day = '2099-01-01' {ONE_DAILY_REPORT}",
    "day not a day": f"UPDATE analyst_reports SET day = 'zzz' {ONE_DAILY_REPORT}",
    "at_ms year 2200": f"UPDATE analyst_reports SET at_ms = 7258118400000 {ONE_DAILY_REPORT}",
    "summary body not JSON": f"UPDATE analyst_summaries SET body = 'x' {ONE_PRE_OPEN}",
    "summary body a blob": f"UPDATE analyst_summaries SET body = x'00ff' {ONE_PRE_OPEN}",
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
async def test_a_broken_row_is_left_out_with_one_warning_and_the_analysts_work_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    path = tmp_path / "analysts.db"
    await _three_days(path)
    _edit(path, BROKEN[broken] + ";")

    desk = AnalystDesk(AnalystStore(path), [TICKER])  # the daemon started again
    context = DecisionContext(PromptAssembler(ContextAssembler(analysts=desk)), analysts=desk)
    caplog.set_level(logging.WARNING)
    written: list[str] = []
    # decisions late on day 3, then on day 4
    for at_ms in (DAY1_MS + 2 * DAY + 21 * HOUR_MS, DAY1_MS + 3 * DAY, DAY1_MS + 3 * DAY + 60_000):
        known = desk.store.counts()["reports"]
        prompt = await context.prepare(_snapshot(at_ms))
        assert "analysts" not in prompt.info.tier_errors
        for name in ("derivatives", "sentiment", "regime"):  # their summaries are in the prompt
            assert f"{name} {TICKER}" in prompt.texts["memory"]
        written += [r[0] for r in desk.store._db.execute(
            "SELECT analyst FROM analyst_reports ORDER BY rowid LIMIT -1 OFFSET ?", (known,)
        )]  # fmt: skip
    assert set(written) == {"market", "derivatives", "sentiment", "regime"}
    daily = "SELECT COUNT(*) FROM analyst_reports WHERE analyst = 'derivatives' AND day = ?"
    assert desk.store._db.execute(daily, ("2025-03-04",)).fetchone()[0] == 1  # the first of day
    made = {s.analyst for s in desk.store.summaries(day="2025-03-04")}
    assert made == {"market", "derivatives", "sentiment", "regime"}
    assert not tracebacks(caplog)  # no traceback at each decision
    warned = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warned) == 1 and "analysts.db" in warned[0]
    desk.store.close()
    kept = sqlite3.connect(path)  # the row is kept as it was left
    rows = kept.execute("SELECT COUNT(*) FROM analyst_summaries WHERE body IN ('x', x'00ff')")
    assert rows.fetchone()[0] == (1 if broken.startswith("summary") else 0)
    kept.close()
