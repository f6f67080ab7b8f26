"""``vigil report`` on run folders a person or a crash mangled: each is refused with a line naming
the file and what is wrong (exit 2), or reported with the bad value left out; never a traceback."""

from __future__ import annotations

import copy
import gzip
import math
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakes.fifo import outcome_beside_fifo
from fakes.report_support import DECISIONS, FILLS, T0, decision_line, write_run

from broker.ledger import Ledger
from broker.orders import Mark
from broker.paper_store import PAPER_STATE_MAX_BYTES, PaperBookDocument, render_document
from runner.cli import EXIT_USAGE, main


def lines_with(index: int, edit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    lines = [decision_line(*d) for d in DECISIONS]
    edit(lines[index])
    return copy.deepcopy(lines)


def report(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["report", str(run_dir)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "at_ms", [2**62, 300_000_000_000_000, -(10**18), 1_000, T0 // 1000], ids=str
)
def test_a_journal_time_outside_the_recording_years_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at_ms: int
) -> None:
    run = write_run(tmp_path, lines_with(1, lambda line: line.update(at_ms=at_ms)))
    code, err = report(run, capsys)
    assert code == EXIT_USAGE
    assert f"decisions.jsonl: a decision line has at_ms {at_ms}" in err
    assert "2010 .. 2100" in err and "Traceback" not in err
    assert not (run / "report.json").exists()


def test_a_fill_time_outside_the_recording_years_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, fills=[(2**62, *FILLS[0][1:])])
    code, err = report(run, capsys)
    assert code == EXIT_USAGE
    assert f"trades.csv: the fill of BTC/USDT has at_ms {2**62}" in err
    assert not (run / "report.json").exists()


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        ({"input_tokens": "abc"}, "usage.input_tokens 'abc' is not a whole number of tokens"),
        ({"output_tokens": [1]}, "usage.output_tokens [1] is not a whole number of tokens"),
        ({"cache_read_input_tokens": 1e308}, "is not a whole number of tokens"),
        ({"input_tokens": 10**13}, "is not a whole number of tokens within 0 .. 1e+12"),
        ({"input_tokens": -5}, "is not a whole number of tokens"),
        ({"input_tokens": True}, "is not a whole number of tokens"),
        ({"cost_usd": "x"}, "usage.cost_usd 'x' is not a dollar amount"),
        ({"cost_usd": 1e300}, "usage.cost_usd 1e+300 is not a dollar amount"),
    ],
)
def test_a_usage_that_cannot_be_summed_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], usage: dict[str, Any], said: str
) -> None:
    run = write_run(tmp_path, lines_with(0, lambda line: line.update(usage=usage)))
    code, err = report(run, capsys)
    assert code == EXIT_USAGE
    assert f"decisions.jsonl: a decision line at_ms {T0}: usage." in err and said in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "attempts", [[{"usage": "x"}], [{"model": "m", "usage": {"cost_usd": "1"}}]]
)
def test_a_try_whose_usage_cannot_be_summed_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], attempts: list[Any]
) -> None:
    lines = lines_with(0, lambda line: line.update(raw_decision={"attempts": attempts}))
    code, err = report(write_run(tmp_path, lines), capsys)
    assert code == EXIT_USAGE and "usage" in err and "Traceback" not in err


def _gzipped_segment(run: Path, data: bytes) -> None:
    (run / "logs" / "decisions.20241231T000000Z.jsonl.gz").write_bytes(data)


_WHOLE = gzip.compress(orjson.dumps(decision_line(*DECISIONS[0])) + b"\n")


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda run: _gzipped_segment(run, b"not gzip"), "a segment cannot be read"),
        (lambda run: _gzipped_segment(run, _WHOLE[:-12]), "a segment cannot be read"),
        (lambda run: (run / "logs/decisions.20241231T000000Z.jsonl.gz").mkdir(), "not a regular"),
        (lambda run: _replace(run / "logs/decisions.jsonl", Path.mkdir), "not a regular file"),
        (lambda run: _replace(run / "logs/trades.csv", Path.mkdir), "not a regular file"),
        (lambda run: (run / "logs/trades.csv").write_bytes(b"\xff\xfe,"), "not UTF-8"),
        (lambda run: (run / "logs/trades.csv").write_bytes(b'"' + b"x" * 200_000), "is not CSV"),
    ],
    ids=["gz garbage", "gz cut off", "gz dir", "journal dir", "trades dir", "latin", "huge cell"],
)
def test_a_journal_file_that_cannot_be_read_is_refused_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[Path], object],
    said: str,
) -> None:
    run = write_run(tmp_path)
    edit(run)
    code, err = report(run, capsys)
    assert code == EXIT_USAGE and str(run / "logs") in err, err
    assert said.replace("not UTF-8", "UTF-8") in err and "Traceback" not in err


