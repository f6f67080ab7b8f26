"""``AnalystStore.reports`` hands out the reports it saved or read before: always what reading
every row again would give, whatever this or another connection did in between."""

from __future__ import annotations

import math
import sqlite3
import tempfile
from pathlib import Path

import pytest
from analyst_support import DAY1_MS, HOUR_MS, market_report
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory import analyst_store
from memory.analyst_model import AnalystReport, utc_day
from memory.analyst_rows import report_of
from memory.analyst_store import _REPORT_COLUMNS, _REPORTS_WHERE, AnalystStore
from memory.sqlite_rows import LeftOut

DAY = 24 * HOUR_MS
DAYS = [utc_day(DAY1_MS + d * DAY) for d in range(3)]


def _made(i: int, content: str, figure: float | None) -> AnalystReport:
    at = DAY1_MS + (i % 9) * 8 * HOUR_MS  # three a day over three days, ties on the instant
    return market_report(
        f"r-{i:02d}",
        at,
        content,
        figures={"price": figure, "rsi_1h": 55.0},
        labels={"trend_1h": content[:3]},
    )


def _read_again(store: AnalystStore, first: str, last: str) -> list[AnalystReport]:
    """The unremembered answer: every row read and built, on the same connection."""
    rows = store._db.execute(
        f"SELECT {_REPORT_COLUMNS} FROM analyst_reports {_REPORTS_WHERE}",
        ("market", "BTC/USDT", first, last),
    )
    left_out = LeftOut("analysts.db")
    return [r for r in (report_of(row, left_out) for row in rows.fetchall()) if r is not None]


_ids = st.integers(0, 20)
_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("save"),
            _ids,
            st.text(min_size=1, max_size=12),
            st.sampled_from([80_000.5, None, math.nan, math.inf]),
        ),
        st.tuples(st.just("other_save"), _ids, st.text(min_size=1, max_size=12)),
        st.tuples(st.just("other_update"), _ids, st.text(min_size=1, max_size=12)),
        st.tuples(st.just("other_delete"), _ids),
        st.tuples(st.just("rollback")),
        st.tuples(st.just("flush")),
        st.tuples(st.just("read"), st.sampled_from(DAYS), st.sampled_from(DAYS)),
    ),
    max_size=40,
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, durable=st.booleans(), kept=st.sampled_from([2, 5, 1024]))
# a report rolled back, then saved again with a figure that reads back as None
@example(
    steps=[("save", 0, "0", 80_000.5), ("rollback",), ("save", 0, "0", math.nan)],
    durable=False,
    kept=2,
)
def test_reports_remembered_equal_the_rows_read_again(
    steps: list[tuple[object, ...]], durable: bool, kept: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(analyst_store, "KNOWN_REPORTS", kept)
        path = Path(tmp) / "analysts.db"
        store = AnalystStore(path, durable=durable)
        other = sqlite3.connect(path, timeout=0.1)
        for step in steps:
            _apply(store, other, step)
            assert all(len(known) <= 2 * kept for known in store._known.values())
            for first in DAYS:
                for last in DAYS:
                    assert store.reports("market", "BTC/USDT", first, last) == _read_again(
                        store, first, last
                    )
        other.close()
        store.close()


def _apply(store: AnalystStore, other: sqlite3.Connection, step: tuple[object, ...]) -> None:
    kind = step[0]
    if kind == "save":
        _, i, content, figure = step
        assert isinstance(i, int) and isinstance(content, str)
        store.save_report(_made(i, content, figure if isinstance(figure, float) else None))
    elif kind in ("other_save", "other_update", "other_delete"):
        if store._pending:  # another process waits for this one's open transaction
            store.flush()
        _other_writes(other, step)
    elif kind == "rollback":  # a failed transaction: this connection's pending rows undone
        store._db.rollback()
        store._pending = 0
    elif kind == "flush":
        store.flush()
    else:
        _, first, last = step
        assert isinstance(first, str) and isinstance(last, str)
        store.reports("market", "BTC/USDT", first, last)


def _other_writes(other: sqlite3.Connection, step: tuple[object, ...]) -> None:
    kind, i = step[0], step[1]
    assert isinstance(i, int)
    with other:
        if kind == "other_delete":
            other.execute("DELETE FROM analyst_reports WHERE report_id = ?", (f"r-{i:02d}",))
        elif kind == "other_update":
            other.execute(
                "UPDATE analyst_reports SET content = ? WHERE report_id = ?",
                (step[2], f"r-{i:02d}"),
            )
        else:
            r = _made(i, str(step[2]), 1.0)
            row = {**r.model_dump(), "figures": '{"price": 1.0}', "labels": "{}"}
            other.execute(
                f"INSERT OR IGNORE INTO analyst_reports ({_REPORT_COLUMNS}) "
                "VALUES (:report_id, :analyst, :ticker, :day, :at_ms, :timescale, :confidence, "
                ":content, :figures, :labels)",
                row,
            )


def test_a_day_of_saved_reports_is_handed_out_without_building_a_row(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = AnalystStore(tmp_path / "analysts.db", durable=False)
    saved = [_made(i, f"report {i}.", 80_000.0 + i) for i in range(9)]
    for report in saved:
        store.save_report(report)
    built: list[object] = []
    monkeypatch.setattr(analyst_store, "report_of", built.append)
    got = store.reports("market", "BTC/USDT", DAYS[0], DAYS[2])
    assert built == []
    assert got == sorted(saved, key=lambda r: (r.at_ms, r.report_id))
    store.close()
