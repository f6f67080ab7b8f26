"""A person's editor rewriting ``runner_state.json`` through every attempt of a save: the store
gives up with ``StateSaveConflictError`` (a retry later merges their edit). Neither the decision
nor the tracker treats that as a failure: no traceback, no halt, the decision goes on to its
write-back and ``decision.made``, and the next save writes the state with the person's last edit.
Before, the error escaped the decision (``decision ... failed`` and a traceback, its write-back
and event skipped) and the tracker logged a traceback at every safety check."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from test_decision_routine import Rig
from test_tracker_support import BTC, make_rig
from test_trading_state import BUY_AND_SELL, _switch

import state.atomic
from broker.trading_state import TradingSwitch


@pytest.fixture
def editor_saving_through_every_write(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, bool]]:
    """While ``on["saving"]``: each time vigil has written its temporary copy of a
    ``runner_state.json``, a person saves a new ``notes`` over it in place."""
    real = state.atomic._write_durable_tmp
    on = {"saving": True}
    edits = count()

    def step(target: Path, data: bytes, *, durable: bool = True) -> tuple[Path, object]:
        if on["saving"] and target.name == "runner_state.json" and target.exists():
            saved = json.loads(target.read_text())
            saved["notes"] = f"edit {next(edits)}"
            target.write_text(json.dumps(saved))
        return real(target, data, durable=durable)

    monkeypatch.setattr(state.atomic, "_write_durable_tmp", step)
    yield on


async def test_a_decision_whose_save_keeps_meeting_an_edit_completes_without_halting(
    tmp_path: Path,
    editor_saving_through_every_write: dict[str, bool],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig(BUY_AND_SELL.model_copy(update={"memory_update": "SOL looked strong."}))
    switch, _ = _switch(tmp_path)
    rig.routine._trading = switch
    rig.routine._store = switch._store  # type: ignore[assignment]
    editor_saving_through_every_write["saving"] = False
    switch._store.save()
    editor_saving_through_every_write["saving"] = True

    record = await rig.routine.decide_once(["agent_timer"])

    assert "error" not in record and "kept changing" in record["state_error"]
    assert [d.decision_id for d in rig.made] == [record["decision_id"]]
    assert not switch.halted
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "not saved yet" in warned[0]

    second = await rig.routine.decide_once(["agent_timer"])  # still editing: said once
    assert "kept changing" in second["state_error"]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1

    editor_saving_through_every_write["saving"] = False
    third = await rig.routine.decide_once(["agent_timer"])
    assert "state_error" not in third
    saved = json.loads((tmp_path / "runner_state.json").read_text())
    assert saved["agent_memory"] == "SOL looked strong."
    assert saved["notes"].startswith("edit ")  # the person's last edit, merged


async def test_a_tracker_save_that_keeps_meeting_an_edit_is_kept_in_memory_without_a_traceback(
    tmp_path: Path,
    editor_saving_through_every_write: dict[str, bool],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = make_rig(tmp_path)
    switch = TradingSwitch(rig.clock, rig.store, lambda record: None)
    rig.tracker._trading = switch
    editor_saving_through_every_write["saving"] = False
    await rig.open_position(BTC, 100.0)
    editor_saving_through_every_write["saving"] = True

    for price in (101.0, 102.0, 103.0):
        rig.set_price(BTC, price)
        await rig.tracker.check_safety()

    assert not switch.halted
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "not saved yet" in warned[0]

    editor_saving_through_every_write["saving"] = False
    rig.set_price(BTC, 104.0)
    await rig.tracker.check_safety()
    saved = json.loads(rig.state_path.read_text())
    assert saved["notes"].startswith("edit ")
    assert saved["trailing_highs"][BTC] == 104.0  # the highs the tracker kept in memory