def _replace(path: Path, make: Callable[[Path], object]) -> None:
    path.unlink()
    make(path)


@pytest.mark.parametrize("name", ["decisions.jsonl", "trades.csv"])
def test_a_fifo_in_place_of_a_journal_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    run = write_run(tmp_path)
    fifo = run / "logs" / name
    _replace(fifo, os.mkfifo)
    assert outcome_beside_fifo(lambda: main(["report", str(run)]), fifo) == EXIT_USAGE
    assert f"{fifo}: not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("quantity", "price", "fee"),
    [
        (math.nan, 50_000.0, 1.0),
        (0.1, math.inf, 1.0),
        (0.1, 50_000.0, -math.inf),
        (0.1, 50_000.0, math.nan),
        (-1.0, 50_000.0, 1.0),
        (0.1, 0.0, 1.0),
    ],
)
def test_a_fill_that_is_not_a_trade_is_refused_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], quantity: float, price: float, fee: float
) -> None:
    run = write_run(
        tmp_path, fills=[FILLS[0], (T0 + 5000, "BTC/USDT", "buy", quantity, price, fee)]
    )
    code, err = report(run, capsys)
    assert code == EXIT_USAGE and "trades.csv line 3:" in err and "Traceback" not in err
    assert not (run / "report.json").exists()


@pytest.mark.parametrize(
    ("replay", "field", "said"),
    [
        ({"tickers": "BTC/USDT"}, "tickers", "replay.json's tickers 'BTC/USDT' is not a list"),
        ({"tickers": 5}, "tickers", "is not a list of tickers"),
        ({"tickers": ["BTC/USDT", 7]}, "tickers", "is not a list of tickers"),
        ({"from_ms": "x"}, "from_ms", "replay.json's from_ms 'x' is not a time"),
        ({"from_ms": 2**62}, "from_ms", "within 2010 .. 2100"),
        ({"to_ms": -1}, "to_ms", "within 2010 .. 2100"),
        ({"to_ms": 1.7e12}, "to_ms", "is not a time"),
        ({"seed": "42"}, "seed", "is not a whole number"),
        ({"seed": True}, "seed", "is not a whole number"),
        ({"memory": "yes"}, "memory", "is not true or false"),
        ({"decider": ["claude"]}, "decider", "is not a decider's name"),
        ({"data_dir": {"a": 1}}, "data_dir", "is not a path"),
        ({"config_digest": 5}, "config_digest", "is not a digest"),
    ],
)
def test_a_replay_json_field_of_the_wrong_kind_is_unavailable_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    replay: dict[str, Any],
    field: str,
    said: str,
) -> None:
    run = write_run(tmp_path)
    (run / "replay.json").write_bytes(orjson.dumps({"seed": 7, **replay}))
    assert main(["report", str(run)]) == 0
    parameters = orjson.loads((run / "report.json").read_bytes())["parameters"]
    assert parameters[field] is None and said in parameters["unavailable"][field]
    assert parameters["seed"] == (None if field == "seed" else 7)
    other = write_run(tmp_path / "other")
    assert main(["report", "--compare", str(run), str(other)]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "signals",
    [[1, 2], "x", {"trend": {"mean": 1e308}}, {"trend": {"mean": -0.5}}, {"trend": {"mean": 2}}],
    ids=["list", "string", "1e308", "negative", "above one"],
)
def test_learned_weights_that_are_not_posterior_means_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signals: object
) -> None:
    posteriors = {
        "tickers": {
            "BTC/USDT": {"signals": signals},
            "ETH/USDT": {
                "signals": {"trend": {"mean": 0.25}} if isinstance(signals, dict) else signals
            },
        }
    }
    lines = lines_with(0, lambda line: line["snapshot"].update(ts_posteriors=posteriors))
    run = write_run(tmp_path, lines)
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    weights = orjson.loads((run / "report.json").read_bytes())["learned_weights"]
    assert weights == (
        {"trend": [{"at_ms": T0, "value": 0.25}]} if isinstance(signals, dict) else {}
    )


