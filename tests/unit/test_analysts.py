"""The four analysts: cadence, today's report, lookback per session, memory_summary's rule."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from analyst_support import DAY1_MS, HOUR_MS, sent

from memory.analyst_model import AnalystName, AnalystReport, Session, utc_day
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk

DAY = 24 * HOUR_MS


@pytest.fixture
def desk() -> AnalystDesk:
    return AnalystDesk(AnalystStore(":memory:"), ["BTC/USDT"])


def _by(desk: AnalystDesk, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in desk.controllers if c.name == name)


def test_cadence_per_timescale(desk: AnalystDesk) -> None:
    for hour in range(5):
        desk.observe(sent(86_000 + hour * 100), DAY1_MS + hour * HOUR_MS)
    desk.observe(sent(87_000, regime="high_volatility"), DAY1_MS + 6 * HOUR_MS)
    day = utc_day(DAY1_MS)
    counts = {
        c.name: len(desk.store.reports(c.name, "BTC/USDT", day, day)) for c in desk.controllers
    }
    # market every decision, derivatives and sentiment once a day, regime on change
    assert counts == {"market": 6, "derivatives": 1, "sentiment": 1, "regime": 2}
    timescales = {c.name: c.spec.timescale for c in desk.controllers}
    assert timescales == {
        "market": "intraday",
        "derivatives": "daily",
        "sentiment": "daily",
        "regime": "slow",
    }
    lookbacks = {c.name: c.spec.lookback_days for c in desk.controllers}
    assert lookbacks == {"market": 1, "derivatives": 7, "sentiment": 7, "regime": 30}
    regime = desk.store.reports("regime", "BTC/USDT", day, day)[-1]
    assert "medium_volatility -> high_volatility" in regime.content


def test_today_report_picks(desk: AnalystDesk) -> None:
    desk.observe(sent(86_000, funding=0.0001), DAY1_MS)
    desk.observe(sent(90_000, funding=0.0009), DAY1_MS + 5 * HOUR_MS)
    day = utc_day(DAY1_MS)
    assert "90,000" in _by(desk, "market").today_report("BTC/USDT", day).content  # latest
    assert "funding_pct 0.0100" in _by(desk, "derivatives").today_report("BTC/USDT", day).content
    # regime: the latest of the week, even from days ago
    later = utc_day(DAY1_MS + 5 * DAY)
    assert _by(desk, "regime").today_report("BTC/USDT", later) is not None
    assert _by(desk, "regime").today_report("BTC/USDT", utc_day(DAY1_MS + 8 * DAY)) is None
    assert _by(desk, "market").today_report("BTC/USDT", later) is None


def test_lookback_windows(desk: AnalystDesk) -> None:
    for d in range(10):
        desk.observe(
            sent(80_000 + d * 500, regime=["low_volatility", "high_volatility"][d % 2]),
            DAY1_MS + d * DAY,
        )
    day = utc_day(DAY1_MS + 9 * DAY)
    market, derivs, regime = _by(desk, "market"), _by(desk, "derivatives"), _by(desk, "regime")
    assert {r.day for r in market.lookback("BTC/USDT", day, "pre_open")} == {
        utc_day(DAY1_MS + 8 * DAY)
    }
    assert {r.day for r in market.lookback("BTC/USDT", day, "post_close")} == {day}
    assert len(derivs.lookback("BTC/USDT", day, "pre_open")) == 7
    assert day not in {r.day for r in derivs.lookback("BTC/USDT", day, "pre_open")}
    assert len(regime.lookback("BTC/USDT", day, "post_close")) == 10


async def test_memory_summary_session_rule(desk: AnalystDesk) -> None:
    desk.observe(sent(86_000), DAY1_MS + HOUR_MS)
    made = await desk.roll(DAY1_MS + DAY + HOUR_MS)  # day 2 opens: day 1 closes, day 2 opens
    assert {(s.day, s.session) for s in made} == {
        (utc_day(DAY1_MS), "post_close"),
        (utc_day(DAY1_MS + DAY), "pre_open"),
    }
    assert await desk.roll(DAY1_MS + DAY + 2 * HOUR_MS) == []  # once a day
    desk.observe(sent(88_000), DAY1_MS + DAY + 2 * HOUR_MS)
    market = _by(desk, "market")
    day2 = utc_day(DAY1_MS + DAY)
    pre = market.memory_summary("BTC/USDT", day2, "pre_open")
    assert pre.today_report == ""
    assert pre.summary_pre_open and pre.summary_post_close  # yesterday's close is history
    await market.summarise("BTC/USDT", day2, "post_close", DAY1_MS + 2 * DAY, None)
    post = market.memory_summary("BTC/USDT", day2, "post_close")
    assert "88,000" in post.today_report
    assert post.summary_pre_open and "88,000" in post.summary_post_close + post.today_report
    assert post.summary_post_close != pre.summary_post_close  # today's close, not yesterday's


def test_store_indexes_and_idempotent_save(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = AnalystStore(tmp_path / "analysts.db")
    report = AnalystReport(
        report_id=AnalystReport.make_id("market", "BTC/USDT", DAY1_MS),
        analyst="market",
        ticker="BTC/USDT",
        day=utc_day(DAY1_MS),
        at_ms=DAY1_MS,
        content="x.",
        confidence=0.5,
        timescale="intraday",
    )
    assert store.save_report(report) is True
    assert store.save_report(report) is False
    store.close()
    db = sqlite3.connect(tmp_path / "analysts.db")
    indexes = {
        row[1]: row[4] for row in db.execute("SELECT * FROM sqlite_master WHERE type='index'")
    }
    assert "(analyst, ticker, day, timescale)" in indexes["reports_by_analyst"]
    assert "(ticker, day, at_ms)" in indexes["reports_by_day"]


def test_wrong_analyst_refused(desk: AnalystDesk) -> None:
    report = AnalystReport(
        report_id="r-1",
        analyst="regime",
        ticker="BTC/USDT",
        day="2025-03-01",
        at_ms=DAY1_MS,
        content="x.",
        confidence=0.5,
        timescale="slow",
    )
    with pytest.raises(ValueError, match="regime report given to the market"):
        _by(desk, "market").save_report(report)


def _report(analyst: AnalystName, at_ms: int, content: str = "x.") -> AnalystReport:
    return AnalystReport(
        report_id=AnalystReport.make_id(analyst, "BTC/USDT", at_ms) + content,
        analyst=analyst,
        ticker="BTC/USDT",
        day=utc_day(at_ms),
        at_ms=at_ms,
        content=content,
        confidence=0.5,
        timescale="intraday",
    )


def test_the_newest_report_kept_in_memory_is_the_one_sqlite_gives(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Saves in any order (an older one after a newer, a tie on the instant): the store's
    answer equals a fresh store's on the same database, which can only ask SQLite."""
    path = tmp_path / "analysts.db"
    store = AnalystStore(path)
    assert store.latest_report("market", "BTC/USDT") is None
    saves = [
        _report("market", DAY1_MS),
        _report("market", DAY1_MS + 2 * HOUR_MS),
        _report("market", DAY1_MS + HOUR_MS),  # older than the newest: not the answer
        _report("sentiment", DAY1_MS + 3 * HOUR_MS),  # another analyst's
        _report("market", DAY1_MS + 2 * HOUR_MS, "tie."),  # the same instant as the newest
        _report("market", DAY1_MS + 30 * HOUR_MS),  # the next day
    ]
    for report in saves:
        store.save_report(report)
        fresh = AnalystStore(path)
        for analyst in ("market", "sentiment"):
            assert store.latest_report(analyst, "BTC/USDT") == fresh.latest_report(
                analyst, "BTC/USDT"
            )
        fresh.close()
    latest = store.latest_report("market", "BTC/USDT")
    assert latest is not None and latest.at_ms == DAY1_MS + 30 * HOUR_MS


