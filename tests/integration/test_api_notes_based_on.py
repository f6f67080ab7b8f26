"""``PUT /api/memory/notes`` with ``based_on``, the texts the edit started from: a field the edit
changes that is stored otherwise now (a decision rewrote the agent's memory, another editor saved)
is a 409 and nothing is saved. Without it, the edit replaced a text its editor never saw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.api_support import serve_api
from fakes.save_race import save_after_tmp_written

from state.models import RunnerState, parse_state_bytes, render_state


def _stored(state_dir: Path) -> RunnerState:
    return parse_state_bytes((state_dir / "runner_state.json").read_bytes())[0]


async def _put(state_dir: Path, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with serve_api(state_dir) as api:
        url = api.url + "/api/memory/notes"
        async with api.session.put(url, headers=api.auth, json=body) as r:
            return r.status, await r.json()


async def test_an_edit_based_on_the_stored_text_is_saved(state_dir: Path) -> None:
    loaded = _stored(state_dir)
    code, body = await _put(state_dir, {"notes": "watch ETH", "based_on": {"notes": loaded.notes}})
    assert code == 200 and body["changed"] == ["notes"], body
    assert _stored(state_dir).notes == "watch ETH"


@pytest.mark.parametrize("field", ["notes", "agent_memory"])
async def test_an_edit_of_a_text_saved_otherwise_since_is_a_409_and_saves_nothing(
    state_dir: Path, field: str
) -> None:
    path = state_dir / "runner_state.json"
    before = path.read_bytes()
    code, body = await _put(state_dir, {field: "mine", "based_on": {field: "what I loaded"}})
    assert code == 409, body
    assert body["detail"].startswith(f"{field} changed since the edit's based_on was loaded")
    assert path.read_bytes() == before


async def test_based_on_a_field_the_edit_leaves_alone_is_not_checked(state_dir: Path) -> None:
    code, body = await _put(
        state_dir, {"notes": "watch ETH", "based_on": {"agent_memory": "an older memory"}}
    )
    assert code == 200, body
    assert _stored(state_dir).notes == "watch ETH"


async def test_a_save_landing_during_the_edit_is_checked_too(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read matched ``based_on``; a save of the notes landed between the route's read
    and its replace. The write merges into that save, and the check sees it: a 409, and the
    save stays."""
    path = state_dir / "runner_state.json"
    loaded = _stored(state_dir)
    saved = render_state(loaded.model_copy(update={"notes": "another editor's"}))
    landed = save_after_tmp_written(monkeypatch, path, saved)
    code, body = await _put(state_dir, {"notes": "mine", "based_on": {"notes": loaded.notes}})
    assert landed and code == 409, body
    assert path.read_bytes() == saved
