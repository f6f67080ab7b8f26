"""The run's parameters and buy-and-hold figures in report.json, report.html and the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.report_support import DAY_MS, T0, write_run

from report.compare import compare_reports
from report.figures import build_report
from report.html import render_html
from report.params import NOT_IN_FILE, NOT_RECORDED_LIVE
from runner.config import BrokerConfig, Settings

REPLAY_JSON = {
    "from_ms": T0,
    "to_ms": T0 + 5 * DAY_MS,
    "tickers": ["BTC/USDT", "ETH/USDT"],
    "decider": "fallback",
    "memory": False,
    "seed": 7,
    "data_dir": "/srv/vigil/data",
    "config_digest": "0123456789abcdef",
    "finished": True,
}


def _replay_run(folder: Path, **changes: object) -> Path:
    run = write_run(folder)
    document = {**REPLAY_JSON, **changes}
    (run / "replay.json").write_text(json.dumps({k: v for k, v in document.items() if v != "-"}))
    return run


def test_a_replay_run_reports_what_was_asked(tmp_path: Path) -> None:
    params = build_report(_replay_run(tmp_path)).parameters
    assert params.source == "replay.json"
    assert (params.from_ms, params.to_ms) == (T0, T0 + 5 * DAY_MS)
    assert params.tickers == ("BTC/USDT", "ETH/USDT")
    assert (params.decider, params.seed, params.memory) == ("fallback", 7, False)
    assert params.data_dir == "/srv/vigil/data" and params.config_digest == "0123456789abcdef"
    assert params.unavailable == {}
    page = render_html(build_report(_replay_run(tmp_path / "b")))
    run_table = page.split("<h2>Run</h2>", 1)[1].split("</table>", 1)[0]
    for text in ("2025-01-01 00:00Z .. 2025-01-06 00:00Z", "BTC/USDT, ETH/USDT", "fallback"):
        assert text in run_table
    assert "<td>memory</td><td>off</td>" in run_table
    assert "<td>config digest</td><td>0123456789abcdef</td>" in run_table


def test_an_older_replay_json_says_which_fields_it_lacks(tmp_path: Path) -> None:
    params = build_report(_replay_run(tmp_path, data_dir="-", config_digest="-")).parameters
    assert params.data_dir is None and params.config_digest is None
    assert params.unavailable == {"data_dir": NOT_IN_FILE, "config_digest": NOT_IN_FILE}
    assert params.seed == 7


def test_a_live_state_dir_shows_what_its_journal_tells_and_na_for_the_rest(
    tmp_path: Path,
) -> None:
    report = build_report(write_run(tmp_path))
    params = report.parameters
    assert params.source.startswith("journal")
    assert (params.from_ms, params.to_ms) == (T0, T0 + 4 * DAY_MS)
    assert params.tickers == ("BTC/USDT",)
    for name in ("decider", "seed", "data_dir", "memory", "config_digest"):
        assert getattr(params, name) is None
        assert params.unavailable[name] == NOT_RECORDED_LIVE
    run_table = render_html(report).split("<h2>Run</h2>", 1)[1].split("</table>", 1)[0]
    assert run_table.count("<td>n/a</td>") == 5
    assert NOT_RECORDED_LIVE in run_table


def test_an_unreadable_replay_json_gives_na_with_the_reason(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    (run / "replay.json").write_text("{not json")
    params = build_report(run).parameters
    assert params.tickers is None and params.seed is None
    assert params.unavailable["tickers"].startswith("replay.json unreadable")


def test_buy_and_hold_figures_sit_beside_the_runs(tmp_path: Path) -> None:
    report = build_report(write_run(tmp_path))
    hold = report.buy_and_hold_figures["BTC/USDT"]
    # BTC 50,000 -> 52,000 -> 48,000 -> 50,000 -> 55,000 at the standard run's decisions
    assert hold.total_return_pct == pytest.approx(10.0)
    assert hold.max_drawdown_pct == pytest.approx((1 - 48_000 / 52_000) * 100)
    assert hold.sharpe is not None
    page = render_html(report)
    table = page.split("<h2>Run against buy-and-hold</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>this run</td><td class='num'>10.250 %</td><td class='num'>10.000 %</td>" in table
    assert "<td>buy-and-hold BTC/USDT</td><td class='num'>10.000 %</td>" in table
    assert f"{hold.max_drawdown_pct:,.3f} %" in table


def _row(table: str, label: str) -> list[str]:
    for line in table.splitlines():
        if line.startswith(label + "  "):
            return line[len(label) :].split()
    raise AssertionError(f"no row {label!r} in\n{table}")


def test_compare_shows_parameters_and_buy_and_hold(tmp_path: Path) -> None:
    a = build_report(_replay_run(tmp_path / "a"))
    b = build_report(_replay_run(tmp_path / "b", memory=True, seed=None))
    table = compare_reports(a, b)
    assert _row(table, "decider") == ["fallback", "fallback", "same"]
    assert _row(table, "memory") == ["off", "on", "differs"]
    assert _row(table, "seed") == ["7", "n/a", "n/a"]
    assert _row(table, "buy-and-hold BTC/USDT return %")[:3] == ["10.0000", "10.0000", "+0.0%"]
    live = compare_reports(a, build_report(write_run(tmp_path / "live")))
    assert _row(live, "config digest") == ["0123456789abcdef", "n/a", "n/a"]


def test_config_digest_ignores_the_folder_and_secrets_but_not_a_setting(tmp_path: Path) -> None:
    base = Settings(state_dir=tmp_path / "a")
    assert Settings(state_dir=tmp_path / "b").digest() == base.digest()
    assert Settings(state_dir=tmp_path / "a", log_level="DEBUG").digest() == base.digest()
    cash = BrokerConfig(starting_cash_usd=5_000)
    assert Settings(state_dir=tmp_path / "a", broker=cash).digest() != base.digest()
    assert len(base.digest()) == 16
