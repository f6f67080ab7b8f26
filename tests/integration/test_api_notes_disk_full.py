"""``PUT /api/memory/notes`` on a disk that fills during the write (a real short write: the
process may not grow a file past RLIMIT_FSIZE). The edit is refused naming the file, the file is
left as it was, and the API goes on answering."""

from __future__ import annotations

from pathlib import Path

from fakes.api_support import serve_api, write_state_dir
from fakes.disk_full import disk_full_after

from state.models import parse_state_bytes


async def test_a_notes_edit_the_disk_cannot_hold_is_a_507_naming_the_file(tmp_path: Path) -> None:
    """atomic_write_bytes' OSError escaped the route: a 500 with no reason (and a traceback in
    the log) for an edit that was not saved."""
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    path = state_dir / "runner_state.json"
    before = path.read_bytes()
    async with serve_api(state_dir) as api:
        url = api.url + "/api/memory/notes"
        with disk_full_after(len(before) + 10):
            async with api.session.put(url, headers=api.auth, json={"notes": "n" * 400}) as r:
                code, body = r.status, await r.json(content_type=None)
        health, _ = await api.get("/healthz")
    assert code == 507, body
    assert isinstance(body, dict) and "runner_state.json" in body["detail"]
    assert "not saved" in body["detail"]
    assert path.read_bytes() == before and parse_state_bytes(before)[0].notes == "watch SOL"
    assert [p.name for p in state_dir.iterdir() if p.name.endswith(".tmp")] == []
    assert health == 200
