"""``vigil sweep``'s grid (expansion, keys, refusals) and the experiment report's figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.errors import RefuseToStartError
from report.experiment import RunEntry, bootstrap_mean, build_experiment, render_html
from runner.config import Settings
from runner.sweep.grid import expand, load_grid

GRID = """
periods = [["2025-03-01", "2025-03-02"], ["2025-04-01", "2025-04-02"]]
tickers = [["BTC/USDT"], ["BTC/USDT", "ETH/USDT"]]
memory = [true, false]
seeds = [42, 7]

[overrides.base]
[overrides.weekly]
regime = { refit_every_secs = 604800 }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_the_grid_expands_to_every_combination_with_stable_distinct_keys(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, GRID))
    variants = {
        "base": Settings(),
        "weekly": Settings(regime={"refit_every_secs": 604800}),
    }
    runs = expand(grid, variants, tmp_path)
    assert len(runs) == 2 * 2 * 1 * 2 * 2 * 2
    assert len({r.key for r in runs}) == len(runs)
    assert [r.key for r in expand(grid, variants, tmp_path)] == [r.key for r in runs]
    weekly = [r for r in runs if r.override == "weekly"]
    assert {r.config_digest for r in weekly} == {variants["weekly"].digest()}
    options = runs[0].options(tmp_path)
    assert options.end_ms - options.start_ms == 2 * 86_400_000  # --to is inclusive
    assert options.out_dir == tmp_path / runs[0].key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("periods = [['2025-03-02', '2025-03-01']]\ntickers = [['BTC/USDT']]", "end is before"),
        ("tickers = [['BTC/USDT']]", "periods"),
        (
            "periods = [['2025-03-01', '2025-03-01']]\ntickers = [['BTC/USDT']]\ncolour = 1",
            "colour",
        ),
        ("periods = [", "grid file"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RefuseToStartError, match=message):
        load_grid(write(tmp_path, text))


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible() -> None:
    values = [0.5, -0.2, 1.1, 0.3, 0.0, 0.8]
    first, again = bootstrap_mean(values), bootstrap_mean(values)
    assert first == again
    assert first["low"] < first["mean"] < first["high"]
    assert first["mean"] == pytest.approx(np.mean(values))
    assert bootstrap_mean([2.0])["unavailable"] == "one pair: no interval"
    assert bootstrap_mean([])["mean"] is None


def fake_run(root: Path, key: str, total: float, hold: float) -> str:
    run_dir = root / key
    run_dir.mkdir(parents=True)
    report = {
        "metrics": {
            "total_return_pct": total,
            "cagr_pct": None,
            "sharpe": total / 2,
            "max_drawdown_pct": 1.0,
            "turnover": 0.5,
        },
        "unavailable": {"cagr_pct": "the run spans 2 days (< 30)"},
        "buy_and_hold_figures": {
            "BTC/USDT": {"total_return_pct": hold},
            "ETH/USDT": {"total_return_pct": hold + 2},
        },
        "months": [{"agent_calls": 3, "cost_usd": 0.25}],
    }
    (run_dir / "report.json").write_text(json.dumps(report))
    return str(run_dir)


def test_the_report_pairs_on_and_off_by_period_and_seed(tmp_path: Path) -> None:
    entries = []
    returns = {("p1", 1): (2.0, 1.0), ("p1", 2): (3.0, 1.5), ("p2", 1): (-1.0, -1.0)}
    for (period, seed), (on, off) in returns.items():
        for memory, total in ((True, on), (False, off)):
            key = f"{period}-{seed}-{memory}"
            entries.append(
                RunEntry(
                    key,
                    fake_run(tmp_path, key, total, 4.0),
                    period,
                    "BTC/USDT,ETH/USDT",
                    "claude",
                    memory,
                    seed,
                    "base",
                    "done",
                )
            )
    entries.append(
        RunEntry(
            "lost",
            str(tmp_path / "lost"),
            "p2",
            "BTC/USDT,ETH/USDT",
            "claude",
            True,
            2,
            "base",
            "failed",
            "RefuseToStartError: no key",
        )
    )
    document = build_experiment(entries)
    on, off = document["table"]
    assert (on["memory"], on["runs"], off["runs"]) == ("on", 3, 3)
    assert on["total_return_pct"] == pytest.approx(4.0 / 3)
    assert on["buy_hold_return_pct"] == pytest.approx(5.0)  # equal weight of BTC 4 and ETH 6
    assert on["cagr_pct"] is None and "< 30" in on["unavailable"]["cagr_pct"]
    assert on["agent_calls"] == 3 and on["cost_usd"] == 0.25  # a model decided: shown
    [delta] = document["deltas"]
    assert delta["pairs"] == 3
    assert delta["total_return_pct"]["mean"] == pytest.approx((1.0 + 1.5 + 0.0) / 3)
    assert delta["total_return_pct"]["n"] == 3 and delta["cagr_pct"]["mean"] is None
    assert document["failed"] == [
        {
            "key": "lost",
            "run_dir": str(tmp_path / "lost"),
            "status": "failed",
            "reason": "RefuseToStartError: no key",
        }
    ]
    page = render_html(document)
    assert "RefuseToStartError: no key" in page and "buy &amp; hold" in page