def _equity(value: float) -> Callable[[dict[str, Any]], None]:
    return lambda line: line["snapshot"].update(portfolio_value=value)


def _btc(price: float) -> Callable[[dict[str, Any]], None]:
    return lambda line: line["snapshot"]["tickers"]["BTC/USDT"].update(price=price)


@pytest.mark.parametrize(
    ("index", "edit"),
    [
        (0, _equity(1e308)),
        (2, _equity(1e308)),
        (0, _equity(1e-308)),
        (2, _btc(1e308)),
        (0, _btc(5e-324)),
        (0, _btc(1e-300)),
    ],
    ids=["first 1e308", "later 1e308", "first 1e-308", "price 1e308", "price 5e-324", "1e-300"],
)
def test_an_equity_or_price_of_absurd_size_never_ends_the_report(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    index: int,
    edit: Callable[[dict[str, Any]], None],
) -> None:
    run = write_run(tmp_path, lines_with(index, edit))
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    document = orjson.loads((run / "report.json").read_bytes())
    metrics, unavailable = document["metrics"], document["unavailable"]
    for name, value in metrics.items():  # every figure is a number a person can read, or says why
        assert (value is None and name in unavailable) or math.isfinite(value), name
    assert metrics["start_equity_usd"] <= 1e15 and metrics["end_equity_usd"] == 11_025.0
    for figures in document["buy_and_hold_figures"].values():
        assert all(
            v is None or math.isfinite(v) for v in figures.values() if not isinstance(v, dict)
        )


@pytest.mark.parametrize(
    "raw",
    [
        {"decisions": ["x", 5, None]},
        {"decisions": "x"},
        {"decisions": [{"ticker": "BTC/USDT", "action": "buy", "position_pct": "abc"}]},
        {"decisions": [{"ticker": "BTC/USDT", "action": "buy", "position_pct": [1]}]},
        {"decisions": [{"ticker": "BTC/USDT", "action": "buy", "position_pct": 1e308}]},
    ],
)
def test_compare_reads_any_shape_of_agent_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: dict[str, Any]
) -> None:
    a = write_run(tmp_path / "a", lines_with(0, lambda line: line.update(raw_decision=raw)))
    b = write_run(tmp_path / "b")
    (b / "logs" / "decisions.jsonl").write_bytes((a / "logs" / "decisions.jsonl").read_bytes())
    assert main(["report", "--compare", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert "decisions decided differently: 0 of 1 paired" in out and "Traceback" not in err


def _ledger(run: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    position = {
        "ticker": "BTC/USDT",
        "quantity": "0.1",
        "cost_basis_usd": "5000",
        "opened_at_ms": T0,
    }
    ledger = {
        "starting_cash_usd": "10000",
        "cash_usd": "5000",
        "reserved_usd": "0",
        "positions": {"BTC/USDT": position},
    }
    book = PaperBookDocument(
        saved_at_ms=T0 + 5 * 86_400_000,
        ledger=Ledger.model_validate(ledger),
        marks={"BTC/USDT": Mark(price=60_000.0, at_ms=T0)},
    )
    document = orjson.loads(render_document(book))
    edit(document)
    (run / "paper_broker.json").write_bytes(orjson.dumps(document))


def _mark(price: float) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["marks"]["BTC/USDT"].__setitem__(0, price)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d.update(saved_at_ms=2**62), f"saved_at_ms {2**62} is not a time"),
        (lambda d: d.update(saved_at_ms=32_503_680_000_000), "is not a time within 2010 .. 2100"),
        (_mark(1e308), "no usable mark price"),
        (_mark(-5.0), "no usable mark price"),
        (_mark(0.0), "no usable mark price"),
        (lambda d: d["ledger"].update(cash_usd="1e400"), "inf USD is not an equity"),
        (lambda d: d["ledger"]["positions"]["BTC/USDT"].update(quantity="1e300"), "not an equity"),
    ],
)
def test_a_final_ledger_value_that_cannot_be_is_left_out_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    said: str,
) -> None:
    run = write_run(tmp_path)
    _ledger(run, edit)
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    document = orjson.loads((run / "report.json").read_bytes())
    assert document["metrics"]["end_equity_usd"] == 11_025.0  # the journal's last value
    [note] = [n for n in document["notes"] if n.startswith("final ledger value left out")]
    assert said in note


