"""``PUT /api/memory/notes`` and another save of runner_state.json landing while it writes (a
person's editor, ``vigil trading halt``, the daemon's own save): that save is merged, not
overwritten (``state.merge_write``, as ``vigil trading`` writes).

The save is injected at a fixed step of the write (no threads, no sleeps): after the route read
the file and wrote its temporary file (``state.atomic._write_durable_tmp``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.api_support import serve_api, write_state_dir
from fakes.save_race import save_after_tmp_written

import state.atomic
from state.models import parse_state_bytes, render_state
from state.trading import HALTED, TradingState


async def test_a_halt_saved_during_a_notes_edit_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route read, edited and replaced the file: a halt written between its read and its
    replace was lost, and trading resumed by a notes edit."""
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    path = state_dir / "runner_state.json"
    before, _ = parse_state_bytes(path.read_bytes())
    halted = TradingState(mode=HALTED, reason="audit", since_ms=1, by="cli")
    saved = render_state(before.model_copy(update={"trading": halted, "agent_memory": "mine"}))
    async with serve_api(state_dir) as api:
        landed = save_after_tmp_written(monkeypatch, path, saved)
        url = api.url + "/api/memory/notes"
        async with api.session.put(url, headers=api.auth, json={"notes": "flat until CPI"}) as r:
            code, body = r.status, await r.json()
    assert landed  # the save did land between the read and the replace
    assert code == 200, body
    assert body["changed"] == ["notes"]
    after, _ = parse_state_bytes(path.read_bytes())
    assert after.notes == "flat until CPI"
    assert after.trading.halted and after.trading.reason == "audit"
    assert after.agent_memory == "mine"
    assert [p.name for p in state_dir.iterdir() if p.name.endswith(".tmp")] == []


async def test_a_file_that_keeps_changing_is_a_409_and_the_last_save_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    path = state_dir / "runner_state.json"
    before, _ = parse_state_bytes(path.read_bytes())
    real = state.atomic._write_durable_tmp
    saves: list[bytes] = []

    def step(target: Path, data: bytes, *, durable: bool = True) -> tuple[Path, object]:
        if target == path and parse_state_bytes(data)[0].notes == "flat until CPI":
            saves.append(render_state(before.model_copy(update={"agent_memory": f"v{len(saves)}"})))
            path.write_bytes(saves[-1])  # a save at every attempt
        return real(target, data, durable=durable)

    async with serve_api(state_dir) as api:
        monkeypatch.setattr(state.atomic, "_write_durable_tmp", step)
        url = api.url + "/api/memory/notes"
        async with api.session.put(url, headers=api.auth, json={"notes": "flat until CPI"}) as r:
            code, body = r.status, await r.json()
    assert code == 409, body
    assert "kept changing" in body["detail"] and "not saved" in body["detail"]
    assert path.read_bytes() == saves[-1]
