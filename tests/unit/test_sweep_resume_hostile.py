"""A sweep folder whose recorded results were garbled (a hand edit, a truncated copy, a disk
fault) on resume: a run whose report.json is not a run report is not done; it is redone, never
skipped and then averaged into (or crashing) the experiment report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.report_support import write_run
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_sweep_grid_report import fake_run

from report.experiment import (
    FIGURE_MAX,
    RunEntry,
    build_experiment,
    report_figures,
    write_experiment,
)
from report.html import write_report
from runner.sweep.worker import is_done


def _report(tmp_path: Path) -> dict[str, Any]:
    run = Path(fake_run(tmp_path, "good", 2.0, 4.0))
    report: dict[str, Any] = json.loads((run / "report.json").read_text())
    return report


def _finished(run: Path, report: str) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "replay.json").write_text('{"finished": true}')
    (run / "report.json").write_text(report)
    return run


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: {},
        lambda r: {**r, "metrics": []},
        lambda r: {**r, "unavailable": ["x"]},
        lambda r: {**r, "metrics": {**r["metrics"], "total_return_pct": "12"}},
        lambda r: {**r, "metrics": {**r["metrics"], "sharpe": True}},
        lambda r: {**r, "months": [1]},
        lambda r: {**r, "months": [{"agent_calls": 3, "cost_usd": "x"}]},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": 5}},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": {"total_return_pct": [1]}}},
        "NaN",
        "Infinity",
        lambda r: {k: v for k, v in r.items() if k != "months"},
        lambda r: {**r, "months": [{"cost_usd": 0.25}]},
        lambda r: {**r, "months": [{"agent_calls": None, "cost_usd": None}]},
        lambda r: {**r, "months": [{"agent_calls": -30, "cost_usd": 0.25}]},
        lambda r: {**r, "months": [{"agent_calls": 1.5, "cost_usd": 0.25}]},
        lambda r: {**r, "months": [{"agent_calls": 3, "cost_usd": -5.0}]},
        lambda r: {**r, "months": [{"agent_calls": 3, "cost_usd": 1e308}] * 2},
        lambda r: {**r, "months": [{"agent_calls": 10**308, "cost_usd": 0.25}] * 2},
        lambda r: {k: v for k, v in r.items() if k != "buy_and_hold_figures"},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": {"total_return_pct": None}}},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": {}}},
        lambda r: {**r, "buy_and_hold_figures": {t: {"total_return_pct": 1e308} for t in "AB"}},
        lambda r: {**r, "metrics": {"cagr_pct": None}},
        lambda r: {**r, "metrics": {**r["metrics"], "total_return_pct": 1.5e308}},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": {"total_return_pct": -1e301}}},
    ],
    ids=[
        "empty",
        "metrics list",
        "unavailable list",
        "figure string",
        "figure bool",
        "month number",
        "cost string",
        "hold number",
        "hold list",
        "NaN",
        "Infinity",
        "no months",
        "month without calls",
        "month of nulls",
        "negative calls",
        "fractional calls",
        "negative cost",
        "cost sum overflows",
        "calls sum overflows",
        "no buy and hold",
        "hold null",
        "hold without return",
        "hold mean overflows",
        "metrics missing",
        "figure past 1e300",
        "hold past 1e300",
    ],
)
def test_a_run_whose_report_is_not_a_run_report_is_not_done(tmp_path: Path, edit: Any) -> None:
    good = _report(tmp_path)
    if isinstance(edit, str):  # json.loads reads these words as numbers
        text = json.dumps(good).replace('"total_return_pct": 2.0', f'"total_return_pct": {edit}')
        assert edit in text
    else:
        text = json.dumps(edit(good))
    assert is_done(_finished(tmp_path / "garbled", json.dumps(good)))
    assert not is_done(_finished(tmp_path / "garbled", text))


def test_the_experiment_of_done_runs_reads_their_reports(tmp_path: Path) -> None:
    run = _finished(tmp_path / "run", json.dumps(_report(tmp_path)))
    assert is_done(run)
    entry = RunEntry("k", str(run), "p", "BTC/USDT", "fallback", True, 1, "base", "done")
    [on, _off] = build_experiment([entry])["table"]
    assert on["total_return_pct"] == 2.0 and on["buy_hold_return_pct"] == 5.0


@pytest.mark.parametrize("empty", [False, True])
def test_a_report_vigil_wrote_is_done(tmp_path: Path, empty: bool) -> None:
    run = write_run(tmp_path, *([[], []] if empty else []))
    write_report(run)
    (run / "replay.json").write_text('{"finished": true}')
    assert is_done(run)


@pytest.mark.parametrize("finished", ['"false"', '"no"', "1", "[0]", '{"x": 1}'])
def test_a_replay_json_that_does_not_say_finished_true_is_not_done(
    tmp_path: Path, finished: str
) -> None:
    run = _finished(tmp_path / "run", json.dumps(_report(tmp_path)))
    (run / "replay.json").write_text(f'{{"finished": {finished}}}')
    assert not is_done(run)


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: {**r, "metrics": {**r["metrics"], "sharpe": 10**400}},
        lambda r: {**r, "buy_and_hold_figures": {"BTC/USDT": {"total_return_pct": -(10**400)}}},
        lambda r: {**r, "months": [{"agent_calls": 3, "cost_usd": 10**400}]},
    ],
    ids=["metric", "hold", "cost"],
)
def test_a_figure_too_long_for_a_float_is_not_done(tmp_path: Path, edit: Any) -> None:
    """json reads a 400-digit figure as an int no float holds: the done check raised
    OverflowError, which ended the sweep in a traceback before its report."""
    assert not is_done(_finished(tmp_path / "run", json.dumps(edit(_report(tmp_path)))))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELD = st.sampled_from(("total_return_pct", "sharpe", "agent_calls", "cost_usd", "months"))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "metrics": st.dictionaries(_FIELD, _JSON, max_size=5),
            "unavailable": st.just({}),
            "buy_and_hold_figures": st.dictionaries(st.text(max_size=2), _JSON, max_size=3),
            "months": st.lists(st.dictionaries(_FIELD, _JSON, max_size=3), max_size=3),
        },
    )
)
def test_any_report_reads_as_finite_figures_or_not_a_run_report(report: dict[str, Any]) -> None:
    figures = report_figures(report)
    assert figures is None or all(
        v is None or (type(v) in (int, float) and abs(v) <= FIGURE_MAX) for v in figures.values()
    )


def test_the_experiment_of_figures_at_their_bound_is_finite_json(tmp_path: Path) -> None:
    """Figures of 1.5e308 and -1.5e308 made a mean and an ON - OFF difference past the largest
    float: experiment.json held Infinity (no JSON) and the page 'inf'. Figures are bounded at
    1e300 in magnitude, under which no mean or difference of a sweep's runs overflows."""
    report = _report(tmp_path)
    entries = []
    for seed, (on, off) in enumerate([(1e300, -1e300), (1e300, -1e300), (1e300, 1e300)]):
        for memory, total in ((True, on), (False, off)):
            edited = {**report, "metrics": {**report["metrics"], "total_return_pct": total}}
            run = _finished(tmp_path / f"{seed}-{memory}", json.dumps(edited))
            assert is_done(run)
            entries.append(
                RunEntry(
                    f"{seed}{memory}", str(run), "p", "BTC", "fallback", memory, seed, "b", "done"
                )
            )
    write_experiment(tmp_path, entries)

    def refuse(word: str) -> None:
        raise AssertionError(f"experiment.json holds {word}")

    document = json.loads((tmp_path / "experiment.json").read_text(), parse_constant=refuse)
    assert document["deltas"][0]["total_return_pct"]["mean"] == pytest.approx(4e300 / 3)
    assert "inf" not in (tmp_path / "experiment.html").read_text()