def test_a_usable_final_ledger_value_still_ends_the_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path)
    _ledger(run, lambda document: None)
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    assert orjson.loads((run / "report.json").read_bytes())["metrics"]["end_equity_usd"] == 11_000.0


@pytest.mark.parametrize(
    ("trade", "kind"),
    [
        (("calm", None, None), "insight"),
        (("calm", "abc", 3600.0), "insight"),
        ((None, 1.0, 3600.0), "insight"),
        (("calm", 1.0, 3600.0), b"\xff"),
        (("calm", 1.0, b"\x00"), "insight"),
        (("calm", float("inf"), 3600.0), "insight"),
        (("calm", -(2**63), 3600.0), "insight"),  # readable: and no SQLite abs() overflow
    ],
    ids=[
        "null numbers", "text pnl", "null regime", "blob kind", "blob holding", "inf pnl",
        "smallest integer pnl",
    ],
)  # fmt: skip
def test_a_memory_db_row_of_the_wrong_type_is_left_out_of_the_figures_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trade: tuple[Any, ...], kind: Any
) -> None:
    """The store leaves such a row out of every read and keeps it in the file; the report's
    section called the whole store unavailable for it. Now it leaves it out too, and says so."""
    run = write_run(tmp_path)
    with sqlite3.connect(run / "memory.db") as db:  # no NOT NULL: another program's, or damaged
        db.executescript(
            "CREATE TABLE trades (regime, pnl_pct, holding_secs);CREATE TABLE insights (kind);"
        )
        db.execute("INSERT INTO trades VALUES (?, ?, ?)", trade)
        db.execute("INSERT INTO trades VALUES ('calm', -2.5, 7200.0)")
        db.execute("INSERT INTO insights VALUES (?)", (kind,))
        db.execute("INSERT INTO insights VALUES ('reflection')")
    db.close()
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    memory = orjson.loads((run / "report.json").read_bytes())["memory"]
    readable = trade[1] == -(2**63)
    good_trade, good_kind = kind == b"\xff" or readable, kind != b"\xff"
    assert memory["store"] == "sqlite"
    assert memory["trades_written"] == 1 + good_trade
    assert memory["insights_written"] == {"reflection": 1} | ({"insight": 1} if good_kind else {})
    calm = memory["per_regime"][0]
    pnls = [-2.5, *([trade[1]] if good_trade else [])]
    assert calm["n"] == len(pnls) and calm["win_rate"] == sum(p > 0 for p in pnls) / len(pnls)
    if readable:
        assert "store_rows" not in memory["unavailable"]
        return
    assert memory["unavailable"]["store_rows"].startswith(
        "1 trade or insight row(s) of memory.db hold a value of the wrong type"
    )


def test_true_is_not_an_equity_or_a_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = lines_with(0, lambda line: line["snapshot"].update(portfolio_value=True))
    lines[1]["snapshot"]["tickers"]["BTC/USDT"]["price"] = True
    run = write_run(tmp_path, lines)
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    document = orjson.loads((run / "report.json").read_bytes())
    assert document["metrics"]["start_equity_usd"] == 10_500.0  # the second line's
    drawn = [point["at_ms"] for point in document["buy_and_hold"]["BTC/USDT"]]
    assert T0 in drawn and T0 + 12 * 3_600_000 not in drawn


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (os.mkfifo, "is not a regular file (a FIFO)"),
        (os.mkdir, "is not a regular file (a directory)"),
    ],
    ids=["fifo", "directory"],
)
def test_a_ledger_that_is_not_a_file_is_refused_not_taken_as_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], object], said: str
) -> None:
    run = write_run(tmp_path)
    ledger = run / "paper_broker.json"
    make(ledger)
    assert outcome_beside_fifo(lambda: main(["report", str(run)]), ledger) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{ledger} {said}" in err and "Traceback" not in err
    assert not (run / "report.json").exists()


def test_a_ledger_over_the_brokers_bound_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path)
    _ledger(run, lambda document: None)
    ledger = run / "paper_broker.json"
    with ledger.open("ab") as fh:  # still valid JSON: padded with spaces past the bound
        fh.write(b" " * PAPER_STATE_MAX_BYTES)
    assert main(["report", str(run)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{ledger} is " in err and f"over the {PAPER_STATE_MAX_BYTES:,} read" in err
    assert not (run / "report.json").exists()