def test_a_non_durable_store_batches_reports_and_answers_the_same(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Replay's store commits reports in batches: it answers as the durable store does, another
    connection sees the reports once flushed (or a batch is full), and close commits them."""
    durable = AnalystStore(tmp_path / "durable.db")
    path = tmp_path / "batched.db"
    batched = AnalystStore(path, durable=False)
    reports = [_report("market", DAY1_MS + i * HOUR_MS // 4) for i in range(10)]
    for report in reports:
        assert batched.save_report(report) == durable.save_report(report)
        assert batched.latest_report("market", "BTC/USDT") == durable.latest_report(
            "market", "BTC/USDT"
        )
    assert not batched.save_report(reports[0])  # idempotent on the id, pending or not
    day = utc_day(DAY1_MS)
    assert batched.day_reports("BTC/USDT", day) == durable.day_reports("BTC/USDT", day)
    other = sqlite3.connect(path)
    count = "SELECT COUNT(*) FROM analyst_reports"
    assert other.execute(count).fetchone()[0] == 0  # pending: not committed yet
    batched.flush()
    assert other.execute(count).fetchone()[0] == len(reports)
    monkeypatch.setattr("memory.analyst_store.BATCH_REPORTS", 3)
    for i in range(3):
        batched.save_report(_report("sentiment", DAY1_MS + i * HOUR_MS))
    assert other.execute(count).fetchone()[0] == len(reports) + 3  # a full batch commits
    batched.save_report(_report("regime", DAY1_MS))
    batched.close()
    assert other.execute(count).fetchone()[0] == len(reports) + 4  # close commits the rest
    other.close()
    durable.close()


async def test_roll_reads_each_lookback_once_and_summarises_as_if_read_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tickers = ["BTC/USDT", "ETH/USDT"]
    desk = AnalystDesk(AnalystStore(tmp_path / "a.db"), tickers)
    twin = AnalystDesk(AnalystStore(tmp_path / "b.db"), tickers)
    for d in range(9):
        for hour in (1, 7, 13):
            at = DAY1_MS + d * DAY + hour * HOUR_MS
            for one in (desk, twin):
                one.observe(
                    sent(
                        80_000 + d * 700 + hour * 50,
                        regime=["low_volatility", "high_volatility"][d % 3 == 0],
                    ),
                    at,
                )
        now = DAY1_MS + (d + 1) * DAY + HOUR_MS
        made = await desk.roll(now)
        # the twin: every due summary from a lookback read for it alone
        expected = []
        for controller in twin.controllers:
            for ticker in tickers:
                due: tuple[tuple[str, Session], ...] = (
                    (utc_day(now - DAY), "post_close"),
                    (utc_day(now), "pre_open"),
                )
                for due_day, session in due:
                    if controller.lookback(ticker, due_day, session):
                        expected.append(
                            await controller.summarise(ticker, due_day, session, now, None)
                        )
        assert made == expected


def test_a_remembered_lookback_is_read_again_once_reports_change(tmp_path) -> None:  # type: ignore[no-untyped-def]
    desk = AnalystDesk(AnalystStore(tmp_path / "a.db"), ["BTC/USDT"])
    other = AnalystStore(tmp_path / "a.db")  # another connection (another process)
    market = _by(desk, "market")
    desk.observe(sent(86_000), DAY1_MS + HOUR_MS)
    day = utc_day(DAY1_MS)
    read: dict = {}  # type: ignore[type-arg]
    got = desk._lookback(market, "BTC/USDT", day, "post_close", read)
    assert got == market.lookback("BTC/USDT", day, "post_close") and len(got) == 1
    desk.observe(sent(87_000), DAY1_MS + 2 * HOUR_MS)  # added here
    got = desk._lookback(market, "BTC/USDT", day, "post_close", read)
    assert got == market.lookback("BTC/USDT", day, "post_close") and len(got) == 2
    report = got[-1].model_copy(update={"report_id": "elsewhere", "at_ms": DAY1_MS + 3 * HOUR_MS})
    assert other.save_report(report)  # committed by the other connection
    got = desk._lookback(market, "BTC/USDT", day, "post_close", read)
    assert got == market.lookback("BTC/USDT", day, "post_close") and len(got) == 3


def test_only_a_durable_store_fsyncs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLite's synchronous: 1 (NORMAL, fsync at checkpoints) when durable, 0 (OFF) in replay."""
    for durable, expected in ((True, 1), (False, 0)):
        store = AnalystStore(tmp_path / f"{durable}.db", durable=durable)
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == expected
        store.close()


async def test_a_batched_roll_commits_its_summaries_once_and_holds_what_a_durable_one_does(
    tmp_path: Path,
) -> None:
    """A non-durable store holds the roll's summaries back and the roll commits them (and the
    reports before them) at its end: another connection sees every one then, the same rows as
    a durable store's, whose every summary commits."""
    tickers = ["BTC/USDT", "ETH/USDT"]
    durable = AnalystDesk(AnalystStore(tmp_path / "durable.db"), tickers)
    batched = AnalystDesk(AnalystStore(tmp_path / "batched.db", durable=False), tickers)
    other = sqlite3.connect(tmp_path / "batched.db")
    commits = 0
    real_flush = batched.store.flush

    def flush() -> None:
        nonlocal commits
        commits += 1
        real_flush()

    batched.store.flush = flush  # type: ignore[method-assign]
    for d in range(4):
        for hour in (1, 9, 17):
            for desk in (durable, batched):
                desk.observe(sent(80_000 + d * 900 + hour * 40), DAY1_MS + d * DAY + hour * HOUR_MS)
        now = DAY1_MS + (d + 1) * DAY + HOUR_MS
        commits = 0
        assert await batched.roll(now) == await durable.roll(now)
        assert commits == 1  # one commit for the roll's summaries
        assert batched.store.summaries() == durable.store.summaries()
        seen = other.execute("SELECT COUNT(*) FROM analyst_summaries").fetchone()[0]
        assert seen == len(durable.store.summaries())  # committed: another process sees them
    dump = "\n".join(sqlite3.connect(tmp_path / "durable.db").iterdump())
    assert "\n".join(other.iterdump()) == dump
    other.close()
